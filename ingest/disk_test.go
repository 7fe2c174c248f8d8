package ingest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/store"
)

// TestCheckDiskForgetsGoneFile: the disk is the truth. An answer file the
// index counts that is gone when a writer starts is forgotten by
// CheckDisk (its prompts are unanswered again) and said, once the run's
// files are read (SayForgotten), with its path and counts; the files still
// there keep their records. The indexer never
// visits a gone file, so this is CheckDisk's alone (.ci/mutants.txt,
// disk-forgets-gone).
func TestCheckDiskForgetsGoneFile(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	dir := filepath.Join(t.TempDir(), "d")
	os.MkdirAll(dir, 0o755)
	prompts, raw := filepath.Join(dir, "prompts.jsonl"), filepath.Join(dir, "raw_responses.jsonl")
	os.WriteFile(prompts, []byte(`{"id":"a","text":"x"}`+"\n"+`{"id":"b","text":"y"}`+"\n"+`{"id":"c","text":"z"}`+"\n"), 0o644)
	os.WriteFile(raw, []byte(line("a", 1)+line("b", 2)), 0o644)
	var c collector
	ix := &Indexer{DB: db, Report: c.report}
	srcs := []Source{{Path: prompts, Dataset: "d", Stage: store.Prompts}, {Path: raw, Dataset: "d", Stage: store.Raw}}
	for _, src := range srcs {
		if _, err := ix.IndexFile(context.Background(), src); err != nil {
			t.Fatal(err)
		}
	}
	if s := summary(t, db, "d"); s.Stage(store.Raw).Records != 2 || s.MissingRaw() != 1 {
		t.Fatalf("indexed: %d answers, %d missing; want 2 and 1", s.Stage(store.Raw).Records, s.MissingRaw())
	}
	if err := os.Remove(raw); err != nil {
		t.Fatal(err)
	}
	if err := ix.CheckDisk(context.Background(), srcs[:1]); err != nil {
		t.Fatal(err)
	}
	ix.SayForgotten() // as a writer does once its files are read
	s := summary(t, db, "d")
	if s.Stage(store.Raw).Records != 0 || s.Stage(store.Prompts).Records != 3 || s.MissingRaw() != 3 {
		t.Errorf("after the answers' file is gone: %d answers, %d prompts, %d missing; want 0, 3 and 3",
			s.Stage(store.Raw).Records, s.Stage(store.Prompts).Records, s.MissingRaw())
	}
	var said []string
	for _, p := range c.problems {
		if p.Kind == Gone {
			said = append(said, p.Path+": "+p.Msg)
		}
	}
	if len(said) != 1 || !strings.Contains(said[0], raw+": the file is gone: its 2 records are forgotten, and the 2 prompts they answered are unanswered again") {
		t.Errorf("CheckDisk said %q; want once that %s is gone with its 2 records", said, raw)
	}
}
