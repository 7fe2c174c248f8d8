package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// runRow is a row of `query runs --format json`: state and to_go are the
// contract a script reads.
type runRow struct {
	Start      string  `json:"start"`
	End        *string `json:"end"`
	Pid        int     `json:"pid"`
	Host       string  `json:"host"`
	Kind       string  `json:"kind"`
	State      string  `json:"state"`
	ToGo       *int64  `json:"to_go"`
	Answers    *int64  `json:"answers"`
	Errors     *int64  `json:"errors"`
	Counts     string  `json:"counts"`
	LastAnswer *string `json:"last_answer"`
	Note       *string `json:"note"`
	Command    string  `json:"command"`
}

// runsOf is `query runs` of db.
func runsOf(t *testing.T, bin, db string) []runRow {
	t.Helper()
	return mustQueryJSON[runRow](t, bin, db, "runs")
}

// lastRun is the newest run, or a zero row when there is none.
func lastRun(rows []runRow) runRow {
	if len(rows) == 0 {
		return runRow{}
	}
	return rows[len(rows)-1]
}

// TestQueryRuns: `query runs` says, for each run of gen on the index,
// newest last: running while it goes (its pid, what it still owes);
// lost after it was SIGKILLed (it never said it ended and its lock is
// gone); interrupted after SIGTERM; finished, nothing to go, after it
// ended by itself.
func TestQueryRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	addr := freeAddr(t)
	startSimAt(t, bin, addr, "--seed", "3", "--decode-tps", "300", "--slots", "4")
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "D"), "D", 200)
	raw := filepath.Join(root, "D", "raw_responses.jsonl")
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--server", "http://" + addr, "--concurrency", "4", root}
	answered := func() int { b, _ := os.ReadFile(raw); return bytes.Count(b, []byte("\n")) }

	// Running, then SIGKILLed.
	gen1 := startGendex(t, bin, "", append([]string{"--db", db, "gen"}, args...)...)
	waitFor(t, 60*time.Second, "gen's first answers", func() bool { return answered() >= 5 })
	var r runRow
	waitFor(t, 10*time.Second, "gen's run to be running in query runs", func() bool {
		r = lastRun(runsOf(t, bin, db))
		return r.State == "running"
	})
	if r.Pid != gen1.Pid() || r.End != nil || r.Kind != "gen" || r.ToGo == nil || *r.ToGo <= 0 || *r.ToGo > 200 ||
		!strings.Contains(r.Command, "gen --server http://"+addr) {
		t.Errorf("the run while gen goes: %+v; want running, pid %d, no end, to_go in 1..200, its command", r, gen1.Pid())
	}
	gen1.Kill()
	rows := runsOf(t, bin, db)
	if len(rows) != 1 || rows[0].State != "lost" || rows[0].End != nil || rows[0].Note == nil {
		t.Errorf("after SIGKILL: %+v; want one run, lost, without an end, with a note", rows)
	}

	// Running again, then SIGTERM: interrupted.
	gen2 := startGendex(t, bin, "", append([]string{"--db", db, "gen"}, args...)...)
	before := answered()
	waitFor(t, 60*time.Second, "the second gen's answers", func() bool { return answered() >= before+5 })
	waitFor(t, 10*time.Second, "the second run to be running", func() bool { return lastRun(runsOf(t, bin, db)).State == "running" })
	if rows := runsOf(t, bin, db); len(rows) != 2 || rows[0].State != "lost" || rows[1].Pid != gen2.Pid() {
		t.Errorf("during the second run: %+v; want the lost one first, then this one", rows)
	}
	gen2.Signal(syscall.SIGTERM)
	gen2.WaitWithin(t, 2*time.Minute)
	r = lastRun(runsOf(t, bin, db))
	if r.State != "interrupted" || r.End == nil || r.ToGo == nil || *r.ToGo <= 0 {
		t.Errorf("after SIGTERM: %+v; want interrupted, ended, something to go\n%s", r, gen2.Stderr())
	}

	// To the end: finished.
	gen3 := startGendex(t, bin, "", append([]string{"--db", db, "gen"}, args...)...)
	if code := gen3.WaitWithin(t, 2*time.Minute); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, gen3.Stderr())
	}
	rows = runsOf(t, bin, db)
	states := []string{}
	for _, r := range rows {
		states = append(states, r.State)
	}
	if strings.Join(states, " ") != "lost interrupted finished" {
		t.Errorf("the runs' states, oldest first: %v; want lost interrupted finished", states)
	}
	r = lastRun(rows)
	if r.End == nil || r.ToGo == nil || *r.ToGo != 0 || r.Answers == nil || *r.Answers <= 0 || r.LastAnswer == nil {
		t.Errorf("the finished run: %+v; want an end, 0 to go, its answers and last answer", r)
	}
	if !strings.Contains(gen3.Stderr(), "recorded as finished, 0 prompts to go") {
		t.Errorf("gen's summary does not say how the run is recorded:\n%s", gen3.Stderr())
	}
}

// TestRunWaiting: a gen whose server is not up is waiting, and an
// interrupted one says so; --stall-after that is not a positive duration
// is a usage error.
func TestRunWaiting(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "W"), "W", 10)
	db := filepath.Join(t.TempDir(), "g.db")
	gen := startGendex(t, bin, "", "--db", db, "gen", "--server", "http://"+freeAddr(t), root)
	waitFor(t, 30*time.Second, "the run to be waiting", func() bool {
		rows, err := queryJSON[runRow](t, bin, db, "runs")
		return err == nil && lastRun(rows).State == "waiting"
	})
	if r := lastRun(runsOf(t, bin, db)); r.ToGo == nil || *r.ToGo != 10 {
		t.Errorf("the waiting run: %+v; want 10 to go", r)
	}
	gen.Interrupt()
	gen.WaitWithin(t, 2*time.Minute)
	if r := lastRun(runsOf(t, bin, db)); r.State != "interrupted" || r.End == nil {
		t.Errorf("after Ctrl-C: %+v; want interrupted", r)
	}
	for _, bad := range []string{"0s", "-1m", "soon"} {
		r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--stall-after", bad, root)
		if r.code != 2 || !strings.Contains(r.stderr, "stall-after") {
			t.Errorf("--stall-after %s: %s; want a usage error (exit 2) naming the flag", bad, r)
		}
	}
}

// TestStallRecorded: a server SIGSTOPped mid-run accepts connections and
// answers nothing. Under --stall-after 2s gen records a stalled event
// that names the requests it holds, query runs says the run is stalled,
// by which server; after SIGCONT answers flow again, a recovered event is
// recorded, and every prompt is answered exactly once.
func TestStallRecorded(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	addr := freeAddr(t)
	server := startSimAt(t, bin, addr, "--metrics", "--seed", "9", "--decode-tps", "300", "--slots", "4")
	root, out := t.TempDir(), t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "S"), "S", 40)
	raw := filepath.Join(out, "S", "raw_responses.jsonl")
	db := filepath.Join(t.TempDir(), "g.db")
	gen := startGendex(t, bin, "", "--db", db, "gen", "--server", "http://"+addr, "--out", out, "--concurrency", "4", "--stall-after", "2s", root)
	waitFor(t, 60*time.Second, "gen's first answers", func() bool {
		b, _ := os.ReadFile(raw)
		return bytes.Count(b, []byte("\n")) >= 5
	})
	server.Signal(syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			server.Signal(syscall.SIGCONT)
		}
	}()
	var r runRow
	waitFor(t, 30*time.Second, "the run to be stalled in query runs", func() bool {
		r = lastRun(runsOf(t, bin, db))
		return r.State == "stalled"
	})
	if r.Note == nil || !strings.Contains(*r.Note, "held by http://"+addr) || !strings.Contains(*r.Note, "which answers no probe") {
		t.Errorf("the stalled run's note: %+v; want the requests held by the server, which answers no probe", r)
	}
	// watch refreshes until it is stopped: its first screen is enough.
	watch := startGendexWith(t, gendexOpts{stdin: "watch\n", combined: true}, bin, "--db", db, "shell")
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(watch.Stdout(), "dataset") && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	watch.Kill()
	if out := watch.Stdout(); !strings.Contains(out, "run: stalled since ") || !strings.Contains(out, "held by http://"+addr) {
		t.Errorf("watch during the stall:\n%s\nwant the run's stall line", out)
	}
	var stall eventRow
	waitFor(t, 20*time.Second, "a stalled event", func() bool {
		events, err := queryJSON[eventRow](t, bin, db, "events")
		for _, e := range events {
			if e.Event == "stalled" {
				stall = e
			}
		}
		return err == nil && stall.Event != ""
	})
	if d := stall.Detail; stall.Server == nil || *stall.Server != "http://"+addr || d == nil ||
		!strings.Contains(*d, "requests in flight, ages") || !strings.Contains(*d, "S/S-0") ||
		!strings.Contains(*d, "/health does not answer") || !strings.Contains(*d, "last answer ") {
		t.Errorf("the stalled event: %+v; want the server, the requests in flight by id with their ages, its last answer, /health", stall)
	}
	server.Signal(syscall.SIGCONT)
	stopped = false
	if code := gen.WaitWithin(t, 2*time.Minute); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, gen.Stderr())
	}
	events, err := queryJSON[eventRow](t, bin, db, "events")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range events {
		names = append(names, e.Event)
	}
	for _, want := range []string{"stalled since ", "gen waits and keeps them", "replies again after"} {
		if !strings.Contains(gen.Stderr(), want) {
			t.Errorf("gen's log does not say %q:\n%s", want, gen.Stderr())
		}
	}
	if !strings.Contains(strings.Join(names, " "), "stalled recovered") {
		t.Errorf("events %v; want stalled, then recovered", names)
	}
	if r := lastRun(runsOf(t, bin, db)); r.State != "finished" || r.ToGo == nil || *r.ToGo != 0 {
		t.Errorf("after the stall: %+v; want finished, 0 to go", r)
	}
	clean := client.New(simURL(t, sim.Config{Seed: 9}), client.Options{})
	checkAnsweredOnce(t, db, filepath.Join(root, "S", "prompts.jsonl"), raw, "S", clean)
}

// TestFollowRun: an ingest --follow is a run too: running while it
// follows, with the records it indexed, interrupted once stopped.
func TestFollowRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "F"), "F", 7)
	db := filepath.Join(t.TempDir(), "g.db")
	w := startWriter(t, db, nil, "ingest", "--follow", root)
	waitFor(t, 20*time.Second, "the follow to index the first 7 prompts", func() bool {
		rows, err := queryJSON[map[string]any](t, bin, db, "progress")
		return err == nil && len(rows) > 0 && rows[0]["prompts"] == 7.0
	})
	// 3 more lines, appended as a producer appends: rewriting the file
	// (truncate, then write) could be read half-way, as a rewrite.
	more := t.TempDir()
	writeIDPrompts(t, more, "F", 10)
	all, err := os.ReadFile(filepath.Join(more, "prompts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(all), "\n")
	f, err := os.OpenFile(filepath.Join(root, "F", "prompts.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Join(lines[7:], "")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var r runRow
	waitFor(t, 20*time.Second, "the follow's row with the records it indexed", func() bool {
		r = lastRun(runsOf(t, bin, db))
		return r.State == "running" && r.Answers != nil && *r.Answers == 3
	})
	if r.Kind != "follow" || r.Pid != w.Pid() || r.ToGo != nil || r.Errors != nil {
		t.Errorf("the follow: %+v; want kind follow, its pid, to_go and errors unknown", r)
	}
	w.Interrupt()
	w.Wait()
	if r := lastRun(runsOf(t, bin, db)); r.State != "interrupted" || r.End == nil {
		t.Errorf("the follow once stopped: %+v; want interrupted", r)
	}
}

// TestRunQuitTwice: a second Ctrl-C quits gen at once (exit 130, without
// waiting --grace for the answers in flight) and the run is recorded as
// interrupted, saying so, not lost (before, it never said it ended).
func TestRunQuitTwice(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	addr := freeAddr(t)
	startSimAt(t, bin, addr, "--seed", "3", "--decode-tps", "2", "--slots", "4")
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "Q"), "Q", 20)
	db := filepath.Join(t.TempDir(), "g.db")
	gen := startGendex(t, bin, "", "--db", db, "gen", "--server", "http://"+addr, "--concurrency", "4", "--grace", "5m", root)
	waitFor(t, 30*time.Second, "the run to be running", func() bool {
		rows, err := queryJSON[runRow](t, bin, db, "runs")
		return err == nil && lastRun(rows).State == "running"
	})
	gen.Interrupt()
	waitFor(t, 30*time.Second, "gen to say it waits for the answers in flight", func() bool { return strings.Contains(gen.Stderr(), "Ctrl-C again quits now") })
	gen.Interrupt()
	if code := gen.WaitWithin(t, 2*time.Minute); code != 130 {
		t.Fatalf("gen after a second Ctrl-C: exit %d; want exit 130\n%s", code, gen.Stderr())
	}
	r := lastRun(runsOf(t, bin, db))
	if r.State != "interrupted" || r.End == nil || r.Note == nil || !strings.Contains(*r.Note, "second interrupt") {
		t.Errorf("after a second Ctrl-C: %+v; want interrupted, ended, with a note that says why\n%s", r, gen.Stderr())
	}
}
