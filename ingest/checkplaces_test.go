package ingest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest"
	"gendex/ingest/ingesttest"
)

// TestCheckPlacesEveryAnswerStage: with the index holding answers of any
// one stage (raw_responses*, errors*, turns*) in a/ds, a file of any
// answer stage in b/ds is refused (two folders with one dataset name
// never merge), naming both folders; a file of a/ds itself is not.
func TestCheckPlacesEveryAnswerStage(t *testing.T) {
	t.Parallel()
	stages := []struct{ held, second, line string }{
		{"raw_responses.jsonl", "raw_responses_node2.jsonl", `{"id":"p1","completion_tokens":1}`},
		{"errors.jsonl", "errors_node2.jsonl", `{"id":"p1","status":503,"error":"Service Unavailable"}`},
		{"turns.jsonl", "turns_node2.jsonl", `{"id":"p2","turn":1,"turns":2,"text":"t","prompt_tokens":4,"completion_tokens":3,"finish_reason":"stop"}`},
	}
	write := func(path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, held := range stages {
		dir, err := filepath.EvalSymlinks(t.TempDir()) // the spelling the index stores
		if err != nil {
			t.Fatal(err)
		}
		a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
		write(filepath.Join(a, "ds", "prompts.jsonl"), `{"id":"p1","text":"a"}`+"\n"+`{"id":"p2","text":"b"}`)
		write(filepath.Join(a, "ds", held.held), held.line)
		db, _ := ingesttest.Index(t, a)
		for _, second := range stages {
			write(filepath.Join(a, "ds", second.second), second.line)
			write(filepath.Join(b, "ds", second.second), second.line)
		}
		own, err := ingest.Discover(a, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := ingest.CheckPlaces(db, own); err != nil {
			t.Errorf("%s held in a/ds: a/ds's own files refused: %v", held.held, err)
		}
		srcs, err := ingest.Discover(b, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range srcs {
			err := ingest.CheckPlaces(db, []ingest.Source{s})
			if err == nil || !strings.Contains(err.Error(), "answers from "+filepath.Join(a, "ds")+", and from "+filepath.Join(b, "ds")) {
				t.Errorf("%s held in a/ds, %s in b/ds: %v; want refused, naming both folders", held.held, filepath.Base(s.Path), err)
			}
		}
		if len(srcs) != len(stages) {
			t.Errorf("b/ds: %d files found, want %d", len(srcs), len(stages))
		}
	}
}
