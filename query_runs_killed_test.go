package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/store"
)

// indexAnswered is the answers and the work owed (missing_raw + redo) the
// index of db holds, by `query progress`, over every dataset.
func indexAnswered(t *testing.T, bin, db string) (answered, toGo int64) {
	t.Helper()
	for _, row := range mustQueryJSON[map[string]any](t, bin, db, "progress") {
		a, _ := row["answered"].(float64)
		m, _ := row["missing_raw"].(float64)
		r, _ := row["redo"].(float64)
		answered += int64(a)
		toGo += int64(m + r)
	}
	return answered, toGo
}

// storedRun is the newest run's row as gen last stored it (its counts as
// it said them), and what the index says it did (store.Run.Indexed),
// read with the store as `query runs` reads the file.
func storedRun(t *testing.T, db string) store.Run {
	t.Helper()
	ix, err := store.Open(db, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var last store.Run
	if err := ix.View(func(v *store.View) error {
		return v.Runs(func(r *store.Run) error { last = *r; return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return last
}

// TestKilledRunCountsFromIndex: a gen SIGKILLed between two of its row's
// snapshots (stored about once a second) made answers its last row does
// not count. `query runs` shows the answers it made and the work owed as
// the index holds them (counts "index"), not its last row; so does the
// table. Once a later run has finished the work, the killed run's row
// keeps what it did: the index as the next run found it.
func TestKilledRunCountsFromIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	addr := freeAddr(t)
	startSimAt(t, bin, addr, "--seed", "5", "--decode-tps", "2000", "--slots", "16")
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "K"), "K", 4000)
	raw := filepath.Join(root, "K", "raw_responses.jsonl")
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", db, "gen", "--server", "http://" + addr, "--concurrency", "16", root}
	inFile := func() int64 { b, _ := os.ReadFile(raw); return int64(bytes.Count(b, []byte("\n"))) }

	// Killed right after a snapshot, while answers flow: the next one
	// would come about a second later. A snapshot may still land just
	// before the kill on a loaded machine: then gen is run again, and
	// killed again.
	var killed store.Run
	var before, answered, toGo int64
	for attempt := 0; ; attempt++ {
		if attempt == 4 {
			t.Fatalf("4 runs killed, none between two snapshots of its row: %+v", killed)
		}
		if attempt > 0 {
			before, _ = indexAnswered(t, bin, db)
		}
		gen := startGendex(t, bin, "", args...)
		waitFor(t, 60*time.Second, "gen's answers", func() bool { return inFile() >= before+50 })
		var seen *int64
		waitFor(t, 20*time.Second, "a new snapshot of the run's row", func() bool {
			rows, err := queryJSON[runRow](t, bin, db, "runs")
			r := lastRun(rows)
			if err != nil || r.Pid != gen.Pid() || r.Answers == nil {
				return false
			}
			if seen != nil && *seen != *r.Answers {
				return true
			}
			seen = r.Answers
			return false
		})
		time.Sleep(300 * time.Millisecond)
		gen.Kill()
		answered, toGo = indexAnswered(t, bin, db)
		killed = storedRun(t, db)
		if killed.State != store.RunLost || killed.Answers == nil || killed.Indexed == nil {
			t.Fatalf("the killed run as stored: %+v; want lost, with its answers and the index's", killed)
		}
		t.Logf("run %d killed: its last row says %d answers, the index holds %d it made", attempt+1, *killed.Answers, answered-before)
		if *killed.Answers < answered-before {
			break // its last row is behind the index: the case under test
		}
	}
	if n := inFile(); n < answered {
		t.Fatalf("%d answers in the file, %d in the index", n, answered)
	}
	r := lastRun(runsOf(t, bin, db))
	if r.State != "lost" || r.Answers == nil || *r.Answers != answered-before || r.ToGo == nil || *r.ToGo != toGo || r.Counts != "index" {
		t.Errorf("query runs of the killed run: %s, %v answers, %v to go, counts %q; want lost, %d answers and %d to go as the index holds them (its last row said %d), counts index",
			r.State, deref(r.Answers), deref(r.ToGo), r.Counts, answered-before, toGo, *killed.Answers)
	}
	if r.Note == nil || !strings.Contains(*r.Note, "the index's") {
		t.Errorf("the killed run's note: %v; want it to say its counts are the index's", deref(r.Note))
	}
	table := mustGendex(t, testEnv(nil), "--db", db, "query", "runs", "--format", "tsv").stdout
	if !strings.Contains(table, "\tlost\t") || !strings.Contains(table, "\tindex\t") {
		t.Errorf("query runs as a table:\n%s\nwant the lost run's counts from the index", table)
	}

	// A later run finishes the work: the killed run keeps what it did, as
	// that run found the index (it indexes what the killed one wrote and
	// had not indexed yet), and owed then.
	written := inFile()
	gen := startGendex(t, bin, "", args...)
	if code := gen.WaitWithin(t, 3*time.Minute); code != 0 {
		t.Fatalf("gen after the kill: exit %d\n%s", code, gen.Stderr())
	}
	rows := runsOf(t, bin, db)
	lost := rows[len(rows)-2]
	if lost.State != "lost" || lost.Counts != "index" || lost.Answers == nil || *lost.Answers != written-before ||
		lost.ToGo == nil || *lost.ToGo != 4000-written {
		t.Errorf("the killed run after a later one: %s, %v answers, %v to go, counts %q; want lost, the %d answers it wrote and %d to go, counts index",
			lost.State, deref(lost.Answers), deref(lost.ToGo), lost.Counts, written-before, 4000-written)
	}
}

// deref is *p, or nil for a nil p, for a message.
func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}
