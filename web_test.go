package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// hostileText is an answer that runs script if a page puts it in as HTML.
const hostileText = `<img src=x onerror="window.__pwned=1;document.title='pwned'"><script>window.__pwned=2;document.title='pwned'</script>`

// startWeb starts 'gendex web' in p's folder and returns the URL it says
// it serves, without its query, and the URL it prints, with its ?token=.
// Without GENDEX_TOKEN in env, web makes a token of its own and, off a
// terminal, keeps it in a file it names: printed is then the URL with the
// file's token, as a user would open it.
func startWeb(t *testing.T, p *placeRun, env []string, args ...string) (base, printed string) {
	t.Helper()
	web := startGendexWith(t, gendexOpts{dir: p.dir, env: append([]string{"GENDEX_TOKEN="}, env...)}, p.bin, append([]string{"web", "--listen", freeAddr(t)}, args...)...)
	line, ok := web.StdoutLine("")
	if !ok {
		t.Fatalf("gendex web said nothing: exit %d\n%s", web.Wait(), web.Stderr())
	}
	_, rest, ok := strings.Cut(line, " on http://")
	printed, _, _ = strings.Cut(rest, ";")
	url, _, _ := strings.Cut(printed, "?")
	if !ok || !strings.HasSuffix(url, "/") {
		t.Fatalf("gendex web's first line names no URL: %q", line)
	}
	if saidFile.MatchString(printed) {
		token, _ := tokenInFile(t, printed)
		printed = url + "?token=" + token
	}
	return "http://" + url, "http://" + printed
}

// pageTable reads a table of the page by its section's id: dataset (or
// the first column) -> column -> the value the page holds (data-v).
const pageTable = `((id) => {
	const out = {};
	for (const tr of document.querySelectorAll('#' + id + ' table tbody tr, #' + id + ' table tfoot tr')) {
		const row = {};
		for (const td of tr.cells) row[td.dataset.col] = td.dataset.v === undefined ? null : td.dataset.v;
		out[tr.cells[0].dataset.v] = row;
	}
	return out;
})`

// TestWebInBrowser drives the web view in headless Chromium: its numbers
// are query progress's and query tokens', a user goes from the run to a
// dataset to an answer and on to the next by the page's own links, an
// answer holding HTML and script is shown as text and runs nothing, the
// page and its assets ask no other host, and while gen writes, the totals
// grow without a reload. It keeps screenshots at 1280x800 and a phone's
// width in $GENDEX_WEB_SCREENSHOTS when set (README's).
func TestWebInBrowser(t *testing.T) {
	t.Parallel()
	chromium(t)
	p := newPlaceRun(t)
	writeIDPrompts(t, filepath.Join(p.dir, "data", "calm"), "calm", 40)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "24", "data")
	hostile, _ := json.Marshal(hostileText)
	writeTestFile(t, filepath.Join(p.dir, "other", "hostile", "prompts.jsonl"),
		`{"id":"h1","messages":[{"role":"user","content":`+string(hostile)+`}]}`+"\n"+`{"id":"h2","prompt":"a second one"}`+"\n")
	writeTestFile(t, filepath.Join(p.dir, "other", "hostile", "raw_responses.jsonl"),
		`{"id":"h1","text":`+string(hostile)+`,"completion_tokens":31,"finish_reason":"stop","model":"m"}`+"\n"+
			`{"id":"h2","text":"plain","completion_tokens":2,"finish_reason":"length","model":"m"}`+"\n")
	p.mustRun("ingest", "other")

	base, printed := startWeb(t, p, nil, "--every", "1s")
	b := startBrowser(t)
	tb := b.newTab(1280, 800, false)
	tb.loadAs(printed, base) // the token once; then the cookie, in every tab

	// The numbers are the questions' own.
	var prog, toks map[string]map[string]*string
	tb.eval(pageTable+`("progress")`, &prog)
	tb.eval(pageTable+`("tokens")`, &toks)
	for _, ds := range []string{"calm", "hostile"} {
		row := queryRow(t, p, "progress", ds)
		for _, col := range []string{"prompts", "answered", "failed", "raw", "missing_raw", "truncated", "done_pct"} {
			sameNumber(t, "progress "+ds+" "+col, prog[ds][col], rowCell(t, row, col))
		}
		row = queryRow(t, p, "tokens", ds)
		for _, col := range []string{"records", "completion_tokens", "prompt_tokens", "p50_completion_tokens", "p99_completion_tokens", "avg_completion_tokens"} {
			sameNumber(t, "tokens "+ds+" "+col, toks[ds][col], rowCell(t, row, col))
		}
	}
	if prog["TOTAL"]["raw"] == nil || *prog["TOTAL"]["raw"] != "42" {
		t.Errorf("the page's TOTAL answers: %v, want 42", prog["TOTAL"]["raw"])
	}

	// The run -> the dataset -> its first answer -> the next, by the links.
	tb.click(`#progress a[href="/dataset?d=hostile"]`)
	tb.click(`table a[href^="/answer"]`)
	var got struct {
		H1, Text, Title, Prompt string
		Pwned                   any
		Imgs, Scripts           int
	}
	read := `({H1: document.querySelector('h1').textContent, Text: document.getElementById('answer-text').textContent,
		Title: document.title, Pwned: window.__pwned === undefined ? null : window.__pwned,
		Prompt: document.querySelector('.msg.user pre').textContent,
		Imgs: document.querySelectorAll('img[src="x"]').length,
		Scripts: [...document.scripts].filter(s => !s.src.endsWith('/static/app.js')).length})`
	tb.eval(read, &got)
	if !strings.HasSuffix(got.H1, "h1") || got.Text != hostileText || got.Prompt != hostileText {
		t.Errorf("the answer page: h1 %q, text %q, prompt %q; want h1 and the hostile text as text", got.H1, got.Text, got.Prompt)
	}
	if got.Pwned != nil || strings.Contains(got.Title, "pwned") || got.Imgs != 0 || got.Scripts != 0 {
		t.Errorf("the hostile answer ran: __pwned %v, title %q, %d injected images, %d other scripts", got.Pwned, got.Title, got.Imgs, got.Scripts)
	}
	tb.click(`a[rel="next"]`)
	var h1 string
	tb.eval(`document.querySelector('h1').textContent + ' | ' + document.querySelector('.facts').textContent`, &h1)
	if !strings.Contains(h1, "h2 |") || !strings.Contains(h1, "length") {
		t.Errorf("next from h1: %q, want h2, cut at the limit", h1)
	}

	// While gen writes, the totals grow without a reload.
	slow := startSimProcess(t, p.bin, "--decode-tps", "30", "--slots", "2")
	writeIDPrompts(t, filepath.Join(p.dir, "live", "slow"), "slow", 24)
	tb.load(base)
	tb.eval(`window.__marker = 42`, nil)
	gen := startGendex(t, p.bin, p.dir, "gen", "--server", slow, "--max-new-tokens", "12", "live")
	context.AfterFunc(browserContext(t), gen.Kill) // as the browser's deadline
	seen := map[string]bool{}
	var grew []string
	waitFor(t, 90*time.Second, "the page's TOTAL answers to grow while gen writes", func() bool {
		var st struct {
			Raw     *string
			Marker  any
			Updates string
		}
		tb.eval(`({Raw: (`+pageTable+`("progress").TOTAL || {}).raw, Marker: window.__marker, Updates: document.body.dataset.updates || ''})`, &st)
		if st.Marker != float64(42) {
			t.Fatalf("the page was reloaded (marker %v)", st.Marker)
		}
		if st.Raw != nil && !seen[*st.Raw] {
			seen[*st.Raw] = true
			grew = append(grew, *st.Raw)
		}
		return len(grew) >= 3
	})
	// The page grew while gen wrote: the rest of the run is not needed.
	gen.Interrupt()
	if code := gen.Wait(); code != 0 && code != 130 {
		t.Fatalf("gen: exit %d, want exit 0 or 130 (interrupted)\n%s", code, gen.Stderr())
	}
	for i := 1; i < len(grew); i++ {
		a, _ := strconv.Atoi(grew[i-1])
		c, _ := strconv.Atoi(grew[i])
		if c <= a {
			t.Errorf("the page's TOTAL answers went %v: not growing", grew)
		}
	}
	t.Logf("the page's TOTAL answers while gen wrote, without a reload: %v", grew)

	// Screenshots, looked at for README: the run, and an answer on a phone.
	dir := os.Getenv("GENDEX_WEB_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	shots := []struct {
		name          string
		width, height int
		mobile        bool
		url           string
	}{
		{"web-run-1280.png", 1280, 800, false, base},
		{"web-run-phone.png", 390, 844, true, base},
		{"web-dataset-1280.png", 1280, 800, false, base + "dataset?d=calm"},
		{"web-answer-phone.png", 390, 844, true, base + "answer?d=hostile&id=h1"},
	}
	for _, s := range shots {
		st := b.newTab(s.width, s.height, s.mobile)
		st.load(s.url)
		time.Sleep(300 * time.Millisecond) // the charts' images
		path := filepath.Join(dir, s.name)
		st.screenshot(path)
		checkScreenshot(t, path, s.width, s.height)
	}

	// Nothing was asked of another host.
	for _, u := range b.Requests() {
		if !strings.HasPrefix(u, base) && u != "about:blank" {
			t.Errorf("the page asked another host: %s", u)
		}
	}
}

// sameNumber checks that a page's value equals a TSV cell, as numbers
// (unknown, "" in TSV, is no value in the page).
func sameNumber(t *testing.T, what string, page *string, tsv string) {
	t.Helper()
	if page == nil || tsv == "" {
		if page != nil || tsv != "" {
			t.Errorf("%s: page %v, query %q", what, page, tsv)
		}
		return
	}
	a, errA := strconv.ParseFloat(*page, 64)
	b, errB := strconv.ParseFloat(tsv, 64)
	if errA != nil || errB != nil || a != b {
		t.Errorf("%s: page %q, query %q", what, *page, tsv)
	}
}

// checkScreenshot checks a PNG's size and that it shows something.
func checkScreenshot(t *testing.T, path string, width, height int) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if r := img.Bounds(); r.Dx() != width || r.Dy() != height {
		t.Errorf("%s: %dx%d, want %dx%d", path, r.Dx(), r.Dy(), width, height)
	}
	colors := map[uint32]bool{}
	for y := 0; y < img.Bounds().Dy(); y += 7 {
		for x := 0; x < img.Bounds().Dx(); x += 7 {
			r, g, b, _ := img.At(x, y).RGBA()
			colors[r>>12<<8|g>>12<<4|b>>12] = true
		}
	}
	if len(colors) < 4 {
		t.Errorf("%s: %d colours: a blank page", path, len(colors))
	}
}

// TestWebListenNeedsToken: web on an address other machines reach refuses
// to start without $GENDEX_TOKEN (a usage error, exit 2, nothing served);
// with it, a request without the token gets 401 and one with it the page.
func TestWebListenNeedsToken(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	p.mustRun("gen", "--server", "sim", "demo")
	port := freePort(t)
	code, stderr := p.run("web", "--listen", fmt.Sprintf("0.0.0.0:%d", port))
	if code != 2 || !strings.Contains(stderr, "GENDEX_TOKEN") {
		t.Errorf("web --listen 0.0.0.0 without a token: exit %d, %q; want 2 naming GENDEX_TOKEN", code, stderr)
	}
	url, _ := startWeb(t, p, []string{"GENDEX_TOKEN=tok-123"})
	// startWeb listens on loopback; the token guards it there too.
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer tok-123")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`id="progress"`)) {
		t.Errorf("with the token: %d\n%s", resp.StatusCode, body)
	}
	// No index here: web says so and serves nothing.
	code, stderr = p.run("--db", filepath.Join(p.dir, "none.db"), "web", "--listen", freeAddr(t))
	if code == 0 || !strings.Contains(stderr, "none.db") {
		t.Errorf("web without an index: exit %d, %q", code, stderr)
	}
}
