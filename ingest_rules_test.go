package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIngestReadsAnswersByRule: gendex ingest of answers of shapes it has
// no row for (issue 41 item 7): an answer with no id at any known place
// is indexed under its file:line, not skipped; an HTTP-200 body whose own
// status fields report a failure (choices null) is an error with its
// message, not an answer of unknown tokens; a stream whose last chunk
// carries its usage inside its choice is counted. Before: 1 line skipped,
// the failure an answer, the stream's tokens unknown.
func TestIngestReadsAnswersByRule(t *testing.T) {
	t.Parallel()
	d := filepath.Join(t.TempDir(), "D")
	os.MkdirAll(d, 0o755)
	lines := []string{
		`{"object":"chat.completion","created":1764201832,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Yes."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`,
		`{"id":"e1","choices":null,"created":1733295187,"model":"m","object":"chat.completion","usage":{"total_tokens":0},"base_resp":{"status_code":1008,"status_msg":"insufficient balance"}}`,
		`{"id":"s1","object":"chat.completion.chunk","created":1733300000,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`,
		`{"id":"s1","object":"chat.completion.chunk","created":1733300000,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":19,"completion_tokens":3,"total_tokens":22}}]}`,
	}
	os.WriteFile(filepath.Join(d, "raw_responses.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	db := filepath.Join(t.TempDir(), "g.db")
	env := testEnv(nil)
	r := mustGendex(t, env, "--db", db, "ingest", filepath.Dir(d))
	if strings.Contains(r.stderr, "no id (want") || strings.Contains(r.stderr, "skipped") && !strings.Contains(r.stderr, "0 skipped") {
		t.Errorf("ingest skipped a line:\n%s", r)
	}
	var tok []map[string]any
	decodeJSON(t, mustGendex(t, env, "--db", db, "query", "tokens", "--format", "json").stdout, &tok)
	if len(tok) != 1 || tok[0]["records"] != 2.0 || tok[0]["completion_tokens"] != 5.0 || tok[0]["prompt_tokens"] != 28.0 || tok[0]["unknown_tokens"] != 0.0 {
		t.Errorf("tokens %v; want 2 answers of 2+3 tokens (9+19 prompt), none unknown", tok)
	}
	show := mustGendex(t, env, "--db", db, "query", "show", "D", "raw_responses.jsonl:1")
	if !strings.Contains(show.stdout, `"Yes."`) {
		t.Errorf("the id-less answer is not raw_responses.jsonl:1: %s", show)
	}
	var prog []map[string]any
	decodeJSON(t, mustGendex(t, env, "--db", db, "query", "progress", "--format", "json").stdout, &prog)
	if len(prog) != 1 || prog[0]["errors"] != 1.0 || prog[0]["raw"] != 2.0 {
		t.Errorf("progress %v; want 2 answers and 1 error", prog)
	}
}
