package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
)

// TestAnotherOutRefused: a dataset whose answers the index holds from one
// --out folder is refused a run that would answer it into another (its
// prompts the same): one place per dataset. The refusal names both answer
// folders, and nothing is written in the second.
func TestAnotherOutRefused(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 2, Unmarked: true}) // a real model's answers, as far as gen can tell
	root, outs := t.TempDir(), t.TempDir()
	writePrompts(t, root, "P", "text", 6)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	o1, o2 := filepath.Join(outs, "o1"), filepath.Join(outs, "o2")
	if sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: o1, Concurrency: 4}, root); err != nil || sum.Responses != 6 {
		t.Fatalf("the first run: %+v %v\n%s", sum, err, log)
	}
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: o2, Concurrency: 4}, root)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(o1, "P")) || !strings.Contains(err.Error(), filepath.Join(o2, "P")) {
		t.Fatalf("a run into another --out: %+v, %v; want refused, naming both folders\n%s", sum, err, log)
	}
	if files, _ := filepath.Glob(filepath.Join(o2, "P", "raw_responses*")); len(files) != 0 {
		t.Errorf("the refused run wrote %v", files)
	}
	if _, err := os.Stat(filepath.Join(o1, "P", "raw_responses.jsonl")); err != nil {
		t.Errorf("the first run's answers: %v", err)
	}
}
