package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writeExportFixture writes dataset dir/X: n token-id prompts and their
// answers, as gen writes them; every 7th answer is truncated (length), every
// 13th aborted, every 17th has no output_ids (a chat answer).
func writeExportFixture(t *testing.T, dir string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var p, r strings.Builder
	for i := range n {
		id := fmt.Sprintf("x%06d", i)
		ids := make([]string, 8+i%5)
		for j := range ids {
			ids[j] = strconv.Itoa(300 + (i*7+j)%90)
		}
		fmt.Fprintf(&p, `{"id":%q,"input_ids":[%s]}`+"\n", id, strings.Join(ids, ","))
		finish := "stop"
		switch {
		case i%13 == 0:
			finish = "abort"
		case i%7 == 0:
			finish = "length"
		}
		out := make([]string, 20+i%11)
		for j := range out {
			out[j] = strconv.Itoa(400 + (i+j*3)%50)
		}
		out[len(out)-1] = "2"
		outputIDs := `"output_ids":[` + strings.Join(out, ",") + `],`
		if i%17 == 0 {
			outputIDs = ""
		}
		fmt.Fprintf(&r, `{"id":%q,%s"text":"answer %d","prompt_tokens":%d,"completion_tokens":%d,"finish_reason":%q,"finished_at":"2026-12-01T10:00:00.000Z"}`+"\n",
			id, outputIDs, i, len(ids), len(out), finish)
	}
	writePrompts(t, dir, p.String())
	os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), []byte(r.String()), 0o644)
}

// TestExportSurvivesSIGKILL kills a running `gendex export --format ids`
// at random moments (during its first indexing, its writes, fsyncs and
// commits: at a random time, or a random delay after its outputs grew by a
// random step, whichever comes first, so that no run gets far) until it
// has been killed at least 6 times, at least 3 of them
// with records written and not yet indexed, resuming each time, and once
// leaves a torn last line in both outputs, as a crash inside a write
// does; then lets it finish. Every answer must have exactly one record or one
// exclusion, no line twice, each record the prompt's ids + the answer's
// output_ids, and the index must count what a fresh ingest of the files
// counts (README, export, "Exactly once").
func TestExportSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real process")
	}
	bin := gendexBinary(t)
	t.Parallel()
	const n = 10_000
	root := t.TempDir()
	dir := filepath.Join(root, "X")
	writeExportFixture(t, dir, n)
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", db, "export", "--format", "ids", root}
	prompts := map[string][]int{}
	for _, l := range idsLines(t, filepath.Join(dir, "prompts.jsonl")) {
		prompts[l.ID] = l.InputIDs
	}
	raws := map[string]idsLine{}
	for _, l := range idsLines(t, filepath.Join(dir, "raw_responses.jsonl")) {
		raws[l.ID] = l
	}
	// check checks the outputs of a run that finished (when says which).
	check := func(when string) { checkExportSurvived(t, bin, root, db, n, prompts, raws, when) }
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	// pending returns the bytes of the outputs written and not yet
	// indexed, as the killed run left them.
	pending := func() int64 {
		code, o, _ := runGendex(t, bin, "", "--db", db, "query", "files", "X", "--format", "json")
		if code != 0 {
			return 0 // nothing indexed yet
		}
		var files []struct {
			Stage   string `json:"stage"`
			Pending int64  `json:"pending_bytes"`
		}
		if err := json.Unmarshal([]byte(o), &files); err != nil {
			t.Fatalf("query files: %v\n%s", err, o)
		}
		var n int64
		for _, f := range files {
			if f.Stage == "tokenized" || f.Stage == "excluded" {
				n += f.Pending
			}
		}
		return n
	}
	// Kills that leave records written and not indexed (the next run
	// must index them, not write them again) and a torn last line (the
	// next run must cut it) are what is under test: the runs go on until
	// at least 3 kills left the first and a torn line was left in both
	// outputs.
	// Kills land within a whole run's time, measured once here, so that
	// they hit work in progress however fast export is on this machine
	// (a fixed span of a few seconds once missed most runs), or soon after
	// the outputs grew by a random step of at most a tenth of what a whole
	// run writes (inside a write's fsync and the commits that follow it),
	// whichever comes first: a run that got far would leave the next ones
	// little work to be killed in.
	outputs := []string{filepath.Join(dir, "tokenized.jsonl"), filepath.Join(dir, "excluded.jsonl")}
	start := time.Now()
	if code, stdout, stderr := runGendex(t, bin, "", args...); code != 0 {
		t.Fatalf("the timing run: exit %d\n%s%s", code, stdout, stderr)
	}
	whole, wholeBytes := time.Since(start), outputBytes(outputs)
	os.Remove(filepath.Join(dir, "tokenized.jsonl"))
	os.Remove(filepath.Join(dir, "excluded.jsonl"))
	os.Remove(db)
	killAfter := func() time.Duration {
		return 30*time.Millisecond + time.Duration(rng.Int64N(int64(whole)*9/10+1))
	}
	kills, unindexed, torn := 0, 0, 0
	var tornIn [2]bool
	for run := 0; (kills < 6 || unindexed < 3 || torn < 2) && run < 60; run++ {
		export := startGendexWith(t, gendexOpts{env: []string{"GENDEX_EXPORT_FLUSH_BYTES=65536"}}, bin, args...)
		// The random moment of the kill is what is under test.
		stop := make(chan struct{})
		step := 1 + rng.Int64N(wholeBytes/10+1)
		select {
		case <-killMoment(outputs, step, time.Duration(rng.IntN(10_000))*time.Microsecond, killAfter(), stop):
			close(stop)
			export.Kill()
			if export.Wait() != 0 {
				kills++
				if pending() > 0 {
					unindexed++
				}
				if kills >= 3 {
					for i, name := range []string{"tokenized.jsonl", "excluded.jsonl"} {
						if !tornIn[i] && tearLastLine(t, filepath.Join(dir, name)) {
							tornIn[i] = true
							torn++
						}
					}
				}
				continue
			}
		case <-export.Done():
			close(stop)
			if code := export.Wait(); code != 0 {
				t.Fatalf("run %d ended on its own with exit %d", run, code)
			}
		}
		// The run finished before the kill: what it left is checked (the
		// kills before it are under test too), then it starts over, so
		// that the kills land on work in progress.
		check(fmt.Sprintf("run %d, which finished after %d kills", run, kills))
		os.Remove(filepath.Join(dir, "tokenized.jsonl"))
		os.Remove(filepath.Join(dir, "excluded.jsonl"))
		os.Remove(db)
	}
	t.Logf("%d kills (a whole run takes %v), %d with records written and not indexed; %d torn lines left", kills, whole, unindexed, torn)
	if kills < 6 || unindexed < 3 || torn < 2 {
		t.Fatalf("%d runs were killed mid-run, %d of them with records written and not indexed, and %d torn lines left; the test wants 6, 3 and 2", kills, unindexed, torn)
	}
	mustRunGendex(t, bin, args...)
	code, stdout, stderr := runGendex(t, bin, "", args...)
	if o := stdout + stderr; code != 0 || !strings.Contains(o, "export: nothing to do: every answer of X has a record or an exclusion") {
		t.Errorf("the run after the last says exit %d:\n%s", code, o)
	}
	check("the final run")
}

// checkExportSurvived checks the outputs of a run of TestExportSurvivesSIGKILL
// that finished (when says which): every answer of root/X has exactly one
// record or one exclusion, each record the prompt's ids + the answer's
// output_ids, the exclusions by reason are the fixture's, and the index db
// counts what a fresh ingest of the same files counts.
func checkExportSurvived(t *testing.T, bin, root, db string, n int, prompts map[string][]int, raws map[string]idsLine, when string) {
	t.Helper()
	dir := filepath.Join(root, "X")
	seen := map[string]int{}
	for _, l := range idsLines(t, filepath.Join(dir, "tokenized.jsonl")) {
		id := l.ID
		seen[id]++
		if want := append(append([]int(nil), prompts[id]...), raws[id].OutputIDs...); !reflect.DeepEqual(l.InputIDs, want) {
			t.Errorf("%s: %s: input_ids %v; want %v", when, id, l.InputIDs, want)
		}
	}
	reasons := map[string]int{}
	for _, l := range idsLines(t, filepath.Join(dir, "excluded.jsonl")) {
		seen[l.ID]++
		reasons[l.Reason]++
	}
	for id := range raws {
		if seen[id] != 1 {
			t.Errorf("%s: %s: %d records and exclusions; want exactly 1", when, id, seen[id])
		}
	}
	if len(seen) != n {
		t.Errorf("%s: %d ids written for %d answers", when, len(seen), n)
	}
	var abort, length, noIDs int
	for i := range n {
		switch {
		case i%13 == 0:
			abort++
		case i%7 == 0:
			length++
		case i%17 == 0:
			noIDs++
		}
	}
	if want := map[string]int{"abort": abort, "length": length, "no_output_ids": noIDs}; !reflect.DeepEqual(reasons, want) {
		t.Errorf("%s: exclusions by reason %v; want %v", when, reasons, want)
	}

	// The index counts what a fresh ingest of the same files counts (by
	// the binary: the race detector makes the test's own ingest of every
	// answer slow).
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	mustBin := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := runGendex(t, bin, "", args...)
		if code != 0 {
			t.Fatalf("gendex %q: exit %d\n%s", args, code, stderr)
		}
		return stdout
	}
	mustBin("--db", fresh, "ingest", root)
	files := func(db string) string {
		return mustBin("--db", db, "query", "files", "X", "--format", "tsv")
	}
	if got, want := files(db), files(fresh); got != want {
		t.Errorf("%s: the index's files:\n%s\na fresh index's:\n%s", when, got, want)
	}
	progress := func(db string) string {
		return mustBin("--db", db, "query", "progress", "X", "--format", "tsv")
	}
	if got, want := progress(db), progress(fresh); got != want {
		t.Errorf("%s: the index's progress:\n%s\na fresh index's:\n%s", when, got, want)
	}
}

// idsLine is a line of prompts, answers, records or exclusions, as far as
// TestExportSurvivesSIGKILL reads them.
type idsLine struct {
	ID        string `json:"id"`
	InputIDs  []int  `json:"input_ids"`
	OutputIDs []int  `json:"output_ids"`
	Reason    string `json:"reason"`
}

// idsLines reads every line of path; a line that is not JSON, or has no
// string id, fails the test.
func idsLines(t *testing.T, path string) []idsLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []idsLine
	for l := range strings.Lines(string(b)) {
		var x idsLine
		if err := json.Unmarshal([]byte(l), &x); err != nil || x.ID == "" {
			t.Fatalf("%s: %v in %q (a line without a string id?)", path, err, l)
		}
		out = append(out, x)
	}
	return out
}

// outputBytes is the size of the files at paths together (a missing one
// counts as empty).
func outputBytes(paths []string) int64 {
	var n int64
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// killMoment is closed at the first of: limit after the call, or delay
// after the files at paths together have grown by step bytes past their
// size at the call; unless stop is closed first.
func killMoment(paths []string, step int64, delay, limit time.Duration, stop <-chan struct{}) <-chan struct{} {
	target := outputBytes(paths) + step
	deadline := time.After(limit)
	ch := make(chan struct{})
	go func() {
		for outputBytes(paths) < target {
			select {
			case <-time.After(100 * time.Microsecond):
			case <-deadline:
				close(ch)
				return
			case <-stop:
				return
			}
		}
		select {
		case <-time.After(delay):
		case <-deadline:
		case <-stop:
			return
		}
		close(ch)
	}()
	return ch
}

// TestExportInterrupted: SIGINT stops export cleanly: exit 130, both
// outputs end with a whole line (what was decided is written), and the
// next run exports the rest, each answer once.
func TestExportInterrupted(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and interrupts a real process")
	}
	bin := gendexBinary(t)
	t.Parallel()
	const n = 10_000
	root := t.TempDir()
	dir := filepath.Join(root, "X")
	writeExportFixture(t, dir, n)
	db := filepath.Join(t.TempDir(), "g.db")
	export := startGendexWith(t, gendexOpts{env: []string{"GENDEX_EXPORT_FLUSH_BYTES=16384"}}, bin, "--db", db, "export", "--format", "ids", root)
	tok := filepath.Join(dir, "tokenized.jsonl")
	waitFor(t, 30*time.Second, "export never wrote a record", func() bool {
		fi, err := os.Stat(tok)
		return err == nil && fi.Size() > 0
	})
	export.Interrupt()
	if code := export.Wait(); code != 130 || !strings.Contains(export.Stderr(), "interrupted") {
		t.Fatalf("exit %d; want 130 and \"interrupted\":\n%s", code, export.Stderr())
	}
	for _, name := range []string{"tokenized.jsonl", "excluded.jsonl"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || len(data) == 0 || data[len(data)-1] != '\n' {
			t.Errorf("%s after the interrupt: %d bytes, %v; want whole lines", name, len(data), err)
		}
	}
	if got := len(jsonLines(t, tok)); got >= n-n/7 {
		t.Errorf("%d records before the interrupt: it was not interrupted mid-run", got)
	}
	mustRunGendex(t, bin, "--db", db, "export", "--format", "ids", root)
	seen := map[string]int{}
	for _, name := range []string{"tokenized.jsonl", "excluded.jsonl"} {
		for _, l := range jsonLines(t, filepath.Join(dir, name)) {
			seen[idOfLine(t, l)]++
		}
	}
	for i := range n {
		if id := fmt.Sprintf("x%06d", i); seen[id] != 1 {
			t.Errorf("%s: %d records and exclusions; want 1", id, seen[id])
		}
	}
}
