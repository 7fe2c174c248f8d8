package query_test

import (
	"path/filepath"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/store"
)

// TestLostRunCountsFromIndex: `query runs` shows a run that ended without
// saying so (killed: no writer holds the index) with the answers it made
// and the work owed as the index holds them (counts "index"), not as its
// last row said them (behind: it was killed between two snapshots).
func TestLostRunCountsFromIndex(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "d", "prompts.jsonl"), `{"id":"a","prompt":"q"}`+"\n"+`{"id":"b","prompt":"q"}`+"\n")
	writeFile(t, filepath.Join(root, "d", "raw_responses.jsonl"), `{"id":"a","text":"r"}`+"\n")
	db, _ := ingesttest.Index(t, root)
	said := int64(2) // its last row: 0 answers, 2 to go
	run := &store.Run{Start: time.Now().Add(-time.Hour).UnixMilli(), Pid: 8, Host: "n", Kind: "gen", State: store.RunRunning,
		ToGo: &said, Answers: new(int64), Errors: new(int64), Datasets: []string{"d"}, AtStart: &store.Tally{ToGo: &said}}
	if err := db.Update(func(tx *store.Tx) error { return tx.PutRun(run) }); err != nil {
		t.Fatal(err)
	}
	r := answer(t, db, time.Now(), "runs")
	if len(r.Rows) != 1 {
		t.Fatalf("runs: %d rows, want the one run", len(r.Rows))
	}
	got := map[string]any{}
	for i, c := range r.Columns {
		got[c] = norm(r.Rows[0][i])
	}
	if got["state"] != store.RunLost || got["answers"] != int64(1) || got["to_go"] != int64(1) || got["errors"] != int64(0) || got["counts"] != "index" {
		t.Errorf("the killed run's row: %v; want lost, 1 answer, 1 to go and 0 errors as the index holds them, counts index", got)
	}
}
