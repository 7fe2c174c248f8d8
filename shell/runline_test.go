package shell

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/store"
)

// TestDashboardRunLine: watch starts with the last run's state line: a
// stall's sentence while the writer answering holds the run; lost once
// nobody does.
func TestDashboardRunLine(t *testing.T) {
	now := time.Date(2026, 11, 28, 3, 20, 0, 0, time.UTC)
	root := t.TempDir()
	writeDataset(t, root, "A", 6, now.Add(-time.Hour))
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ingesttest.IndexInto(t, db, root)
	toGo := int64(4)
	run := &store.Run{Start: now.Add(-time.Hour).UnixMilli(), Pid: 4242, Host: "node7", Kind: "gen", State: store.RunStalled,
		Since: now.Add(-8 * time.Minute).UnixMilli(), ToGo: &toGo,
		Detail: "stalled since 03:12: 61 requests held by gpu1:30000, which answers no probe"}
	if err := db.Update(func(tx *store.Tx) error { return tx.PutRun(run) }); err != nil {
		t.Fatal(err)
	}
	db.HoldRun(run)
	sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.TSV}
	var b strings.Builder
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(b.String(), "\n")
	if want := "run: stalled since 03:12: 61 requests held by gpu1:30000, which answers no probe (gen, pid 4242 on node7), 4 to go"; first != want {
		t.Errorf("watch's first line:\n%s\nwant:\n%s", first, want)
	}
	db.ReleaseRun(run)
	b.Reset()
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(b.String(), "\n"); !strings.HasPrefix(first, "run: lost (gen, pid 4242 on node7, started 02:20:00), 4 to go: it ended without saying so") {
		t.Errorf("watch's first line once nobody holds the run: %s", first)
	}
}
