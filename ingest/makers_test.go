package ingest

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gendex/store"
)

// TestFileMakers: a response file's state counts its answer lines by their
// "model" and "simulated", across commits (a batch size of 2), and a
// forgotten file starts its count again.
func TestFileMakers(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	path := filepath.Join(t.TempDir(), "ds", "raw_responses.jsonl")
	lines := []string{
		`{"id":"1","completion_tokens":3,"model":"sim-model","simulated":true}`,
		`{"id":"2","completion_tokens":3,"model":"sim-model","simulated":true}`,
		`{"id":"3","completion_tokens":3,"model":"Kimi-K2.5"}`,
		`{"id":"4","completion_tokens":3}`,
		`{"id":"5","completion_tokens":3,"model":"Kimi-K2.5","simulated":false}`,
		`{"id":"6","error":{"message":"boom"},"model":"Kimi-K2.5"}`, // an error line: not an answer
		`{"id":"7","completion_tokens":3,"model":"sim-model","simulated":true}`,
		`{"id":"8","completion_tokens":3,"model":"caf\u00e9"}`,
	}
	write := func(ls []string) {
		t.Helper()
		os.MkdirAll(filepath.Dir(path), 0o755)
		if err := os.WriteFile(path, []byte(strings.Join(ls, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(lines)
	ix := &Indexer{DB: db, BatchRecords: 2}
	if _, err := ix.IndexFile(context.Background(), Source{Path: path, Dataset: "ds", Stage: store.Raw}); err != nil {
		t.Fatal(err)
	}
	makers := func() []store.Maker {
		var fs store.FileState
		db.View(func(v *store.View) (err error) { fs, _, err = v.File(path); return err })
		return fs.Makers
	}
	want := []store.Maker{{Model: "sim-model", Simulated: true, Lines: 3, Answers: 3}, {Model: "Kimi-K2.5", Lines: 2, Answers: 2}, {Lines: 1, Answers: 1}, {Model: "café", Lines: 1, Answers: 1}}
	if got := makers(); !reflect.DeepEqual(got, want) {
		t.Errorf("makers:\n got %+v\nwant %+v", got, want)
	}
	write(lines[2:4]) // replaced: shorter, another start
	if _, err := ix.IndexFile(context.Background(), Source{Path: path, Dataset: "ds", Stage: store.Raw}); err != nil {
		t.Fatal(err)
	}
	want = []store.Maker{{Model: "Kimi-K2.5", Lines: 1, Answers: 1}, {Lines: 1, Answers: 1}}
	if got := makers(); !reflect.DeepEqual(got, want) {
		t.Errorf("makers after the file was replaced:\n got %+v\nwant %+v", got, want)
	}
}

// TestMakerAnswers: a maker's answers are those that count: a duplicate
// id's line is not one, and an answer a redo replaced is taken off its
// maker's, in its own file or another.
func TestMakerAnswers(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	dir := filepath.Join(t.TempDir(), "ds")
	os.MkdirAll(dir, 0o755)
	a, b := filepath.Join(dir, "raw_responses.jsonl"), filepath.Join(dir, "raw_responses.more.jsonl")
	os.WriteFile(a, []byte(`{"id":"1","completion_tokens":3,"model":"m1"}
{"id":"2","completion_tokens":3,"model":"m1"}
{"id":"1","completion_tokens":3,"model":"m1"}
{"id":"3","completion_tokens":3,"model":"m1"}
{"id":"3","completion_tokens":3,"model":"m2","redo":true}
`), 0o644)
	os.WriteFile(b, []byte(`{"id":"2","completion_tokens":3,"model":"m2","redo":true}`+"\n"), 0o644)
	ix := &Indexer{DB: db, BatchRecords: 2}
	makers := func(path string) []store.Maker {
		t.Helper()
		var fs store.FileState
		db.View(func(v *store.View) (err error) { fs, _, err = v.File(path); return err })
		if !fs.MakerAnswers {
			t.Errorf("%s: its makers' answers not kept", path)
		}
		return fs.Makers
	}
	for _, p := range []string{a, b} {
		if _, err := ix.IndexFile(context.Background(), Source{Path: p, Dataset: "ds", Stage: store.Raw}); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := makers(a), []store.Maker{{Model: "m1", Lines: 4, Answers: 1}, {Model: "m2", Lines: 1, Answers: 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("makers of the first file:\n got %+v\nwant %+v", got, want)
	}
	if got, want := makers(b), []store.Maker{{Model: "m2", Lines: 1, Answers: 1}}; !reflect.DeepEqual(got, want) {
		t.Errorf("makers of the file that replaced its id 2:\n got %+v\nwant %+v", got, want)
	}
}
