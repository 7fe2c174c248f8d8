package store

import (
	"os"
	"path/filepath"
	"testing"
)

// TestRunLostWhateverHoldsItsPid: a run that never said it ended is
// running only while the process reading holds it (HoldRun); its pid
// alone says nothing (here it is a live process's: this test's own, as a
// reused pid would be). Read from the file, with no writer, it is lost;
// one that said it ended keeps its state.
func TestRunLostWhateverHoldsItsPid(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	going := &Run{Start: 1000, Pid: os.Getpid(), Host: "h", Kind: "gen", State: RunStalled, Detail: "stalled since 00:00"}
	ended := &Run{Start: 2000, Pid: os.Getpid(), Kind: "gen", State: RunInterrupted, End: 3000}
	if err := db.Update(func(tx *Tx) error {
		if err := tx.PutRun(going); err != nil {
			return err
		}
		return tx.PutRun(ended)
	}); err != nil {
		t.Fatal(err)
	}
	states := func(db *DB) (out []string) {
		t.Helper()
		if err := db.View(func(v *View) error {
			return v.Runs(func(r *Run) error { out = append(out, r.State); return nil })
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := states(db); got[0] != RunLost || got[1] != RunInterrupted {
		t.Errorf("not held: %v; want lost, interrupted", got)
	}
	db.HoldRun(going)
	if got := states(db); got[0] != RunStalled || got[1] != RunInterrupted {
		t.Errorf("held by this process: %v; want stalled, interrupted", got)
	}
	db.Close()
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if got := states(ro); len(got) != 2 || got[0] != RunLost || got[1] != RunInterrupted {
		t.Errorf("read from the file, its writer gone: %v; want lost, interrupted", got)
	}
}

// TestLostRunCountsFromTheNextRun: a lost run's counts are what the index
// held when the next run on the same datasets started, less what it held
// at the lost run's start; unknown (nil) when the next run asks other
// datasets, or for a row stored before runs kept their datasets.
func TestLostRunCountsFromTheNextRun(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "r.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	toGo := func(n int64) *int64 { return &n }
	rows := []*Run{
		{Start: 1000, Pid: 1, Kind: "gen", State: RunRunning, Datasets: []string{"a", "b"}, AtStart: &Tally{Answered: 2, ToGo: toGo(18)}},
		{Start: 2000, Pid: 2, Kind: "gen", State: RunRunning, Datasets: []string{"b", "a"}, AtStart: &Tally{Answered: 9, Failed: 1, ToGo: toGo(10)}},
		{Start: 3000, Pid: 3, Kind: "gen", State: RunFinished, End: 4000, Datasets: []string{"c"}, AtStart: &Tally{ToGo: toGo(5)}},
		{Start: 5000, Pid: 4, Kind: "gen", State: RunRunning}, // stored before runs kept their datasets
		{Start: 6000, Pid: 5, Kind: "gen", State: RunFinished, End: 7000},
	}
	if err := db.Update(func(tx *Tx) error {
		for _, r := range rows {
			if err := tx.PutRun(r); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var got []*Tally
	if err := db.View(func(v *View) error {
		return v.Runs(func(r *Run) error { got = append(got, r.Indexed); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	if a := got[0]; a == nil || a.Answered != 7 || a.Failed != 1 || a.ToGo == nil || *a.ToGo != 10 {
		t.Errorf("the run lost before one on the same datasets: %+v; want 7 answers, 1 failed, 10 to go", a)
	}
	if got[1] != nil || got[3] != nil {
		t.Errorf("lost before a run on other datasets: %+v; lost in a row without datasets: %+v; want both unknown", got[1], got[3])
	}
	if got[2] != nil || got[4] != nil {
		t.Errorf("runs that said they ended: %+v, %+v; want no counts from the index", got[2], got[4])
	}
}
