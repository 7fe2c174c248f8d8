package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// explainLines are answer lines of several shapes, written from each
// tool's documented output: gen's conversation (--turns all), an OpenAI
// chat answer that calls a tool, SGLang /generate with token ids and only
// the server's id, an Ollama answer (no id), a line cut short, a shape no
// rule knows (no id), and an OpenAI Batch line whose request failed.
var explainLines = []string{
	`{"id":"conv-7","turns":[{"text":"Paris.","prompt_tokens":9,"completion_tokens":3,"finish_reason":"stop"},` +
		`{"text":"About 2 million.","prompt_tokens":20,"completion_tokens":5,"finish_reason":"stop"}],` +
		`"prompt_tokens":29,"completion_tokens":8,"finish_reason":"stop"}`,
	`{"id":"chatcmpl-9","object":"chat.completion","created":1765000000,"model":"qwen","choices":[{"index":0,` +
		`"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",` +
		`"function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},"finish_reason":"tool_calls"}],` +
		`"usage":{"prompt_tokens":120,"completion_tokens":18,"total_tokens":138}}`,
	`{"text":" The answer is 4.","output_ids":[578,4320,374,220,19,13],"meta_info":{"id":"5f2e","prompt_tokens":11,` +
		`"completion_tokens":6,"cached_tokens":0,"finish_reason":{"type":"length","length":6}}}`,
	`{"model":"llama3.2","created_at":"2026-12-01T10:00:00Z","response":"Hello!","done":true,"done_reason":"stop",` +
		`"prompt_eval_count":26,"eval_count":4}`,
	`{"id":"cut-1","text":"half a li`,
	`{"uid":"u1","answer":{"body":"yes"},"stats":{"in":4,"out":1}}`,
	`{"id":"batch_req_3","custom_id":"req-3","response":{"status_code":500,"request_id":"r3",` +
		`"body":{"error":{"message":"The server is overloaded","type":"server_error"}}},"error":null}`,
}

// TestIngestExplain: `ingest --explain FILE` says of each of the file's
// first lines the shape and rule that read it, each field's value and
// where in the line it is from (or why unknown), or why the line is
// skipped, within 80 columns; --format json says the same for a program.
// It writes nothing: no index is made.
func TestIngestExplain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	raw := filepath.Join(dir, "d", "raw_responses.jsonl")
	writeTestFile(t, raw, strings.Join(explainLines, "\n")+"\n")
	db := filepath.Join(dir, "g.db")
	env := testEnv(nil)

	r := mustGendex(t, env, "--db", db, "ingest", "--explain", "--lines", "7", raw)
	out := strings.ReplaceAll(r.stdout, dir, "DIR")
	golden(t, "ingest_explain.txt", out)
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 80 {
			t.Errorf("a line over 80 columns: %q", l)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("--explain made the index (%v); want nothing written", err)
	}

	r = mustGendex(t, env, "--db", db, "ingest", "--explain", "--lines", "3", "--format", "json", raw)
	var reps []map[string]any
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("--format json: %v\n%s", err, r.stdout)
		}
		reps = append(reps, m)
	}
	if len(reps) != 3 {
		t.Fatalf("--format json --lines 3: %d objects\n%s", len(reps), r.stdout)
	}
	sg := reps[2]
	if sg["line"] != 3.0 || sg["shape"] != "SGLang `/generate`" {
		t.Errorf("line 3: %v; want SGLang's", sg)
	}
	fields := map[string]map[string]any{}
	for _, f := range sg["fields"].([]any) {
		fields[f.(map[string]any)["field"].(string)] = f.(map[string]any)
	}
	for name, from := range map[string]string{"id": "meta_info.id", "completion_tokens": "meta_info.completion_tokens",
		"finish_reason": "meta_info.finish_reason.type", "text": "text"} {
		f := fields[name]
		if f["known"] != true || len(f["from"].([]any)) != 1 || f["from"].([]any)[0] != from {
			t.Errorf("line 3's %s: %v; want it from %s", name, f, from)
		}
	}
}

// TestIngestExplainKeptMap: --explain of a file the index holds reads it
// with the map the index keeps for it (its fields from the map's paths),
// and leaves the index as it was, byte for byte.
func TestIngestExplainKeptMap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	raw := filepath.Join(dir, "d", "raw_responses.jsonl")
	writeTestFile(t, raw, unknownShapeLine("u1", "It is.", 4, 3, "stop")+"{not json\n")
	db := filepath.Join(dir, "g.db")
	env := testEnv(nil)
	gendex(t, env, "--db", db, "ingest", "--field", "id=uid", "--field", "completion_tokens=meta.usage.out",
		"--field", "text=answer.body", raw) // exit 1: the second line is skipped
	before, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}

	out := strings.ReplaceAll(mustGendex(t, env, "--db", db, "ingest", "--explain", raw).stdout, dir, "DIR")
	for _, want := range []string{
		"DIR/d/raw_responses.jsonl\n  its first 2 lines, read as stage raw, with the map --field id=uid --field\n" +
			"    completion_tokens=meta.usage.out --field text=answer.body\n",
		"\n  id                 \"u1\"                     from uid\n",
		"\n  completion_tokens  3                        from meta.usage.out\n",
		"\n  prompt_tokens      unknown: not in the line where the built-in rules look\n" +
			"                     (give --field prompt_tokens=PATH)\n",
		"DIR/d/raw_responses.jsonl:2:\n  skipped: invalid JSON at byte 2: unexpected 'n'",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--explain of a mapped file does not say\n%s\n--- it said\n%s", want, out)
		}
	}
	if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
		t.Error("--explain changed the index")
	}
}

// TestIngestExplainEmptyFile: a file with no lines has nothing to explain,
// which is said and is no success (exit 1), never a header over nothing.
func TestIngestExplainEmptyFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	raw := filepath.Join(dir, "d", "raw_responses.jsonl")
	writeTestFile(t, raw, "")
	r := gendex(t, testEnv(nil), "--db", filepath.Join(dir, "g.db"), "ingest", "--explain", raw)
	if r.code != 1 || !strings.Contains(r.stderr, "has no lines: nothing to explain") || r.stdout != "" {
		t.Errorf("an empty file explained: %s", r)
	}
}
