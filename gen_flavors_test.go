package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The whole binary against the simulator speaking vLLM and llama.cpp
// (gendex sim --flavor, --unmarked so that gen takes it for the real
// server): each run gets the right answers or a clear stop.

// answerLines reads dir/<ds>/raw_responses.jsonl.
func answerLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// promptIDs maps the ids prompts of demo/B1_ids to their length.
func promptIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
	lens := map[string]int{}
	for _, m := range answerLines(t, filepath.Join(dir, "B1_ids", "prompts.jsonl")) {
		lens[m["id"].(string)] = len(m["input_ids"].([]any))
	}
	return lens
}

// checkTokenIDPrompts: every answer to a token-id prompt read the ids
// (prompt_tokens equals their count), none was an empty chat.
func checkTokenIDPrompts(t *testing.T, p *placeRun, out string) {
	t.Helper()
	want := promptIDs(t, filepath.Join(p.dir, "demo"))
	got := answerLines(t, filepath.Join(p.dir, out, "B1_ids", "raw_responses.jsonl"))
	if len(got) != len(want) {
		t.Fatalf("%d answers to %d token-id prompts", len(got), len(want))
	}
	for _, m := range got {
		if pt, _ := m["prompt_tokens"].(float64); int(pt) != want[m["id"].(string)] {
			t.Errorf("%s: prompt_tokens %v for %d token ids: the prompt was not read", m["id"], m["prompt_tokens"], want[m["id"].(string)])
		}
	}
}

// noAnswers: the run wrote nothing under out.
func noAnswers(t *testing.T, p *placeRun, out string) {
	t.Helper()
	if n, _ := p.answers(out); n != 0 {
		t.Errorf("%d answers written under %s before the stop", n, out)
	}
}

func TestFlavorVLLM(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	url := startSimProcess(t, p.bin, "--flavor", "vllm", "--unmarked", "--context", "8192")

	// No --api: gen picks vLLM's routes itself, and says so.
	errOut := p.mustRun("--db", "chat.db", "gen", "--server", url, "--out", "chat", "demo")
	if !strings.Contains(errOut, url+" is ready: vLLM, model sim-model, context length 8192") {
		t.Errorf("the flavor and context length are not read:\n%s", errOut)
	}
	for _, want := range []string{"token-id prompts to /v1/completions", "chat prompts to /v1/chat/completions", "text prompts to /v1/chat/completions", "chosen for vLLM"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the ready line does not say %q:\n%s", want, errOut)
		}
	}
	checkTokenIDPrompts(t, p, "chat")
	for _, m := range answerLines(t, filepath.Join(p.dir, "chat", "B3_chat", "raw_responses.jsonl")) {
		if _, ok := m["output_ids"].([]any); !ok {
			t.Fatalf("a vLLM chat answer without its output ids (return_token_ids): %v", m)
		}
	}

	code, errOut := p.run("--db", "gen.db", "gen", "--server", url, "--api", "generate", "--out", "gen", "demo")
	if code != 5 || !strings.Contains(errOut, "POST /generate") || !strings.Contains(errOut, "leave it out and gen uses the route the server offers") {
		t.Errorf("--api generate on vLLM: exit %d; want 5 (refused), naming /generate and the way out\n%s", code, errOut)
	}
	noAnswers(t, p, "gen")

	code, errOut = p.run("--db", "model.db", "gen", "--server", url, "--api", "chat", "--model", "nope", "--out", "model", "demo")
	if code != 5 || !strings.Contains(errOut, "not --model nope") {
		t.Errorf("--model nope: exit %d; want 5 (refused)\n%s", code, errOut)
	}
	noAnswers(t, p, "model")

	// Exact ids on vLLM: --export ids makes records from its token ids.
	p.mustRun("--db", "ids.db", "gen", "--server", url, "--api", "completions", "--export", "ids", "--out", "ids", filepath.Join("demo", "B1_ids"))
	serverViewKnown(t, p, "chat.db", url)
	recs := answerLines(t, filepath.Join(p.dir, "ids", "B1_ids", "tokenized.jsonl"))
	if len(recs) == 0 {
		t.Fatal("no ids records from vLLM")
	}
	for _, r := range recs {
		if ids, _ := r["input_ids"].([]any); len(ids) <= promptIDs(t, filepath.Join(p.dir, "demo"))[r["id"].(string)] {
			t.Errorf("record %s: %d input_ids, no more than its prompt", r["id"], len(ids))
		}
	}
}

func TestFlavorLlamaCpp(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	url := startSimProcess(t, p.bin, "--flavor", "llamacpp", "--unmarked", "--context", "2048")

	errOut := p.mustRun("--db", "chat.db", "gen", "--server", url, "--out", "chat", "--repetition-penalty", "1.1", "--min-new-tokens", "2", "demo")
	if !strings.Contains(errOut, "is ready: llama.cpp, model sim-model.gguf, context length 2048") {
		t.Errorf("the flavor and n_ctx are not read:\n%s", errOut)
	}
	if !strings.Contains(errOut, "does not read min_tokens") {
		t.Errorf("the flags llama.cpp ignores are not said:\n%s", errOut)
	}
	checkTokenIDPrompts(t, p, "chat")

	if !strings.Contains(errOut, "token-id prompts to /v1/completions") || !strings.Contains(errOut, "chosen for llama.cpp") {
		t.Errorf("the ready line does not say llama.cpp's routes:\n%s", errOut)
	}

	code, errOut := p.run("--db", "gen.db", "gen", "--server", url, "--api", "generate", "--out", "gen", "demo")
	if code != 5 || !strings.Contains(errOut, "POST /generate") {
		t.Errorf("--api generate on llama.cpp: exit %d; want 5 (refused)\n%s", code, errOut)
	}

	// A prompt's own sampling keys it does not read are said too, once
	// per key and server, the flags' (min_tokens above) not again.
	own := filepath.Join(p.dir, "own", "S")
	os.MkdirAll(own, 0o755)
	var lines strings.Builder
	for i := range 3 {
		fmt.Fprintf(&lines, `{"id": "s%d", "text": "hello", "sampling_params": {"min_new_tokens": 2, "stop_token_ids": [7], "skip_special_tokens": false}}`+"\n", i)
	}
	writePrompts(t, own, lines.String())
	errOut = p.mustRun("--db", "own.db", "gen", "--server", url, "--min-new-tokens", "1", filepath.Join("own", "S"))
	for _, key := range []string{"stop_token_ids", "skip_special_tokens"} {
		if n := strings.Count(errOut, "does not read "+key+", set by prompt"); n != 1 {
			t.Errorf("a prompt's %s llama.cpp does not read: said %d times, want once:\n%s", key, n, errOut)
		}
	}
	if strings.Contains(errOut, "min_new_tokens), set by prompt") {
		t.Errorf("min_tokens said again for a prompt, after the flag's line:\n%s", errOut)
	}

	// Its HTTP 500s are retried and counted, and its /metrics (with
	// --metrics) gives the server view.
	flaky := startSimProcess(t, p.bin, "--flavor", "llamacpp", "--unmarked", "--metrics", "--parse-error-rate", "0.2", "--seed", "3")
	errOut = p.mustRun("--db", "flaky.db", "gen", "--server", flaky, "--api", "chat", "--out", "flaky", "--scrape-every", "200ms", filepath.Join("demo", "B2_text"))
	if !strings.Contains(errOut, "attempts retried: ") || !strings.Contains(errOut, "HTTP 500 'Failed to parse input") {
		t.Errorf("llama.cpp's 500s are not counted as retries:\n%s", errOut)
	}
	serverViewKnown(t, p, "flaky.db", flaky)
	noAnswers(t, p, "gen")

	code, errOut = p.run("--db", "ids.db", "gen", "--server", url, "--api", "completions", "--export", "ids", "--out", "ids", "demo")
	if code != 5 || !strings.Contains(errOut, "without the output token ids") {
		t.Errorf("--export ids on llama.cpp: exit %d; want 5 (refused) before any request\n%s", code, errOut)
	}
	noAnswers(t, p, "ids")
}

// serverViewKnown: query server has a row for url with the columns every
// flavor exposes (up, running, queued) known, from its own metric names.
func serverViewKnown(t *testing.T, p *placeRun, db, url string) {
	t.Helper()
	code, out, stderr := runGendex(t, p.bin, p.dir, "--db", db, "query", "server", "--window", "1h", "--format", "json")
	if code != 0 {
		t.Fatalf("query server: exit %d\n%s", code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 || rows[0]["server"] != url {
		t.Fatalf("query server: %v\n%s", err, out)
	}
	for _, k := range []string{"up", "running", "queued"} {
		if rows[0][k] == nil {
			t.Errorf("query server: %s unknown for %s: %v", k, url, rows[0])
		}
	}
}
