package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIngestIDFlag: `ingest --id PATH` indexes FastChat-style answers
// under their integer question_id, matched to the prompts of the same
// dataset; a later ingest without --id reads the appended lines with the
// remembered path; a malformed path is a usage error.
func TestIngestIDFlag(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "mt")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(`{"question_id":81,"category":"writing","turns":["q1"]}`+"\n"+
		`{"question_id":82,"category":"writing","turns":["q2"]}`+"\n"), 0o644)
	raw := filepath.Join(dir, "raw_responses.jsonl")
	os.WriteFile(raw, []byte(`{"question_id":81,"answer_id":"a1","model_id":"m","choices":[{"index":0,"turns":["t"]}],"tstamp":1.7e9}`+"\n"), 0o644)
	db := filepath.Join(t.TempDir(), "g.db")
	env := testEnv(nil)

	mustGendex(t, env, "--db", db, "ingest", "--id", "question_id", dir)
	out := mustGendex(t, env, "--db", db, "query", "missing", "mt", "--format", "tsv", "--no-header").stdout
	if out != "82\n" {
		t.Errorf("missing = %q; want 82 (81 is answered under its question_id)", out)
	}
	f, _ := os.OpenFile(raw, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"question_id":82,"answer_id":"a2","model_id":"m","choices":[{"index":0,"turns":["t"]}],"tstamp":1.7e9}` + "\n")
	f.Close()
	mustGendex(t, env, "--db", db, "ingest", dir)
	if out := mustGendex(t, env, "--db", db, "query", "missing", "mt", "--format", "tsv", "--no-header").stdout; out != "" {
		t.Errorf("missing after the appended answer = %q; want none", out)
	}

	r := gendex(t, env, "--db", db, "ingest", "--id", "meta..uid", dir)
	if r.code != 2 || !strings.Contains(r.stderr, "--id") {
		t.Errorf("a bad --id: %s; want a usage error naming --id", r)
	}
}
