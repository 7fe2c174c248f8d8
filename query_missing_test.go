package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// noIDData writes a dataset "ds" of three prompts and two Ollama answers,
// which carry no request id: they are indexed as raw_responses.jsonl:1
// and :2, so every prompt is missing.
func noIDData(t *testing.T) string {
	t.Helper()
	data := filepath.Join(t.TempDir(), "data")
	writeTestFile(t, filepath.Join(data, "ds", "prompts.jsonl"),
		`{"id":"p1","text":"a"}`+"\n"+`{"id":"p2","text":"b"}`+"\n"+`{"id":"p3","text":"c"}`+"\n")
	writeTestFile(t, filepath.Join(data, "ds", "raw_responses.jsonl"),
		`{"model":"llama3.2","created_at":"2025-03-01T10:00:00Z","response":"Blue.","done":true,"done_reason":"stop","prompt_eval_count":26,"eval_count":12}`+"\n"+
			`{"model":"llama3.2","created_at":"2025-03-01T10:00:01Z","response":"Red.","done":true,"done_reason":"length","prompt_eval_count":20,"eval_count":8}`+"\n")
	return data
}

// checkNote checks that stderr says once, as a note, why the answers of ds
// cannot be matched to prompts.
func checkNote(t *testing.T, stderr string) {
	t.Helper()
	if n := strings.Count(stderr, "note: "); n != 1 {
		t.Errorf("stderr holds %d notes, want 1:\n%s", n, stderr)
	}
	for _, want := range []string{"note: 2 answers of ds have no id (raw_responses.jsonl:1, ...)", "indexed by file and line",
		"cannot be matched to prompts", "listed as missing", "--id PATH"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
}

// `missing` over answers with no id lists every prompt, and says once, on
// stderr, that those answers cannot be matched to prompts and why; the
// bare ids on stdout stay exactly the ids.
func TestQueryMissingNotesAnswersWithoutID(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "g.db")
	mustGendex(t, testEnv(nil), "--db", db, "ingest", noIDData(t))
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "missing", "ds", "--format", "tsv", "--no-header")
	if r.stdout != "p1\np2\np3\n" {
		t.Errorf("missing --no-header stdout = %q, want the bare ids\n%s", r.stdout, r)
	}
	checkNote(t, r.stderr)
	for _, f := range []string{"table", "csv", "json"} {
		r := mustGendex(t, testEnv(nil), "--db", db, "query", "missing", "ds", "--format", f)
		if strings.Contains(r.stdout, "note") {
			t.Errorf("--format %s: the note is in the data:\n%s", f, r)
		}
		checkNote(t, r.stderr)
	}
	r = mustGendex(t, testEnv(nil), "--db", db, "query", "missing", "ds", "--stage", "tokenized")
	checkNote(t, r.stderr)

	// The shell says it on its stderr too.
	env := testEnv(nil)
	env.Stdin = strings.NewReader("missing ds --no-header\n")
	r = mustGendex(t, env, "--db", db, "shell")
	if r.stdout != "p1\np2\np3\n" {
		t.Errorf("shell: missing --no-header stdout = %q\n%s", r.stdout, r)
	}
	checkNote(t, r.stderr)

	// Answers with their ids: no note.
	r = mustGendex(t, testEnv(nil), "--db", ingested(t), "query", "missing", "alpha", "--format", "tsv", "--no-header")
	if r.stderr != "" {
		t.Errorf("missing alpha, whose answers have ids: stderr %q, want nothing", r.stderr)
	}
}

// The note crosses the writer's socket: asked while ingest --follow holds
// the index, the answer and its note come from the writer.
func TestQueryMissingNoteFromWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a writer; skipped with -short")
	}
	t.Parallel()
	db := filepath.Join(t.TempDir(), "g.db")
	startWriter(t, db, nil, "ingest", "--follow", noIDData(t))
	var r result
	waitFor(t, 30*time.Second, "the writer indexed the prompts", func() bool {
		r = gendex(t, testEnv(nil), "--db", db, "query", "missing", "ds", "--format", "tsv", "--no-header")
		return r.code == 0 && r.stdout == "p1\np2\np3\n" && r.stderr != ""
	})
	checkNote(t, r.stderr)
}

func TestQueryMissingIDs(t *testing.T) {
	t.Parallel()
	db := ingested(t)
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "missing", "alpha", "--format", "tsv", "--no-header")
	var ids []string
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		f := strings.Split(l, "\t")
		ids = append(ids, f[len(f)-1])
	}
	if want := []string{"B5_text-0000001", "B6_chat-0000001", "B7_sharegpt-0000001"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("missing alpha ids %q, want %q\n%s", ids, want, r)
	}
	// show prints the stored line as it is, whatever the format.
	r = mustGendex(t, testEnv(nil), "--db", db, "query", "show", "alpha", "B5_text-0000001", "--format", "json")
	if r.stdout != `{"id":"B5_text-0000001","text":"Write a haiku about queues.","sampling_params":{"temperature":0.6,"top_p":0.95}}`+"\n" {
		t.Errorf("show = %q", r.stdout)
	}
}

// The story: 10,000 prompts, 9,998 tokenized records, and nobody could say
// which two. `gendex query missing DS --no-header` must be pipeable as ids.
func TestQueryMissingPrintsBareIDs(t *testing.T) {
	t.Parallel()
	db := ingested(t)
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "missing", "alpha", "--format", "tsv", "--no-header")
	if want := "B5_text-0000001\nB6_chat-0000001\nB7_sharegpt-0000001\n"; r.stdout != want {
		t.Errorf("missing --no-header:\n got %q\nwant %q", r.stdout, want)
	}
}
