package gen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
)

// TestMixRedoDrawsAsFirst: a record asked again by --redo draws what it
// drew when first asked (the draw is the record's: its dataset, id, sample
// and seed), so a redo never shifts the mixture's shares.
func TestMixRedoDrawsAsFirst(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 3, DecodeTokensPerSec: 2000})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "M", "ids", 40)
	mix := mustMix(t, "temperature=0:0.15,1.0:0.70,u(0.2,1.0):0.15", "top_k=20:0.3,-1:0.7")
	dbPath := filepath.Join(t.TempDir(), "g.db")
	if sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 8, Mix: mix}, root); err != nil || sum.Responses != 40 {
		t.Fatalf("the first run: %+v %v\n%s", sum, err, log)
	}
	ids := filepath.Join(t.TempDir(), "redo.txt")
	var redone []string
	for _, n := range []int{1, 7, 13, 21, 22, 30, 40} {
		redone = append(redone, fmt.Sprintf("M-%05d", n))
	}
	os.WriteFile(ids, []byte(strings.Join(redone, "\n")+"\n"), 0o644)
	redo, err := ParseRedo(ids)
	if err != nil {
		t.Fatal(err)
	}
	if sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 8, Mix: mix, Redo: redo}, root); err != nil || sum.Responses != int64(len(redone)) {
		t.Fatalf("the redo: %+v %v\n%s", sum, err, log)
	}
	// Every answer line of an id drew the same; the redone ids have two.
	draws, lines := map[string]string{}, map[string]int{}
	raw, _ := os.ReadFile(filepath.Join(out, "M", "raw_responses.jsonl"))
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var a struct {
			ID         string
			Provenance struct {
				Drawn map[string]string `json:"drawn"`
			}
			MixValues map[string]any `json:"mix_values"`
		}
		if err := json.Unmarshal([]byte(l), &a); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]any{a.Provenance.Drawn, a.MixValues})
		if old, ok := draws[a.ID]; ok && old != string(b) {
			t.Errorf("%s drew %s first, then %s when redone", a.ID, old, b)
		}
		draws[a.ID] = string(b)
		lines[a.ID]++
	}
	for _, id := range redone {
		if lines[id] != 2 {
			t.Errorf("%s: %d answer lines, want 2 (the first and the redo)", id, lines[id])
		}
	}
}
