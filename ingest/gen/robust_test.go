package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
	"gendex/store"
)

// TestGenOneUnstorablePrompt: a prompt whose id is over the index's key
// limit, and an answer line of another tool with such an id, are left out
// with a file:line message; every other prompt of that dataset and of the
// next one is answered, the run succeeds, and the next run has nothing to
// do. The prompt is not sent: its answer could not be indexed under its id
// either, so gen could never know it was answered and would ask again on
// every run.
func TestGenOneUnstorablePrompt(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 7})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "A", "text", 20)
	writePrompts(t, root, "B", "ids", 10)
	longID := strings.Repeat("L", store.MaxIDLen+1)
	promptsA := filepath.Join(root, "A", "prompts.jsonl")
	b, err := os.ReadFile(promptsA)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(b), "\n")
	bad := fmt.Sprintf(`{"id":%q,"text":"never sent"}`+"\n", longID)
	lines = append(lines[:7], append([]string{bad}, lines[7:]...)...) // line 8
	if err := os.WriteFile(promptsA, []byte(strings.Join(lines, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	// Another tool's shard of answers, with one such id among them.
	shard := filepath.Join(out, "A", "raw_responses.other.jsonl") // in the answer folder
	os.MkdirAll(filepath.Dir(shard), 0o755)
	shardLines := `{"id":"A-00001","completion_tokens":3}` + "\n" + fmt.Sprintf(`{"id":%q,"completion_tokens":4}`, longID) + "\n"
	if err := os.WriteFile(shard, []byte(shardLines), 0o644); err != nil {
		t.Fatal(err)
	}

	dbPath := filepath.Join(t.TempDir(), "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 4}, root)
	if err != nil {
		t.Fatalf("gen: %v\n%s", err, log)
	}
	if sum.Responses != 29 || sum.Errors != 0 {
		t.Fatalf("summary %+v; want 29 answers (A-00001 answered by the shard)\n%s", sum, log)
	}
	for _, want := range []string{promptsA + ":8: id is 32769 bytes", shard + ":2: id is 32769 bytes", "2 lines were left out", "2 lines left out of the index"} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
	answers := outputLines(t, filepath.Join(out, "A", "raw_responses.jsonl"))
	if len(answers) != 19 {
		t.Errorf("A: %d answers in the output, want 19", len(answers))
	}
	for id, l := range answers {
		if len(id) > 100 || len(l) != 1 {
			t.Errorf("A: answer %.20q... has %d lines", id, len(l))
		}
	}
	checkExactlyOnce(t, dbPath, root, "B", out, url, 128)

	db := openDB(t, dbPath)
	db.View(func(v *store.View) error {
		s, _ := v.Summary("A")
		if s.MissingRaw() != 0 || s.Stages[store.Prompts].Records != 20 || s.Skipped() != 2 ||
			s.Stages[store.Prompts].Skipped != 1 || s.Stages[store.Raw].Skipped != 1 {
			t.Errorf("A: prompts %d, missing %d, skipped %d (per stage %d, %d); want 20, 0, 2 (1, 1)", s.Stages[store.Prompts].Records,
				s.MissingRaw(), s.Skipped(), s.Stages[store.Prompts].Skipped, s.Stages[store.Raw].Skipped)
		}
		return nil
	})
	db.Close()

	sum, log, err = runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out}, root)
	if err != nil || sum.Responses != 0 || !strings.Contains(log, "nothing to do") {
		t.Fatalf("second run: %+v, %v\n%s", sum, err, log)
	}
}
