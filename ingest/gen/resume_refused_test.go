package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
	"gendex/store"
)

// conversationLines are ShareGPT conversations, ids c<from>...: each with
// its id also under meta.uid (another value), one human turn or two.
func conversationLines(from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		turns := []map[string]string{{"from": "human", "value": fmt.Sprintf("Question 1 of c%d?", i)}, {"from": "gpt", "value": "Answer 1."}}
		if i%2 == 0 {
			turns = append(turns, map[string]string{"from": "human", "value": "And then?"}, map[string]string{"from": "gpt", "value": "Answer 2."})
		}
		line, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("c%d", i), "meta": map[string]string{"uid": fmt.Sprintf("uc%d", i)}, "conversations": turns})
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// TestResumeAskedOtherwiseRefused: a resume asked otherwise than the
// answers it would join (another --turns, another --mix spec, ids read
// from another path) is refused before anything is sent or written, and
// its run is recorded as refused (not failed: a script would run it
// again), naming what differs; the index keeps the prompts under the ids
// their answers have.
func TestResumeAskedOtherwiseRefused(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 3})
	mixA := mustMix(t, "temperature=0:0.5,1.0:0.5")
	mixB := mustMix(t, "temperature=0:0.2,1.0:0.8")
	for _, c := range []struct {
		name        string
		first, then Config
		refusal     string
	}{
		{"turns", Config{}, Config{Turns: TurnsLast}, `gen.turns: "all" before, "last" now`},
		{"mix", Config{Mix: mixA}, Config{Mix: mixB}, `mix.temperature: "0:0.5,1.0:0.5" before, "0:0.2,1.0:0.8" now`},
		{"id", Config{}, Config{Paths: PromptPaths{ID: "meta.uid"}}, "ids would now be read from meta.uid"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			dir := filepath.Join(root, "R")
			os.MkdirAll(dir, 0o755)
			prompts := filepath.Join(dir, "prompts.jsonl")
			os.WriteFile(prompts, []byte(conversationLines(1, 4)), 0o644)
			dbPath := filepath.Join(t.TempDir(), "g.db")
			c.first.Servers, c.first.Concurrency = []string{url}, 4
			if sum, log, err := runGen(t, t.Context(), dbPath, c.first, root); err != nil || sum.Responses != 4 {
				t.Fatalf("the first run: %+v %v\n%s", sum, err, log)
			}
			f, _ := os.OpenFile(prompts, os.O_APPEND|os.O_WRONLY, 0)
			f.WriteString(conversationLines(5, 3))
			f.Close()
			raw := filepath.Join(dir, "raw_responses.jsonl")
			before, _ := os.ReadFile(raw)

			c.then.Servers, c.then.Concurrency = []string{url}, 4
			sum, log, err := runGen(t, t.Context(), dbPath, c.then, root)
			if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error()+log, c.refusal) {
				t.Errorf("the resume: %+v, %v; want refused, naming %q\n%s", sum, err, c.refusal, log)
			}
			if after, _ := os.ReadFile(raw); string(after) != string(before) {
				t.Errorf("the refused resume wrote answers")
			}
			db := openDB(t, dbPath)
			defer db.Close()
			var last store.Run
			db.View(func(v *store.View) error { return v.Runs(func(r *store.Run) error { last = *r; return nil }) })
			if c.name != "id" && last.State != store.RunRefused {
				t.Errorf("the refused resume's run: %q, want %q", last.State, store.RunRefused)
			}
			var p1, u1 bool // the first prompt, under its id and under meta.uid
			db.View(func(v *store.View) error {
				_, p1, _ = v.Get("R", store.Prompts, "c1")
				_, u1, _ = v.Get("R", store.Prompts, "uc1")
				return nil
			})
			if !p1 || u1 {
				t.Errorf("the index holds the first prompt under its id: %v, under its meta.uid: %v; want only its id", p1, u1)
			}
		})
	}
}
