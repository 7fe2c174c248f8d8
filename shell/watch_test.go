package shell

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/store"
	"gendex/store/terminal"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/watch")

// golden compares got with testdata/watch/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "watch", name)
	if *update {
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run 'go test ./shell -update' to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update after checking):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// watchIndex returns an index of a run that resumed 10 s before now: two
// datasets answered an hour ago and since the start event, the servers
// of this run (one with a long error) and one of an earlier run.
func watchIndex(t *testing.T, now time.Time, more ...func(root string)) *store.DB {
	t.Helper()
	sec := now.Truncate(time.Second)
	root := t.TempDir()
	writeDataset(t, root, "B_chat_long_dataset_name", 4, sec.Add(-time.Hour))
	// A_code: 3 answers 2 minutes ago, by the run before, and 3 in the
	// 10 s since this run started.
	writeDataset(t, root, "A_code", 6, sec.Add(-5*time.Second))
	raw := filepath.Join(root, "A_code", "raw_responses.jsonl")
	data, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(data), "\n")
	before := sec.Add(-2 * time.Minute).UTC().Format(time.RFC3339Nano)
	for i := range 3 {
		lines[i] = strings.Replace(lines[i], sec.Add(-5*time.Second).UTC().Format(time.RFC3339Nano), before, 1)
	}
	if err := os.WriteFile(raw, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, m := range more {
		m(root)
	}
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ingesttest.IndexInto(t, db, root)
	run := sec.Add(-10 * time.Second).UnixMilli()
	err = db.Update(func(tx *store.Tx) error {
		if err := tx.AddEvent(&store.Event{Time: run, Name: "start", Detail: "2 datasets"}); err != nil {
			return err
		}
		for i := range 3 {
			at := now.Add(time.Duration(i-3) * 3 * time.Second).UnixMilli()
			s := &store.ServerSample{Time: at, Up: true, Scraped: true, Run: run, LastSeen: at, ClientTokens: int64(i) * 300}
			if i > 0 {
				s.Retries, s.LastError, s.LastErrorAt = int64(i), "HTTP 500 'Failed to parse input at pos 0: unexpected end'", at-200
			}
			s.Set(store.MetricRunning, 64)
			s.Set(store.MetricQueued, 0)
			s.Set(store.MetricTokenUsage, 0.42)
			s.Set(store.MetricGenTokens, float64(1000+i*1000))
			if err := tx.PutServerSample("http://gpu-node-17.cluster.local:30000", s); err != nil {
				return err
			}
		}
		old := now.Add(-time.Hour).UnixMilli() // an earlier run's simulator
		return tx.PutServerSample("http://127.0.0.1:41483", &store.ServerSample{Time: old, Up: true, Run: old - 1000, LastSeen: old})
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestWatchAtWidths: watch's dashboard (datasets, then servers) at 60,
// 80, 120 and 200 columns is its golden file (testdata/watch; -update
// rewrites them), and no line is wider than the terminal.
func TestWatchAtWidths(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC) // at a second's start: the spans are whole seconds
	db := watchIndex(t, now)
	for _, w := range []int{60, 80, 120, 200} {
		sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.Table,
			Width: func() int { return w }}
		var b strings.Builder
		if err := sh.dashboard(t.Context(), &b); err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
			if terminal.Width(l) > w {
				t.Errorf("at %d columns, a line of %d:\n%s", w, terminal.Width(l), l)
			}
		}
		golden(t, "dashboard."+strconv.Itoa(w)+".golden", b.String())
	}
}

// TestWatchExportRunAtWidths: watch of a gen --export run keeps its
// goal, the records and the exclusions, where it has room for them and
// not for the cut answers or the prompts (testdata/watch/export.*).
func TestWatchExportRunAtWidths(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	db := watchIndex(t, now, func(root string) {
		dir := filepath.Join(root, "A_code")
		raw := filepath.Join(dir, "raw_responses.jsonl")
		b, err := os.ReadFile(raw)
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.Replace(string(b), `{"id":"A_code0",`, `{"id":"A_code0","finish_reason":"length",`, 1))
		os.WriteFile(raw, b, 0o644)
		var tok strings.Builder
		for i := 1; i < 6; i++ {
			tok.WriteString(`{"id":"A_code` + strconv.Itoa(i) + `","input_ids":[1,2,3],"loss_mask":[0,1,1]}` + "\n")
		}
		os.WriteFile(filepath.Join(dir, "tokenized.jsonl"), []byte(tok.String()), 0o644)
		os.WriteFile(filepath.Join(dir, "excluded.jsonl"), []byte(`{"id":"A_code0","reason":"length","detail":"cut off at the token limit"}`+"\n"), 0o644)
	})
	for _, w := range []int{60, 80, 120} {
		sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.Table,
			Width: func() int { return w }}
		var b strings.Builder
		if err := sh.dashboard(t.Context(), &b); err != nil {
			t.Fatal(err)
		}
		head := strings.SplitN(b.String(), "\n", 2)[0]
		if w >= 80 && (!strings.Contains(head, "recs") || !strings.Contains(head, "excl")) {
			t.Errorf("at %d columns, watch of an --export run hides its records or exclusions:\n%s", w, b.String())
		}
		golden(t, "export."+strconv.Itoa(w)+".golden", b.String())
	}
}

// TestWatchRatesCountTheRunOnly: after a resume, watch's rates and ETA
// count only the seconds since the run started (its start event), not
// the idle hour before it; servers of earlier runs are left out; KV use is
// a percentage, as gen shows it.
func TestWatchRatesCountTheRunOnly(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC) // at a second's start: the spans are whole seconds
	db := watchIndex(t, now)
	sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.TSV}
	var b strings.Builder
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	// A_code: 3 answers in the run's 10 s: 0.30/s over both windows (not
	// 3 over 30 s and 6 over the 2 minutes since its first answer, which
	// would count the seconds before the run); 4 left at 0.30/s is 13s.
	// B_chat waits (no answer in the run): unknown.
	for _, want := range []string{
		"A_code\t6\t10\t60.00\t0\t0\t0.30\t3.0\t0.30\t3.0\t13s\n",
		"B_chat_long_dataset_name\t4\t10\t40.00\t0\t0\t0.00\t0.0\t0.00\t0.0\tunknown\n",
		"\tkv_pct\t", "\t64\t0\t42\t",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("dashboard lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "127.0.0.1:41483") {
		t.Errorf("dashboard shows the server of an earlier run:\n%s", got)
	}
}

// TestWatchWaitsForTheIndex: watch started before the index exists says
// it waits for it, and goes on until Ctrl-C, with no error.
func TestWatchWaitsForTheIndex(t *testing.T) {
	path := filepath.Join(t.TempDir(), "later.db")
	var out strings.Builder
	sh := &Shell{Ask: query.Local{}, Out: &out, Err: &out, DBPath: path, Now: time.Now, Width: func() int { return 60 }}
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	if err := sh.watch(ctx, []string{"0.2"}); err != nil {
		t.Fatalf("watch before the index exists: %v\n%s", err, out.String())
	}
	if n := strings.Count(out.String(), "waiting for the index"); n < 2 {
		t.Errorf("watch said it waits %d times, want it to go on:\n%s", n, out.String())
	}
}

// TestCompleteOffersTheQuestionsFlags: tab completion of a flag offers
// only the flags the question on the line takes.
func TestCompleteOffersTheQuestionsFlags(t *testing.T) {
	sh := &Shell{}
	for line, want := range map[string]string{
		"progress --":          "--format --no-header",
		"throughput --":        "--format --no-header --window",
		"events --s":           "--since",
		"missing alpha --st":   "--stage",
		"watch 2 throughput -": "--format --no-header --window",
		"tokens --w":           "",
	} {
		_, got, _ := sh.complete(line, len(line))
		if s := strings.TrimSpace(strings.Join(got, "")); strings.Join(strings.Fields(s), " ") != want {
			t.Errorf("complete(%q) = %q, want %q", line, got, want)
		}
	}
}

// TestShellHelpFitsEighty: the shell's help has no line over 80 columns,
// or over a narrower terminal's width.
func TestShellHelpFitsEighty(t *testing.T) {
	for _, w := range []int{0, 60, 80} {
		var out strings.Builder
		sh := &Shell{Out: &out, Width: func() int { return w }}
		sh.help()
		limit := w
		if w == 0 {
			limit = 80
		}
		for _, l := range strings.Split(out.String(), "\n") {
			if terminal.Width(l) > limit {
				t.Errorf("width %d: help line of %d columns: %s", w, terminal.Width(l), l)
			}
		}
	}
}

// widest answers as Local, with every number of every answer made huge,
// or, with unknown, unknown (nil): the widest cells a run can show.
type widest struct {
	query.Local
	unknown bool
}

func (a widest) Ask(ctx context.Context, q query.Query, now time.Time, out query.Sink) error {
	var c query.Collect
	if err := a.Local.Ask(ctx, q, now, &c); err != nil {
		return err
	}
	for _, row := range append(c.Result.Rows, c.Result.Total) {
		for j, v := range row {
			var big any
			switch x := v.(type) {
			case int64:
				big = x + 987654321987
			case uint64:
				big = x + 987654321987
			case query.Fixed:
				big = query.Fixed{V: x.V + 98765432198.7, Prec: x.Prec}
			default:
				continue
			}
			if a.unknown {
				big = nil
			}
			row[j] = big
		}
	}
	return query.Replay(&c.Result, out)
}

// TestWatchFitsWhateverItShows: every line of watch fits 60 and 80
// columns whatever its lines hold: a run stalled on a server of a long
// URL, failed on a long path, lost on a host of a long name, or waiting;
// datasets of long names; servers on one long host (the table's legend
// names it) and one down; every number huge, or unknown. A word longer
// than a line (the path, the URL) is broken at the edge, not cut; a long
// dataset name is cut to its end (a shard's number) before the answers/s
// are hidden.
func TestWatchFitsWhateverItShows(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	host := "gpu-node-17.a-very-long-cluster-domain-name.example.internal.company.com"
	path := "/scratch/project-with-a-long-name/user/eagle3-drafter-data/part-0007/raw_responses.jsonl"
	db := watchIndex(t, now, func(root string) {
		writeDataset(t, root, "C_sharegpt_multi_turn_conversations_in_english_part_0007_of_0012", 3, now.Add(-5*time.Second))
	})
	err := db.Update(func(tx *store.Tx) error {
		for k, port := range []string{":30000", ":30001"} {
			for i := range 3 {
				at := now.Add(time.Duration(i-3) * 3 * time.Second).UnixMilli()
				s := &store.ServerSample{Time: at, Up: k == 0, Scraped: k == 0, NoMetrics: k == 1, Run: now.Add(-10 * time.Second).UnixMilli(),
					LastSeen: at, ClientTokens: int64(i) * 3000, Retries: int64(i), LastError: "HTTP 503 'server overloaded'", LastErrorAt: at}
				s.Set(store.MetricRunning, 128)
				if err := tx.PutServerSample("http://"+host+port, s); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	toGo := int64(123456789)
	runs := []store.Run{
		{State: store.RunStalled, Host: "node7", Detail: "stalled since 09:52:00: 61 requests held by http://" + host + ":30000, which answers no probe"},
		{State: store.RunFailed, Host: "node7", End: now.UnixMilli(), Detail: "writing " + path + ": no space left on device: free some, then run 'gendex gen --server http://" + host + ":30000 /data/prompts' again"},
		{State: store.RunRunning, Host: host}, // lost: no process holds it
		{State: store.RunWaiting, Host: "node7", Detail: "no server is up: waiting for one"},
	}
	for i, r := range runs {
		r.Start, r.Pid, r.Kind, r.Since, r.ToGo, r.LastAnswer = now.Add(time.Duration(i-10)*time.Minute).UnixMilli(), 4194304, "gen", now.UnixMilli(), &toGo, now.UnixMilli()
		if err := db.Update(func(tx *store.Tx) error { return tx.PutRun(&r) }); err != nil {
			t.Fatal(err)
		}
		if r.State != store.RunRunning {
			db.HoldRun(&r)
		}
		for _, unknown := range []bool{false, true} {
			for _, w := range []int{60, 80} {
				sh := &Shell{Ask: widest{query.Local{Src: db}, unknown}, Now: func() time.Time { return now }, format: query.Table,
					Width: func() int { return w }}
				var b strings.Builder
				if err := sh.dashboard(t.Context(), &b); err != nil {
					t.Fatal(err)
				}
				for _, l := range strings.Split(b.String(), "\n") {
					if terminal.Width(l) > w {
						t.Errorf("%s run, numbers unknown %v, at %d columns: a line of %d:\n%s\nin:\n%s", r.State, unknown, w, terminal.Width(l), l, b.String())
					}
				}
				if w == 80 && !unknown && (!strings.Contains(b.String(), " ans/s ") || !regexp.MustCompile(` …\S+_part_0007_of_0012 `).MatchString(b.String())) {
					t.Errorf("%s run, numbers unknown %v, at 80 columns: the answers/s hidden, or the long name not cut to its end:\n%s", r.State, unknown, b.String())
				}
				if strings.Contains(b.String(), "<nil>") {
					t.Errorf("%s run, numbers unknown %v: an unknown shown as <nil>:\n%s", r.State, unknown, b.String())
				}
				if got := strings.Join(strings.Fields(b.String()), ""); r.Detail != "" && !strings.Contains(got, strings.Join(strings.Fields(r.Detail), "")) {
					t.Errorf("%s run at %d columns: the run's note is not whole on the screen:\n%s", r.State, w, b.String())
				}
			}
		}
		db.ReleaseRun(&r)
	}
}
