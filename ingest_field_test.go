package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A shape no rule knows: the id at uid, the answer at answer.body, the
// counts at meta.usage.in and .out, the finish reason at end.
func unknownShapeLine(id, text string, in, out int, end string) string {
	return fmt.Sprintf(`{"uid":%q,"answer":{"body":%q},"meta":{"usage":{"in":%d,"out":%d}},"end":%q}`+"\n", id, text, in, out, end)
}

// appendLine appends s to the file at path.
func appendLine(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// tokenSums is query tokens' row of dataset: its records, known prompt
// and completion tokens (-1: none known), and records with the
// completion count unknown.
func tokenSums(t *testing.T, env *Env, db, dataset string) [4]float64 {
	t.Helper()
	var rows []map[string]any
	decodeJSON(t, mustGendex(t, env, "--db", db, "query", "tokens", dataset, "--format", "json").stdout, &rows)
	if len(rows) != 1 {
		t.Fatalf("query tokens %s: %v", dataset, rows)
	}
	var out [4]float64
	for i, c := range []string{"records", "prompt_tokens", "completion_tokens", "unknown_tokens"} {
		n, ok := rows[0][c].(float64)
		if !ok {
			n = -1 // null: none known
		}
		out[i] = n
	}
	return out
}

// TestIngestFieldReadsAShapeNoRuleKnows: `ingest --field KEY=PATH`
// (repeated, and joined with --map) reads a shape no rule knows: its
// counts known, its text exported (the map given for the answers' file,
// whose prompts keep their ids where the rules look). The map is kept with the file: a later
// plain ingest, a follow and a re-read read the new lines with it; a
// different map for the file says what changed and reads it again.
func TestIngestFieldReadsAShapeNoRuleKnows(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "mine")
	writeTestFile(t, filepath.Join(dir, "prompts.jsonl"), `{"id":"u1","messages":[{"role":"user","content":"Is it?"}]}`+"\n"+
		`{"id":"u2","messages":[{"role":"user","content":"Or not?"}]}`+"\n")
	raw := filepath.Join(dir, "raw_responses.jsonl")
	writeTestFile(t, raw, unknownShapeLine("u1", "It is.", 4, 3, "stop")+unknownShapeLine("u2", "Not.", 5, 2, "stop"))
	db := filepath.Join(t.TempDir(), "g.db")
	env := testEnv(nil)

	// The map is the answers' (the prompts keep their ids at "id"): given
	// for their file, then the folder is read with the built-in rules.
	mustGendex(t, env, "--db", db, "ingest", "--field", "id=uid", "--field", "prompt_tokens=meta.usage.in",
		"--map", "completion_tokens=meta.usage.out,text=answer.body", "--field", "finish_reason=end", raw)
	mustGendex(t, env, "--db", db, "ingest", dir)
	if got := tokenSums(t, env, db, "mine"); got != [4]float64{2, 9, 5, 0} {
		t.Errorf("records, prompt, completion tokens, unknown = %v; want [2 9 5 0]", got)
	}
	mustGendex(t, env, "--db", db, "export", "--format", "conversations", dir)
	if b, _ := os.ReadFile(filepath.Join(dir, "tokenized.jsonl")); !strings.Contains(string(b), "It is.") || !strings.Contains(string(b), "Not.") {
		t.Errorf("export wrote no record with the answers' text:\n%s", b)
	}

	appendLine(t, raw, unknownShapeLine("u3", "Three.", 1, 10, "stop"))
	mustGendex(t, env, "--db", db, "ingest", dir)
	if got := tokenSums(t, env, db, "mine"); got != [4]float64{3, 10, 15, 0} {
		t.Errorf("after a plain ingest: %v; want [3 10 15 0] (the file's map kept)", got)
	}

	w := startWriter(t, db, nil, "ingest", "--follow", dir)
	appendLine(t, raw, unknownShapeLine("u4", "Four.", 2, 20, "stop"))
	waitFor(t, 30*time.Second, "the follow to index the appended line", func() bool {
		return tokenSums(t, env, db, "mine")[0] == 4
	})
	if got := tokenSums(t, env, db, "mine"); got != [4]float64{4, 12, 35, 0} {
		t.Errorf("after a follow: %v; want [4 12 35 0] (the file's map kept)", got)
	}
	w.Interrupt()
	if code := w.WaitWithin(t, 20*time.Second); code != 0 {
		t.Fatalf("the follow: exit %d\n%s", code, w.Stderr())
	}

	r := mustGendex(t, env, "--db", db, "ingest", "--reread", raw)
	if !strings.Contains(r.stderr, "records: 4\n") {
		t.Errorf("ingest --reread: want the 4 lines read again\n%s", r)
	}
	if got := tokenSums(t, env, db, "mine"); got != [4]float64{4, 12, 35, 0} {
		t.Errorf("after a re-read: %v; want [4 12 35 0] (the file's map kept)", got)
	}

	r = mustGendex(t, env, "--db", db, "ingest", "--field", "id=uid", "--field", "completion_tokens=meta.usage.in",
		"--field", "text=answer.body", "--field", "finish_reason=end", raw)
	want := "its map changed: prompt_tokens now by the built-in rules (was meta.usage.in); completion_tokens now at meta.usage.in (was meta.usage.out)"
	if !strings.Contains(strings.Join(strings.Fields(r.stderr), " "), want) {
		t.Errorf("a different map: want it said (%q)\n%s", want, r)
	}
	if got := tokenSums(t, env, db, "mine"); got != [4]float64{4, -1, 12, 0} {
		t.Errorf("after the new map: %v; want [4 -1 12 0] (read again with it)", got)
	}
}

// TestIngestFieldBadPathSaidAtOnce: a --field PATH that matches nothing
// in the file's first lines is a usage error before anything is indexed
// (no index is made), naming the file, the field, where the path stops
// and the keys there; so are a key gendex does not map and a field given
// twice. A field a line may well lack (an error) passes.
func TestIngestFieldBadPathSaidAtOnce(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "mine")
	raw := filepath.Join(dir, "raw_responses.jsonl")
	writeTestFile(t, raw, strings.Repeat(`{"uid":"u","answer":{"body":"b"},"meta":{"usage":{"in":1,"total":3}}}`+"\n", 3))
	db := filepath.Join(t.TempDir(), "g.db")
	env := testEnv(nil)

	r := gendex(t, env, "--db", db, "ingest", "--field", "id=uid", "--field", "completion_tokens=meta.usage.out",
		"--field", "text=answer.body", "--field", "error=failure.why", dir)
	if r.code != 2 {
		t.Fatalf("a path that matches nothing: %s; want exit 2", r)
	}
	said := strings.Join(strings.Fields(r.stderr), " ")
	for _, want := range []string{raw + ":", "1 of the map's paths match nothing in the file's first 3 lines",
		"completion_tokens (line 1): meta.usage.out: no such key; meta.usage has in, total",
		"the lines' top-level keys: uid, answer, meta", "nothing was indexed"} {
		if !strings.Contains(said, want) {
			t.Errorf("the usage error does not say %q\n%s", want, r.stderr)
		}
	}
	for _, l := range strings.Split(r.stderr, "\n") {
		if len(l) > 80 && !strings.Contains(l, raw) {
			t.Errorf("a line over 80 columns: %q", l)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the index was made (%v); want nothing written", err)
	}

	for _, args := range [][]string{
		{"--field", "tokens=meta.usage.in"},
		{"--field", "text=answer.body", "--map", "id=uid,text=answer.other"},
		{"--field", "text"},
	} {
		if r := gendex(t, env, append([]string{"--db", db, "ingest"}, append(args, dir)...)...); r.code != 2 {
			t.Errorf("ingest %q: %s; want exit 2", args, r)
		}
	}
	r = gendex(t, env, "--db", db, "ingest", "--field", "text=answer.body", "--field", "text=answer.other", dir)
	if !strings.Contains(r.stderr, "text is given twice (answer.body and answer.other)") {
		t.Errorf("a field given twice: %s", r)
	}

	mustGendex(t, env, "--db", db, "ingest", "--field", "id=uid", "--field", "completion_tokens=meta.usage.total",
		"--field", "text=answer.body", "--field", "error=failure.why", dir)
}
