package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
)

// TestGenSaysWhereSkippedAnswersAre: a run that skips prompts answered
// earlier says how many, where their answers are and what made them; one
// with nothing left says the same of all of them.
func TestGenSaysWhereSkippedAnswersAre(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 5})
	root := t.TempDir()
	writePrompts(t, root, "P", "ids", 10)
	db := filepath.Join(t.TempDir(), "g.db")
	if _, log, err := runGen(t, t.Context(), db, Config{Servers: []string{url}}, root); err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	f, err := os.OpenFile(filepath.Join(root, "P", "prompts.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		fmt.Fprintf(f, `{"id":"more-%d","input_ids":[1,2,3]}`+"\n", i)
	}
	f.Close()
	where := fmt.Sprintf("10 answers in %s (model sim-model, made by the simulator)", filepath.Join(root, "P"))
	sum, log, err := runGen(t, t.Context(), db, Config{Servers: []string{url}}, root)
	if err != nil || sum.Responses != 5 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	if !strings.Contains(log, "P: 10 of 15 prompts already answered or failed, not asked again: "+where) {
		t.Errorf("the log does not say where the skipped prompts' answers are (%s):\n%s", where, log)
	}
	_, log, err = runGen(t, t.Context(), db, Config{Servers: []string{url}}, root)
	if err != nil || !strings.Contains(log, "nothing to do") || !strings.Contains(log, "P: 15 answers in "+filepath.Join(root, "P")) {
		t.Errorf("nothing to do does not say where the answers are: %v\n%s", err, log)
	}
}
