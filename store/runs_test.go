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
