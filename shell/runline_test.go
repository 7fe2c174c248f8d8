package shell

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/store"
	"gendex/store/terminal"
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

	// A run that kept its datasets and what the index held of them at its
	// start: lost, its answers and to go are the index's, not its row's.
	two := int64(2)
	killed := &store.Run{Start: now.Add(-30 * time.Minute).UnixMilli(), Pid: 4343, Host: "node7", Kind: "gen", State: store.RunRunning,
		ToGo: &toGo, Answers: &two, Datasets: []string{"A"}, AtStart: &store.Tally{Answered: 1}}
	if err := db.Update(func(tx *store.Tx) error { return tx.PutRun(killed) }); err != nil {
		t.Fatal(err)
	}
	sh.Width = func() int { return 300 }
	b.Reset()
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	first, _, _ = strings.Cut(b.String(), "\n")
	if !strings.HasPrefix(first, "run: lost (gen, pid 4343 on node7, started 02:50:00), 5 answers, 4 to go: it ended without saying so") ||
		!strings.Contains(first, "its answers, errors and to_go are the index's") {
		t.Errorf("watch's first line once a run that kept its datasets is lost: %s", first)
	}
}

// TestRunLinesBreakLongWords: the run's line is wrapped at spaces within
// the width; a word longer than a line (a path) is broken at the edge,
// the rest indented as a continuation, and nothing of it is lost.
func TestRunLinesBreakLongWords(t *testing.T) {
	path := "/scratch/project/user/eagle3-drafter-data/part-0007/raw_responses.jsonl"
	line := "run: failed since 10:00:00 (gen, pid 42 on node7): writing " + path + ": no space left on device"
	got := runLines(line, 30)
	for _, l := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if terminal.Width(l) > 30 {
			t.Errorf("a line of %d columns at 30:\n%s", terminal.Width(l), got)
		}
	}
	if !strings.Contains(strings.ReplaceAll(got, "\n  ", ""), path) || !strings.HasPrefix(got, "run: failed since 10:00:00\n") {
		t.Errorf("the line at 30 columns:\n%s\nwant it wrapped at spaces, the path broken at the edge, whole", got)
	}
	if got := runLines(line, 0); got != line+"\n" {
		t.Errorf("width unknown: %q; want the line as it is", got)
	}
}
