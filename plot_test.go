package main

import (
	"context"
	"fmt"
	imgpng "image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/store"
)

// plotDB builds, through the store API, the index the plot goldens draw:
// two hours before clockNow of one answer a second of dataset glaive
// (tokens in a slow wave), and from 08:30 of dataset sharegpt (more
// tokens, every 10th answer without a count); the server
// http://gpu1:30000 went down at 08:50 (no answers until it was up again
// at 09:05, with a restart), and was sampled every 5 s (queued and KV use
// following the load).
func plotDB(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plot.db")
	db, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC)
	down, up := start.Add(50*time.Minute), start.Add(65*time.Minute)
	end := start.Add(118 * time.Minute)
	const srv = "http://gpu1:30000"
	err = db.Update(func(tx *store.Tx) error {
		n := 0
		for at := start; at.Before(end); at = at.Add(time.Second) {
			if !at.Before(down) && at.Before(up) {
				continue
			}
			x := at.Sub(start).Seconds()
			add := func(ds string, tokens int64) error {
				n++
				shape := store.ShapeFlat
				if tokens == store.Unknown {
					shape = store.ShapeUnknown
				}
				r := store.Record{ID: fmt.Sprint(n), Shape: shape, PromptTokens: 50, CompletionTokens: tokens, CachedTokens: store.Unknown,
					ReasoningTokens: store.Unknown, Finish: "stop", Time: at.UnixMilli() + 250, OwnTime: true, File: 1}
				_, err := tx.Add(ds, store.Raw, &r)
				return err
			}
			if err := add("glaive", int64(400+250*math.Sin(x/900))); err != nil {
				return err
			}
			if at.Before(start.Add(30 * time.Minute)) {
				continue
			}
			tok := int64(900 + 300*math.Cos(x/500))
			if n%10 == 0 {
				tok = store.Unknown
			}
			if err := add("sharegpt", tok); err != nil {
				return err
			}
		}
		for at := start; at.Before(end); at = at.Add(5 * time.Second) {
			s := &store.ServerSample{Time: at.UnixMilli(), Run: start.UnixMilli(), Up: at.Before(down) || !at.Before(up)}
			if s.Up {
				x := at.Sub(start).Seconds()
				s.Scraped = true
				s.Set(store.MetricQueued, math.Round(20+15*math.Sin(x/700)))
				s.Set(store.MetricTokenUsage, 0.55+0.35*math.Sin(x/1100))
			}
			if err := tx.PutServerSample(srv, s); err != nil {
				return err
			}
		}
		for _, e := range []store.Event{
			{Time: start.UnixMilli(), Server: srv, Name: "up", Detail: "ready"},
			{Time: down.UnixMilli(), Server: srv, Name: "down", Detail: "12 requests in flight"},
			{Time: up.UnixMilli(), Server: srv, Name: "up", Detail: "back after 15m0s"},
			{Time: up.Add(2 * time.Second).UnixMilli(), Server: srv, Name: "restarted", Detail: "process_start_time_seconds changed"},
		} {
			if err := tx.AddEvent(&e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// plotGolden compares got with testdata/plot/name (-update rewrites it).
func plotGolden(t *testing.T, name, got string) {
	t.Helper()
	goldenIn(t, filepath.Join("testdata", "plot", name), got)
}

// TestPlotGolden: gendex plot at 80x24 and 200x50 on plotDB: the total and
// both datasets, the gap while the server was down drawn at 0, the down,
// up and restart on the time axis and in the legend, the times in $TZ; and
// the queue and KV use per server. Every line fits the width, and the
// chart the height.
func TestPlotGolden(t *testing.T) {
	t.Parallel()
	db := plotDB(t)
	env := testEnv(map[string]string{"TZ": "UTC"})
	for _, c := range []struct {
		golden string
		args   []string
	}{
		{"tokens-80x24.golden", []string{"--width", "80", "--height", "24"}},
		{"tokens-76x24.golden", []string{"--width", "76", "--height", "24"}}, // README's, a code block within 80
		{"tokens-200x50.golden", []string{"--width", "200", "--height", "50"}},
		{"answers-since-1h-80x24.golden", []string{"answers", "--since", "1h", "--width", "80", "--height", "24", "sharegpt"}},
		{"queue-80x24.golden", []string{"queue", "--width", "80", "--height", "24"}},
		{"kv-200x50.golden", []string{"kv", "--width", "200", "--height", "50"}},
	} {
		out := mustGendex(t, env, append([]string{"--db", db, "plot"}, c.args...)...).stdout
		var w, h int
		fmt.Sscanf(c.golden[strings.LastIndexByte(c.golden, '-')+1:], "%dx%d", &w, &h)
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) > h {
			t.Errorf("%s: %d lines, more than %d", c.golden, len(lines), h)
		}
		for _, l := range lines {
			if n := len([]rune(l)); n > w {
				t.Errorf("%s: a line of %d columns: %q", c.golden, n, l)
			}
		}
		plotGolden(t, c.golden, out)
	}
	// The times are in $TZ's zone: in Tokyo (UTC+9) the same run is from
	// 17:00 to 19:00 JST, and the server went down at 17:50.
	if _, err := time.LoadLocation("Asia/Tokyo"); err != nil {
		t.Logf("no zone data for Asia/Tokyo (%v): $TZ not checked", err)
		return
	}
	out := mustGendex(t, testEnv(map[string]string{"TZ": "Asia/Tokyo"}), "--db", db, "plot", "--width", "80", "--height", "24").stdout
	if title, _, _ := strings.Cut(out, "\n"); !strings.HasSuffix(title, "2026-11-28 17:00–19:00 JST") || !strings.Contains(out, "17:50:00 ↓ gpu1:30000 down") {
		t.Errorf("TZ=Asia/Tokyo: the times are not in $TZ's zone:\n%s", out)
	}
}

// TestPlotUsage: a bad flag or duration is a usage error; -h prints plot's
// help with its flags.
func TestPlotUsage(t *testing.T) {
	t.Parallel()
	db := plotDB(t)
	env := testEnv(nil)
	for _, args := range [][]string{{"--since", "soon"}, {"--step", "10ms"}, {"--width", "-3"}, {"--nope"}} {
		if r := gendex(t, env, append([]string{"--db", db, "plot"}, args...)...); r.code != 2 {
			t.Errorf("plot %q: %s", args, r)
		}
	}
	// An index with prompts and no answer has nothing to draw: an error,
	// not an empty chart that exits 0, and no SVG file.
	empty := filepath.Join(t.TempDir(), "e.db")
	mustGendex(t, env, "--db", empty, "ingest", filepath.Join("testdata", "demo", "B1_ids", "prompts.jsonl"))
	svg := filepath.Join(t.TempDir(), "x.svg")
	for _, args := range [][]string{nil, {"--svg", svg}} {
		if r := gendex(t, env, append([]string{"--db", empty, "plot"}, args...)...); r.code != 1 || !strings.Contains(r.stderr, "nothing to plot: no answer in the index") {
			t.Errorf("plot %q of an index without answers: %s", args, r)
		}
	}
	if _, err := os.Stat(svg); err == nil {
		t.Error("plot --svg wrote a chart of nothing")
	}
	r := mustGendex(t, env, "plot", "-h")
	for _, want := range []string{"usage: gendex plot", "-svg", "-since", "-width"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("plot -h has no %q:\n%s", want, r.stdout)
		}
	}
}

// TestPlotSVGInBrowser: plot --svg writes a self-contained SVG (no script,
// nothing fetched) that a real browser renders: headless Chromium
// screenshots it, and the PNG holds the first panel's line (blue) and the
// down mark (red) on white. It skips where Chromium is not installed
// (Debian: apt-get install chromium; .ci/run installs it).
// $GENDEX_PLOT_SCREENSHOT keeps the PNG at that path.
func TestPlotSVGInBrowser(t *testing.T) {
	t.Parallel()
	db := plotDB(t)
	dir := t.TempDir()
	svg := filepath.Join(dir, "plot.svg")
	r := mustGendex(t, testEnv(map[string]string{"TZ": "UTC"}), "--db", db, "plot", "--svg", svg)
	if r.stdout != "wrote "+svg+"\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	plotGolden(t, "tokens.svg", string(data)) // README shows it
	s := string(data)
	for _, bad := range []string{"<script", "href=", "url(", "@import", "<image", "<foreignObject"} {
		if strings.Contains(s, bad) {
			t.Errorf("the SVG has %q: it must be self-contained", bad)
		}
	}
	for _, want := range []string{"completion tokens/s, total and per dataset", "glaive: mean", "08:50:00 ↓ gpu1:30000 down (12 requests in flight)"} {
		if !strings.Contains(s, want) {
			t.Errorf("the SVG has no %q", want)
		}
	}
	browser := chromium(t) // skips without one; the SVG's own checks passed
	var width, height int
	if _, err := fmt.Sscanf(s, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d"`, &width, &height); err != nil {
		t.Fatalf("the SVG's size: %v", err)
	}
	png := filepath.Join(dir, "plot.png")
	if p := os.Getenv("GENDEX_PLOT_SCREENSHOT"); p != "" {
		png = p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a hung browser fails, never stalls
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+png, fmt.Sprintf("--window-size=%d,%d", width, height), "file://"+svg)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", browser, err, out)
	}
	f, err := os.Open(png)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := imgpng.Decode(f)
	if err != nil {
		t.Fatalf("the screenshot: %v", err)
	}
	b := img.Bounds()
	var white, blue, red int
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			switch {
			case r > 245 && g > 245 && bl > 245:
				white++
			case near(r, g, bl, 0x1f, 0x5f, 0xbf):
				blue++
			case near(r, g, bl, 0xc6, 0x28, 0x28):
				red++
			}
		}
	}
	t.Logf("%s: %dx%d, %d white, %d blue (the TOTAL line), %d red (the down mark) pixels", png, b.Dx(), b.Dy(), white, blue, red)
	if b.Dx() != width || b.Dy() != height || white < b.Dx()*b.Dy()/2 || blue < 200 || red < 50 {
		t.Errorf("the screenshot does not show the chart: %dx%d (want %dx%d), %d white, %d blue, %d red pixels", b.Dx(), b.Dy(), width, height, white, blue, red)
	}
}

// near reports whether the colour r, g, b is within 40 of R, G, B in each part.
func near(r, g, b uint32, R, G, B int) bool {
	d := func(x uint32, y int) bool { return int(x)-y < 40 && y-int(x) < 40 }
	return d(r, R) && d(g, G) && d(b, B)
}

// TestPlotInShell: the shell's plot draws the same chart as gendex plot
// (its times in the system's zone), and its help lists it.
func TestPlotInShell(t *testing.T) {
	t.Parallel()
	db := plotDB(t)
	env := testEnv(nil)
	env.Stdin = strings.NewReader("plot --width 80 --height 24\nhelp\n")
	r := mustGendex(t, env, "--db", db, "shell")
	lines := strings.Split(r.stdout, "\n")
	if len(lines) < 24 || lines[0] != "completion tokens/s, total and per dataset, "+rangeIn(time.Local) || !strings.HasPrefix(lines[22], "events: ") {
		t.Errorf("shell plot:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "  plot [tokens|answers|queue|kv|limit|accept]") {
		t.Errorf("shell help has no plot:\n%s", r.stdout)
	}
}

// rangeIn is the title's span of plotDB's chart in loc.
func rangeIn(loc *time.Location) string {
	from, to := time.Date(2026, 11, 28, 8, 0, 0, 0, time.UTC).In(loc), clockNow.Truncate(time.Second).In(loc)
	zone, _ := to.Zone()
	if from.YearDay() != to.YearDay() {
		return from.Format("2006-01-02 15:04") + " – " + to.Format("2006-01-02 15:04") + " " + zone
	}
	return from.Format("2006-01-02 15:04") + "–" + to.Format("15:04") + " " + zone
}

// TestReadmeChartIsTheGolden: the chart README shows is the 76x24 golden,
// indented as a code block (80 columns), so a change to the chart that
// updates the golden shows in README too.
func TestReadmeChartIsTheGolden(t *testing.T) {
	t.Parallel()
	golden, err := os.ReadFile(filepath.Join("testdata", "plot", "tokens-76x24.golden"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	var block strings.Builder
	for line := range strings.Lines(string(golden)) {
		block.WriteString("    " + line)
	}
	if !strings.Contains(string(readme), block.String()) {
		t.Errorf("README.md does not show testdata/plot/tokens-76x24.golden as its chart (indented 4 spaces); copy it there")
	}
}
