package gen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/sim"
	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/store"
)

// The lines of a busy run, as long as gen's get: retries, a server down,
// conversations, truncated answers, export counts, a long dataset name.
func busyLines() []liveLine {
	head := liveLine{{text: "gen: 1/2 servers up", short: "gen: 1/2 up"},
		{text: ", http://gpu-node-17.cluster.local:30000 down 2m10s", drop: 5},
		{text: ", 128 in flight", drop: 3}, {text: ", 3 in backoff, 152 attempts retried", drop: 6},
		{text: ", 40.6 answers/s", short: ", 40.6/s"},
		{text: ", >=812 tokens/s (3 answers without a token count)", short: ", >=812 tok/s", drop: 2},
		{text: " (last 30s)", drop: 4}, {text: ", 1234 to go"}, {text: ", ETA 2m29s"}}
	counts, _ := doneParts(store.Owed{Answered: 12, Failed: 3, Prompts: 485, RedoKnown: true}, 500, "")
	ds := append(liveLine{{text: "  "}, {text: "B_chat_multiturn_sharegpt_cleaned", flex: true}}, counts...)
	ds = append(ds, liveLine{
		{text: ", 120 earlier turns answered, 12 conversations half done", short: ", 120 turns, 12 half done", drop: 5},
		{text: ", 12 truncated", short: ", 12 trunc", drop: 6}, {text: ", 950 records, 12 excluded", short: ", 950 rec, 12 excl", drop: 7},
		{text: ", 40.6 answers/s", short: ", 40.6/s"}, {text: ", 812 tokens/s", short: ", 812 tok/s", drop: 2},
		{text: ", ETA 2m29s"}}...)
	srv := serverLine("  server http://gpu-node-17.cluster.local:30000: up, 64 running, 12 queued, KV 87% used, " +
		"2900 tokens/s (its count, last 30s), 20 retried (last HTTP 500 'Failed to parse input, at all', 3s ago), 1 in backoff")
	return []liveLine{head, ds, srv}
}

// TestLiveLinesFit: at every width each line fits, keeps what a person
// decides on (the dataset, done/total, the rate, the ETA; the run's prompts
// to go), and gives up the rest in its order; at 200 columns the lines are
// whole, as the log has them.
func TestLiveLinesFit(t *testing.T) {
	t.Parallel()
	lines := busyLines()
	keep := [][]string{
		{"gen: ", "40.6", "1234 to go", "ETA 2m29s"},
		{"12/500", "40.6", "ETA 2m29s"},
		{"up"},
	}
	for _, width := range []int{40, 59, 79, 119, 199, 400} {
		for i, l := range lines {
			got := l.fit(width)
			if w := textWidth(got); w > width {
				t.Errorf("width %d: %d columns: %q", width, w, got)
			}
			for _, k := range keep[i] {
				if width < 59 && i == 0 {
					break // the run's line: below 60 columns it is cut
				}
				if !strings.Contains(got, k) {
					t.Errorf("width %d: %q lost %q", width, got, k)
				}
			}
			if textWidth(l.String()) <= width && got != l.String() {
				t.Errorf("width %d: %q fits whole, got %q", width, l.String(), got)
			}
		}
	}
	// Whole, the dataset's counts say what they count: answers, the share
	// answered or failed for good, the failed, what is to go.
	if got := lines[1].fit(400); !strings.HasPrefix(got, "  B_chat_multiturn_sharegpt_cleaned 12/500 answered (3.0% done), 3 failed, 485 to go, ") {
		t.Errorf("400: %q", got)
	}
	// At 79 columns (an 80-column terminal): the name whole, the rates
	// short, the failed kept while tokens/s, the turns and export counts
	// go, and the share done (never a bare %, which would read as the
	// answers').
	if got := lines[1].fit(79); got != "  B_chat_multiturn_sharegpt_cleaned 12/500, 3 fail, 40.6/s, ETA 2m29s" {
		t.Errorf("79: %q", got)
	}
	if got := lines[0].fit(79); got != "gen: 1/2 up, 128 in flight, 40.6/s, >=812 tok/s, 1234 to go, ETA 2m29s" {
		t.Errorf("79: %q", got)
	}
	// The server's notes in parentheses go first, then its items from the
	// right; a comma inside a note is not an item's end.
	if got := lines[2].fit(79); got != "  gpu-node-17.cluster.local:30000: up, 64 running, 12 queued, KV 87% used" {
		t.Errorf("79: %q", got)
	}
	// At 40 the dataset's name is cut, not its numbers.
	if got := lines[1].fit(40); got != "  B_chat_mult… 12/500, 40.6/s, ETA 2m29s" {
		t.Errorf("40: %q", got)
	}
	// Nothing in a line moves the cursor: an error message's newline is a
	// space on the terminal.
	l := serverLine("  server a: 1 retried (last HTTP 500 'line one\nline two\ttab', 1s ago)")
	if got := l.fit(200); strings.ContainsAny(got, "\n\t\x1b") {
		t.Errorf("%q", got)
	}
	if got := printableText("a\x1b[2Jb"); got != "a [2Jb" {
		t.Errorf("printableText: %q", got)
	}
}

// screen is a small terminal: it keeps every row written (the scrollback
// and the screen), wraps at cols, and understands what liveLog writes
// (CR, LF, CSI n A, CSI J, CSI 2K). LF is taken as CR LF, as a terminal's
// output processing (onlcr) makes it.
type screen struct {
	cols, rows int
	lines      [][]rune
	row, col   int
}

func (s *screen) top() int { return max(0, len(s.lines)-s.rows) }

func (s *screen) lf() {
	s.row++
	s.col = 0
	for len(s.lines) <= s.row {
		s.lines = append(s.lines, nil)
	}
}

func (s *screen) Write(p []byte) (int, error) {
	if s.lines == nil {
		s.lines = [][]rune{nil}
	}
	rs := []rune(string(p))
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '\n':
			s.lf()
		case '\r':
			s.col = 0
		case '\x1b':
			j := i + 2 // after ESC [
			for j < len(rs) && (rs[j] >= '0' && rs[j] <= '9') {
				j++
			}
			n, _ := strconv.Atoi(string(rs[i+2 : j]))
			switch rs[j] {
			case 'A':
				s.row = max(s.row-max(n, 1), s.top())
			case 'J':
				s.lines[s.row] = s.lines[s.row][:min(s.col, len(s.lines[s.row]))]
				s.lines = s.lines[:s.row+1]
			case 'K':
				s.lines[s.row] = nil
			}
			i = j
		default:
			if s.col == s.cols { // the line is full: it wraps
				s.lf()
			}
			l := s.lines[s.row]
			for len(l) <= s.col {
				l = append(l, ' ')
			}
			l[s.col] = c
			s.lines[s.row] = l
			s.col++
		}
	}
	return len(p), nil
}

func (s *screen) text() []string {
	var out []string
	for _, l := range s.lines {
		out = append(out, strings.TrimRight(string(l), " "))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// TestLiveLogRedrawsInPlace: at 80 columns a block of lines longer than
// that, redrawn every "second" with messages written between redraws (one
// of them wider than the terminal, broken between words, one written in
// two pieces), leaves the
// messages in order, each once, and the block once, at the bottom, every
// row of it within the width; a terminal shorter than the block gets as
// many lines as it has rows, the rest counted.
func TestLiveLogRedrawsInPlace(t *testing.T) {
	t.Parallel()
	scr := &screen{cols: 80, rows: 30}
	l := &liveLog{w: scr, size: func() (int, int) { return scr.cols, scr.rows }}
	long := "gen: a message wider than the terminal, that wraps and is never moved over: " + strings.Repeat("x", 90)
	for i := range 40 {
		lines := busyLines()
		lines[0] = append(lines[0], part{text: fmt.Sprintf(", tick %d", i), drop: 1})
		l.draw(lines)
		switch i % 10 {
		case 3:
			fmt.Fprintf(l, "gen: message %d\n", i)
		case 6:
			fmt.Fprintf(l, "gen: half a message %d", i)
			l.draw(lines)
			fmt.Fprintf(l, " and its end\n")
		case 9:
			fmt.Fprintln(l, long)
		}
	}
	got := scr.text()
	var msgs []string
	for i := range 40 {
		switch i % 10 {
		case 3:
			msgs = append(msgs, fmt.Sprintf("gen: message %d", i))
		case 6:
			msgs = append(msgs, fmt.Sprintf("gen: half a message %d and its end", i))
		case 9:
			// Broken between words within 79 columns; the word wider than
			// a row is the terminal's to wrap, 80 columns a row.
			msgs = append(msgs, "gen: a message wider than the terminal, that wraps and is never moved over:")
			for rest := "  " + strings.Repeat("x", 90); rest != ""; rest = rest[min(80, len(rest)):] {
				msgs = append(msgs, rest[:min(80, len(rest))])
			}
		}
	}
	block := got[len(msgs):]
	if strings.Join(got[:len(msgs)], "\n") != strings.Join(msgs, "\n") {
		t.Errorf("the messages above the block:\n%s\nwant\n%s", strings.Join(got[:len(msgs)], "\n"), strings.Join(msgs, "\n"))
	}
	if len(block) != 3 || !strings.HasPrefix(block[0], "gen: 1/2 up") || !strings.Contains(block[0], "tick 39") {
		t.Errorf("the block at the bottom: %q", block)
	}
	for _, s := range block {
		if w := textWidth(s); w >= 80 {
			t.Errorf("a status line of %d columns at 80: %q", w, s)
		}
	}

	// The run ends: the block goes, the summary follows the messages.
	l.stop()
	fmt.Fprintln(l, "gen: 40 answers")
	if got := scr.text(); got[len(got)-1] != "gen: 40 answers" || len(got) != len(msgs)+1 {
		t.Errorf("after stop: %q", got[len(msgs):])
	}
	// The summary's lines are broken between words too.
	fmt.Fprintln(l, "  B1_ids: 50/50 answered (50 this run), 0 errors, 0 still missing, 5 truncated -> /tmp/out/B1_ids/raw_responses.jsonl")
	if got := scr.text()[len(msgs)+1:]; strings.Join(got, "|") != "  B1_ids: 50/50 answered (50 this run), 0 errors, 0 still missing, 5 truncated|    -> /tmp/out/B1_ids/raw_responses.jsonl" {
		t.Errorf("a summary line after stop: %q", got)
	}

	// A terminal of 4 rows: 3 lines of the block, the last counting the rest.
	scr = &screen{cols: 80, rows: 4}
	l = &liveLog{w: scr, size: func() (int, int) { return scr.cols, scr.rows }}
	many := busyLines()
	for i := range 6 {
		many = append(many, liveLine{{text: fmt.Sprintf("  D%d 1/2, 1.0 answers/s, ETA 1s", i)}})
	}
	for range 3 {
		l.draw(many)
	}
	if got := scr.text(); len(got) != 3 || !strings.HasPrefix(got[2], "  … and 7 more lines") {
		t.Errorf("at 4 rows: %q", got)
	}
}

// TestRatesCountTheRunOnly: a resumed run. The index holds an hour-old run's
// answers; this run started at t0 and answers 4 a second from t0+1s. Its
// rate counts only its own seconds, as watch's does (throughput over the
// seconds since the start event), not the idle hour nor the seconds of the
// hour-old run; a dataset's ETA is the prompts left in it and in the ones
// before it at the run's rate, so the last one's is the run's.
func TestRatesCountTheRunOnly(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	old := t0.Add(-time.Hour)
	root := t.TempDir()
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := &progress{db: db, cfg: &Config{}, pool: newPool(nil), ctl: &control{started: t0}, iso: &isolation{}}
	// P1: 500 prompts, 100 answered an hour ago (at 10 a second), 40 in
	// this run; P2: 100 prompts, none answered yet.
	write := func(name string, prompts int, finishes []time.Time) *dsRun {
		ds := &dsRun{Dataset: Dataset{Name: name}}
		var p, raw strings.Builder
		for i := range prompts {
			fmt.Fprintf(&p, `{"id":"%s-%d","text":"q"}`+"\n", name, i)
		}
		for i, at := range finishes {
			fmt.Fprintf(&raw, `{"id":"%s-%d","text":"a","completion_tokens":20,"finished_at":%q}`+"\n", name, i, at.Format(time.RFC3339Nano))
		}
		dir := filepath.Join(root, name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(p.String()), 0o644)
		if raw.Len() > 0 {
			os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), []byte(raw.String()), 0o644)
		}
		r.sets = append(r.sets, ds)
		return ds
	}
	var finishes []time.Time
	for i := range 100 {
		finishes = append(finishes, old.Add(time.Duration(i)*100*time.Millisecond))
	}
	var thisRun []time.Time
	for i := range 40 {
		thisRun = append(thisRun, t0.Add(time.Second+time.Duration(i)*250*time.Millisecond))
	}
	p1 := write("P1", 500, append(finishes, thisRun...))
	write("P2", 100, nil)
	for _, at := range thisRun {
		p1.rate.add(at, 1, 20, 0)
		p1.ok.Add(1)
	}
	ingesttest.IndexInto(t, db, root)

	now := t0.Add(11 * time.Second)
	// watch's rates: throughput over the seconds since the run's start.
	res, err := query.Answer(db, query.Query{Question: "throughput", Window: now.Sub(t0), Datasets: []string{"P1", "P2"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	watchRate := fmt.Sprintf("%.1f", res.Total[4].(query.Fixed).V)
	if watchRate != "3.6" { // 40 answers over the 11 s since t0
		t.Fatalf("throughput since the start: %v", res.Total)
	}
	lines := r.statusLines(now)
	rateRE := regexp.MustCompile(`, ([0-9.]+) answers/s`)
	etaRE := regexp.MustCompile(`ETA (\S+)$`)
	if len(lines) != 3 {
		t.Fatalf("lines %q", lines)
	}
	for i, l := range lines[:2] {
		if m := rateRE.FindStringSubmatch(l); m == nil || m[1] != watchRate {
			t.Errorf("line %d: %q; want %s answers/s, as watch counts it", i, l, watchRate)
		}
	}
	// 360 left in P1, 460 in all, at 40/11 a second; P2, not started, has
	// no ETA, as in watch (store.DatasetETA).
	for i, want := range []string{"2m7s", "1m39s", "unknown"} {
		if m := etaRE.FindStringSubmatch(lines[i]); m == nil || m[1] != want {
			t.Errorf("line %d: %q; want ETA %s", i, lines[i], want)
		}
	}
	if !strings.HasPrefix(lines[2], "  P2 0/100 answered (0.0% done), 100 to go, 0.0 answers/s") {
		t.Errorf("P2: %q", lines[2])
	}
}

// TestOneOfEachIsSingular: a run of one dataset, one prompt and one answer
// says so in the singular, in its start line, its events and its summary.
func TestOneOfEachIsSingular(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "one", "text", 1)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	_, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out}, root)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gen: 1 dataset, 1 prompt to answer;", "gen: 1 answer (", " and 0 errors in "} {
		if !strings.Contains(log, want) {
			t.Errorf("the log has no %q:\n%s", want, log)
		}
	}
	es := events(t, dbPath)
	if len(es) < 2 || !strings.HasPrefix(es[0].Detail, "1 dataset, 1 prompt to answer,") || !strings.HasPrefix(es[len(es)-1].Detail, "finished: 1 answer, 0 errors, ") {
		t.Errorf("events %+v", es)
	}
}

// TestCounted: "1 dataset", never "1 datasets".
func TestCounted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int64
		want string
	}{{0, "0 datasets"}, {1, "1 dataset"}, {2, "2 datasets"}} {
		if got := counted(tc.n, "dataset", "datasets"); got != tc.want {
			t.Errorf("counted(%d) = %q", tc.n, got)
		}
	}
	var b bytes.Buffer
	b.WriteString(counted(uint64(1), "error", "errors"))
	if b.String() != "1 error" {
		t.Error(b.String())
	}
}
