package shell

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/store"
	"gendex/store/terminal"
)

// writeDataset writes a dataset of 10 prompts and n answers, all finished
// at the given time, under root.
func writeDataset(t *testing.T, root, name string, n int, at time.Time) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var prompts, raw strings.Builder
	for i := range 10 {
		fmt.Fprintf(&prompts, `{"id":"%s%d","text":"q"}`+"\n", name, i)
		if i < n {
			fmt.Fprintf(&raw, `{"id":"%s%d","text":"a","completion_tokens":10,"finished_at":%q}`+"\n", name, i, at.UTC().Format(time.RFC3339Nano))
		}
	}
	for file, text := range map[string]string{"prompts.jsonl": prompts.String(), "raw_responses.jsonl": raw.String()} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// afterProgress answers like Local, and runs hook once, right after the
// first progress question: a dataset indexed between the dashboard's
// questions.
type afterProgress struct {
	query.Local
	hook func()
}

func (a *afterProgress) Ask(ctx context.Context, q query.Query, now time.Time, out query.Sink) error {
	err := a.Local.Ask(ctx, q, now, out)
	if q.Question == "progress" && a.hook != nil {
		a.hook()
		a.hook = nil
	}
	return err
}

// A dataset that sorts between the others and appears between the
// dashboard's questions keeps every rate on its own row.
func TestDashboardJoinsByDataset(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC) // at a second's start: the spans are whole seconds
	sec := now.Truncate(time.Second)
	root := t.TempDir()
	writeDataset(t, root, "A", 6, sec.Add(-20*time.Second)) // 6 over 20 s: 0.30/s, 4 left
	writeDataset(t, root, "C", 2, sec.Add(-10*time.Second)) // 2 over 10 s: 0.20/s, 8 left
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ingesttest.IndexInto(t, db, root)

	late := t.TempDir()
	writeDataset(t, late, "B", 9, sec.Add(-5*time.Second)) // 9 over 5 s: 1.80/s
	ask := &afterProgress{Local: query.Local{Src: db}, hook: func() { ingesttest.IndexInto(t, db, late) }}
	sh := &Shell{Ask: ask, Now: func() time.Time { return now }, format: query.TSV}
	var b strings.Builder
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	want := "dataset\tanswered\tprompts\tdone_pct\tfailed\tturns\tanswers/s 30s\ttokens/s 30s\tanswers/s 5m\ttokens/s 5m\teta\n" +
		"A\t6\t10\t60.00\t0\t0\t0.30\t3.0\t0.30\t3.0\t10s\n" + // 4 left at the run's 8/20 s
		"C\t2\t10\t20.00\t0\t0\t0.20\t2.0\t0.20\t2.0\t30s\n" //   and 8 after them: TOTAL's
	if b.String() != want {
		t.Errorf("dashboard:\n%s\nwant:\n%s", b.String(), want)
	}

	// The next refresh shows B on its own row; TOTAL (shown in a table) is
	// the three from A's first answer: 17 over 20 s, 13 left at 0.85/s.
	// Each dataset's ETA is at that rate too, with the prompts left above
	// it (gen answers datasets in turn): the last one's is TOTAL's.
	sh.format = query.Table
	b.Reset()
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(strings.NewReplacer("│", " ", "|", " ").Replace(l)); len(f) > 0 && f[0] != "dataset" {
			rows = append(rows, strings.Join(f, " "))
		}
	}
	// Every answer is in the last minute: the sparkline is blank (braille
	// blanks at a cell's ends) up to a full block.
	spark := strings.Repeat("\u2800", sparkMinutes-1) + "█"
	wantRows := []string{
		"A 6 10 60.00 0 0.30 3.0 0.30 3.0 5s " + spark,
		"B 9 10 90.00 0 1.80 18.0 1.80 18.0 6s " + spark,
		"C 2 10 20.00 0 0.20 2.0 0.20 2.0 15s " + spark,
		"TOTAL 17 30 56.67 0 0.85 8.5 0.85 8.5 15s " + spark,
	}
	if !slices.Equal(rows, wantRows) {
		t.Errorf("dashboard rows:\n%s\nwant:\n%s", strings.Join(rows, "\n"), strings.Join(wantRows, "\n"))
	}
}

// TestDashboardShowsTurns: while conversations are half done, done stays
// put and turns counts the turns answered.
func TestDashboardShowsTurns(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC) // at a second's start: the spans are whole seconds
	root := t.TempDir()
	writeDataset(t, root, "A", 0, now)
	var turns strings.Builder
	for i := range 3 {
		fmt.Fprintf(&turns, `{"id":"A%d","turn":1,"turns":3,"text":"a","completion_tokens":10}`+"\n", i)
	}
	fmt.Fprintf(&turns, `{"id":"A0","turn":2,"turns":3,"text":"a","completion_tokens":10}`+"\n")
	if err := os.WriteFile(filepath.Join(root, "A", "turns.jsonl"), []byte(turns.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	db, _ := ingesttest.Index(t, root)
	sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.Table}
	var b strings.Builder
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, l := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(strings.NewReplacer("│", " ", "|", " ").Replace(l)); len(f) > 0 {
			rows = append(rows, strings.Join(f, " "))
		}
	}
	if len(rows) < 2 || !strings.Contains(rows[0], "failed turns answers/s") || !strings.HasPrefix(rows[1], "A 0 10 0.00 0 4 ") {
		t.Errorf("dashboard:\n%s\nwant a turns column with 4 for A", b.String())
	}
}

// TestDashboardShowsRecords: once a dataset has training records or
// exclusions (export, gen --export), watch shows both, per dataset.
func TestDashboardShowsRecords(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC) // at a second's start: the spans are whole seconds
	root := t.TempDir()
	writeDataset(t, root, "A", 6, now)
	writeDataset(t, root, "B", 2, now)
	files := map[string]string{
		"tokenized.jsonl": `{"id":"A0","input_ids":[1,2],"loss_mask":[0,1]}` + "\n" + `{"id":"A1","input_ids":[1,2],"loss_mask":[0,1]}` + "\n" +
			`{"id":"A2","input_ids":[1,2],"loss_mask":[0,1]}` + "\n",
		"excluded.jsonl": `{"id":"A3","reason":"length","detail":"cut off","excluded_at":"2026-11-28T10:00:00Z"}` + "\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(root, "A", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, _ := ingesttest.Index(t, root)
	sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.TSV}
	var b strings.Builder
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"dataset\tanswered\tprompts\tdone_pct\tfailed\tturns\trecords\texcluded\t",
		"A\t6\t10\t60.00\t0\t0\t3\t1\t",
		"B\t2\t10\t20.00\t0\t0\t0\t0\t",
	}
	if len(rows) != len(want) {
		t.Fatalf("dashboard:\n%s", b.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(rows[i], w) {
			t.Errorf("row %d: %q; want it to start with %q", i, rows[i], w)
		}
	}
}

// TestDashboardShowsTruncated: once a dataset has answers cut at the token
// limit (finish_reason length), watch shows how many, per dataset, after
// errors; not before.
func TestDashboardShowsTruncated(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC) // at a second's start: the spans are whole seconds
	root := t.TempDir()
	writeDataset(t, root, "A", 3, now)
	writeDataset(t, root, "B", 2, now)
	dashboard := func() []string {
		t.Helper()
		db, _ := ingesttest.Index(t, root)
		sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.TSV}
		var b strings.Builder
		if err := sh.dashboard(t.Context(), &b); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(b.String()), "\n")
	}
	if rows := dashboard(); strings.Contains(rows[0], "truncated") {
		t.Errorf("no answer is cut, yet the dashboard has a truncated column:\n%s", strings.Join(rows, "\n"))
	}
	raw := `{"id":"A0","text":"a","completion_tokens":8,"finish_reason":"length"}` + "\n" +
		`{"id":"A1","text":"a","completion_tokens":8,"finish_reason":{"type":"length","length":8}}` + "\n" +
		`{"id":"A2","text":"a","completion_tokens":3,"finish_reason":"stop"}` + "\n"
	if err := os.WriteFile(filepath.Join(root, "A", "raw_responses.jsonl"), []byte(raw), 0o644); err != nil {
		t.Fatal(err)
	}
	rows := dashboard()
	want := []string{
		"dataset\tanswered\tprompts\tdone_pct\tfailed\ttruncated\tturns\t",
		"A\t3\t10\t30.00\t0\t2\t0\t",
		"B\t2\t10\t20.00\t0\t0\t0\t",
	}
	if len(rows) != len(want) {
		t.Fatalf("dashboard:\n%s", strings.Join(rows, "\n"))
	}
	for i, w := range want {
		if !strings.HasPrefix(rows[i], w) {
			t.Errorf("row %d: %q; want it to start with %q", i, rows[i], w)
		}
	}
}

// TestDashboardShowsSamples: a dataset of 3 samples per prompt (gen
// --samples) has a samples column beside prompts, as progress has, so its
// answered (answers: 4 of 30) and done_pct read right against 10 prompts;
// a dataset of one sample shows the column's 1.
func TestDashboardShowsSamples(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	root := t.TempDir()
	writeDataset(t, root, "B", 2, now)
	writeDataset(t, root, "S", 0, now)
	var raw strings.Builder
	for _, u := range [][2]int{{0, 0}, {0, 1}, {0, 2}, {1, 0}} {
		fmt.Fprintf(&raw, `{"sample":%d,"samples":3,"id":"S%d","text":"a","completion_tokens":10,"finished_at":%q}`+"\n", u[1], u[0], now.Format(time.RFC3339Nano))
	}
	if err := os.WriteFile(filepath.Join(root, "S", "raw_responses.jsonl"), []byte(raw.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	db, _ := ingesttest.Index(t, root)
	sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.TSV}
	var b strings.Builder
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"dataset\tanswered\tprompts\tsamples\tdone_pct\tfailed\tturns\t",
		"B\t2\t10\t1\t20.00\t0\t0\t",
		"S\t4\t10\t3\t13.33\t0\t0\t",
	}
	if len(rows) < len(want) {
		t.Fatalf("dashboard:\n%s", b.String())
	}
	for i, w := range want {
		if !strings.HasPrefix(rows[i], w) {
			t.Errorf("row %d: %q; want it to start with %q", i, rows[i], w)
		}
	}
}

// TestSparkline: eight levels scaled to the line's own maximum, a space
// for a step with nothing, all spaces when nothing at all; in a table
// cell the blanks at the ends are braille blanks (the table trims spaces).
func TestSparkline(t *testing.T) {
	for _, c := range []struct {
		vals []float64
		want string
	}{
		{[]float64{1, 2, 3, 4, 5, 6, 7, 8}, "▁▂▃▄▅▆▇█"},
		{[]float64{10, 20, 30, 40, 50, 60, 70, 80}, "▁▂▃▄▅▆▇█"},
		{[]float64{100.0 / 60, 200.0 / 60, 300.0 / 60, 400.0 / 60}, "▂▄▆█"},
		{[]float64{0, 4, 0, 8, 0}, " ▄ █ "},
		{[]float64{0.001, 1000}, "▁█"},
		{[]float64{3, 3, 3}, "███"},
		{[]float64{0, 0, 0}, "   "},
		{[]float64{-1, math.NaN(), 2}, "  █"},
		{nil, ""},
	} {
		if got := sparkline(c.vals); got != c.want {
			t.Errorf("sparkline(%v) = %q, want %q", c.vals, got, c.want)
		}
	}
	for line, want := range map[string]string{
		"  ▂ █ ": "\u2800\u2800▂ █\u2800",
		"▂▄":     "▂▄",
		"   ":    "\u2800\u2800\u2800",
	} {
		if got := sparkCell(line); got != want {
			t.Errorf("sparkCell(%q) = %q, want %q", line, got, want)
		}
	}
}

// sparkIndex returns an index whose answers are spread over the 30
// minutes before now (10:00:30.5, so that the last minute is 30 s so
// far): A_code has 1 to 4 answers of 100 tokens a minute with a gap of 5
// minutes, B_chat (no token counts) an answer a minute in the last 8.
func sparkIndex(t *testing.T, now time.Time) *store.DB {
	t.Helper()
	root := t.TempDir()
	first := now.Truncate(time.Minute).Add(-29 * time.Minute) // 09:31
	write := func(name string, tokens bool, count func(k int) int) {
		var prompts, raw strings.Builder
		n := 0
		for k := range sparkMinutes {
			at := first.Add(time.Duration(k)*time.Minute + 10*time.Second).Format(time.RFC3339Nano)
			for range count(k) {
				fmt.Fprintf(&prompts, `{"id":"%s%d","text":"q"}`+"\n", name, n)
				if tokens {
					fmt.Fprintf(&raw, `{"id":"%s%d","text":"a","completion_tokens":100,"finished_at":%q}`+"\n", name, n, at)
				} else {
					fmt.Fprintf(&raw, `{"id":"%s%d","text":"a","finished_at":%q}`+"\n", name, n, at)
				}
				n++
			}
		}
		for range 5 {
			fmt.Fprintf(&prompts, `{"id":"%s%d","text":"q"}`+"\n", name, n)
			n++
		}
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for file, text := range map[string]string{"prompts.jsonl": prompts.String(), "raw_responses.jsonl": raw.String()} {
			if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("A_code", true, func(k int) int {
		if k >= 10 && k < 15 {
			return 0 // the gap: 09:41 to 09:45
		}
		return 1 + k%4
	})
	write("B_chat", false, func(k int) int {
		if k >= 22 {
			return 1
		}
		return 0
	})
	db, _ := ingesttest.Index(t, root)
	return db
}

// TestWatchSparkline: watch's table ends with a sparkline per dataset
// and TOTAL of the last 30 minutes, a minute a character: A_code's
// tokens/s with its gap blank (the last minute, 2 answers in its 30 s so
// far, is as high as 4 in a whole one), B_chat's answers/s (its tokens are
// unknown). The column goes before anything else on a narrow terminal
// (goldens at 60, 80, 120 and 200 columns): at 120, where the other
// columns fit whole without it, it is gone, and never named hidden (TSV
// has none).
func TestWatchSparkline(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 30, 0, time.UTC) // at a second's start: the spans are whole seconds
	db := sparkIndex(t, now)
	wantLines := map[string]string{
		"A_code": "▂▄▆█▂▄▆█▂▄     █▂▄▆█▂▄▆█▂▄▆█▂█",
		"B_chat": strings.Repeat("\u2800", 22) + "▄▄▄▄▄▄▄█",
		"TOTAL":  "▂▄▆█▂▄▆█▂▄     █▂▄▆█▂▄▆█▂▄▆█▂█",
	}
	for _, w := range []int{60, 80, 120, 200} {
		sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.Table,
			Width: func() int { return w }}
		var b strings.Builder
		if err := sh.dashboard(t.Context(), &b); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
		for _, l := range lines {
			if terminal.Width(l) > w {
				t.Errorf("at %d columns, a line of %d:\n%s", w, terminal.Width(l), l)
			}
		}
		if shown := strings.Contains(lines[0], "last 30m"); shown != (w >= 200) {
			t.Errorf("at %d columns, sparkline shown: %v\n%s", w, shown, b.String())
		}
		if strings.Contains(b.String(), "hidden: ") && strings.Contains(b.String(), "last 30m") {
			t.Errorf("at %d columns, the sparkline is named hidden (--format tsv has it not):\n%s", w, b.String())
		}
		if w >= 200 {
			for _, l := range lines[1:] {
				f := strings.Fields(l)
				if want, ok := wantLines[f[0]]; ok && !strings.HasSuffix(strings.TrimRight(l, " "), want) {
					t.Errorf("%s's sparkline:\n%s\nwant it to end with %q", f[0], l, want)
				}
			}
		}
		golden(t, "spark."+strconv.Itoa(w)+".golden", b.String())
	}
	sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.TSV}
	var b strings.Builder
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "last 30m") || strings.ContainsAny(b.String(), "▁▂▃▄▅▆▇█\u2800") {
		t.Errorf("TSV has a sparkline:\n%s", b.String())
	}
}
