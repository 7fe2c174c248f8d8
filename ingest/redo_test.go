package ingest_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/ingesttest"
	"gendex/store"
)

// TestRedoReplacesTheAnswer: a line with "redo": true replaces the earlier
// answer of its id everywhere the index counts it (records, tokens, finish,
// the length histogram's truncated), whether the file is read in one go
// or line by line as gen appends, in the same file or another of the
// folder; an accidental duplicate still counts once, first wins; a record
// or exclusion of the replaced answer is marked stale.
func TestRedoReplacesTheAnswer(t *testing.T) {
	t.Parallel()
	lines := []string{
		`{"id":"a","text":"cut","completion_tokens":16,"finish_reason":"length","finished_at":"2026-12-01T10:00:00Z"}`,
		`{"id":"b","text":"ok","completion_tokens":5,"finish_reason":"stop","finished_at":"2026-12-01T10:00:01Z"}`,
		`{"id":"b","text":"dup","completion_tokens":7,"finish_reason":"stop","finished_at":"2026-12-01T10:00:02Z"}`,
		`{"id":"a","text":"whole","completion_tokens":40,"finish_reason":"stop","finished_at":"2026-12-01T10:00:03Z","redo":true}`,
		`{"id":"c","text":"new","completion_tokens":3,"finish_reason":"stop","finished_at":"2026-12-01T10:00:04Z","redo":true}`,
	}
	want := func(t *testing.T, db *store.DB, how string) {
		t.Helper()
		err := db.View(func(v *store.View) error {
			s, err := v.Summary("ds")
			if err != nil {
				return err
			}
			raw := s.Stage(store.Raw)
			if raw.Records != 3 || raw.CompletionTokens != 40+5+3 || raw.Finish["length"] != 0 || raw.Finish["stop"] != 3 || raw.Replaced != 1 || raw.Duplicates != 1 {
				t.Errorf("%s: raw %+v; want a, b, c: 48 tokens, all stop, 1 replaced, 1 duplicate", how, raw)
			}
			a, ok, err := v.Get("ds", store.Raw, "a")
			if err != nil || !ok || a.CompletionTokens != 40 || a.Finish != "stop" {
				t.Errorf("%s: a = %+v %v %v, want the redo's", how, a, ok, err)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	root := t.TempDir()
	dir := filepath.Join(root, "ds")
	os.MkdirAll(dir, 0o755)
	raw := filepath.Join(dir, "raw_responses.jsonl")
	os.WriteFile(raw, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	db, _ := ingesttest.Index(t, root)
	want(t, db, "in one go")

	// As gen appends: one line at a time, each read when it arrives.
	os.WriteFile(raw, nil, 0o644)
	db2, _ := ingesttest.Index(t, root)
	f, _ := os.OpenFile(raw, os.O_WRONLY|os.O_APPEND, 0)
	for _, l := range lines {
		f.WriteString(l + "\n")
		ingesttest.IndexInto(t, db2, root)
	}
	f.Close()
	want(t, db2, "line by line")

	// The redo in another answer file of the folder, and a record of the
	// replaced answer: it is marked stale.
	os.WriteFile(raw, []byte(strings.Join(lines[:3], "\n")+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "excluded.jsonl"), []byte(`{"id":"a","reason":"length"}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "raw_responses.redo.jsonl"), []byte(strings.Join(lines[3:], "\n")+"\n"), 0o644)
	db3, _ := ingesttest.Index(t, root)
	want(t, db3, "in another file")
	var stale []string
	db3.View(func(v *store.View) error {
		return v.Stale("ds", func(id string) error { stale = append(stale, id); return nil })
	})
	if len(stale) != 1 || stale[0] != "a" {
		t.Errorf("stale %v, want [a] (its exclusion was made from the replaced answer)", stale)
	}
}
