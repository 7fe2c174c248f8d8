package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"gendex/ingest/gen/sim"
)

// askCounter serves the simulator (cfg) and counts the requests that ask
// its model (generation routes; tokenizing is not asking). noTokenizer:
// it has no tokenize route (404), as SGLang before v0.5.3.
func askCounter(t *testing.T, cfg sim.Config, noTokenizer bool) (url string, asked *atomic.Int64) {
	h := sim.New(cfg).Handler()
	asked = new(atomic.Int64)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/generate", "/v1/chat/completions", "/v1/completions", "/completion", "/completions":
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if len(bytes.TrimSpace(body)) > 2 { // not gen's probe of the route ({})
				asked.Add(1)
			}
		case "/v1/tokenize", "/tokenize":
			if noTokenizer {
				http.NotFound(w, r)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, asked
}

// TestGenRefusesUnsendablePrompts: prompts no server takes are refused
// before they are sent, each with its file:line and what is wrong, as
// ShareGPT's unknown speaker is, and counted as it is (a failed prompt,
// its line in errors.jsonl): an unknown role in messages; a prompt longer
// than the server's context, counted by the server's tokenizer (SGLang,
// vLLM; llama.cpp's counts its messages' text), or bounded from its bytes
// where it has none. The server is asked for the sendable prompts only.
// (Before, both were sent and came back as the server's 400, without
// file:line.)
func TestGenRefusesUnsendablePrompts(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 10000) // 50000 bytes: over 4096 tokens by any tokenizer
	lines := []string{
		`{"id":"ok","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}]}`,
		`{"id":"role","messages":[{"role":"system","content":"s"},{"role":"bot","content":"hi"}]}`,
		`{"id":"long","messages":[{"role":"user","content":"` + long + `"}]}`,
		`{"id":"text","text":"` + long + `"}`,
		`{"id":"two","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"` + long + `"},{"role":"user","content":"more"}]}`,
		`{"id":"speaker","conversations":[{"from":"robot","value":"hi"},{"from":"human","value":"x"}]}`,
	}
	want := map[string]string{
		"role":    `prompts.jsonl:2: messages: turn 2: unknown role "bot"`,
		"long":    "prompts.jsonl:3: the prompt is ",
		"text":    "prompts.jsonl:4: the prompt is ",
		"two":     "prompts.jsonl:5: the prompt is ",
		"speaker": `prompts.jsonl:6: conversations: turn 1: unknown speaker "robot"`,
	}
	for _, flavor := range []string{sim.FlavorSGLang, sim.FlavorVLLM, sim.FlavorLlamaCpp} {
		url, asked := askCounter(t, sim.Config{ContextLength: 4096, Flavor: flavor}, false)
		dir := filepath.Join(t.TempDir(), "d")
		writeTestFile(t, filepath.Join(dir, "prompts.jsonl"), strings.Join(lines, "\n")+"\n")
		db := filepath.Join(t.TempDir(), "g.db")
		r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--turns", "last", dir)
		if r.code != 0 || !strings.Contains(r.stderr, "1 answer") || !strings.Contains(r.stderr, "5 errors") {
			t.Errorf("%s: %s", flavor, r)
		}
		if n := asked.Load(); n != 1 {
			t.Errorf("%s: the model was asked %d times; want once (the one sendable prompt)", flavor, n)
		}
		errs := readRecords(t, filepath.Join(dir, "errors.jsonl"))
		got := map[string]string{}
		for _, e := range errs {
			id, _ := strconv.Unquote(string(e["id"]))
			msg, _ := strconv.Unquote(string(e["error"]))
			got[id] = msg
			if e["status"] != nil || e["attempts"] != nil {
				t.Errorf("%s %s: refused, yet a status or attempts: %s %s", flavor, id, e["status"], e["attempts"])
			}
		}
		for id, w := range want {
			if !strings.Contains(got[id], w) {
				t.Errorf("%s %s: error %q; want it to say %q", flavor, id, got[id], w)
			}
		}
		for _, id := range []string{"long", "text", "two"} {
			if !strings.Contains(got[id], "tokens") || !strings.Contains(got[id], "the server's context is 4096 tokens, so a prompt of at most 4080 fits") {
				t.Errorf("%s %s: %q does not say what it has and what fits", flavor, id, got[id])
			}
		}
		if raw, _ := os.ReadFile(filepath.Join(dir, "raw_responses.jsonl")); strings.Count(string(raw), "\n") != 1 {
			t.Errorf("%s: answers:\n%s", flavor, raw)
		}
	}
	// Without a tokenizer to ask, a prompt is bounded from its bytes: at
	// least one token per 32.
	url, asked := askCounter(t, sim.Config{ContextLength: 4096}, true)
	dir := filepath.Join(t.TempDir(), "d")
	huge := strings.Repeat("w", 4081*32)
	writeTestFile(t, filepath.Join(dir, "prompts.jsonl"), strings.Join([]string{`{"id":"ok","text":"hi"}`,
		`{"id":"text","text":"` + huge + `"}`, `{"id":"chat","messages":[{"role":"user","content":"` + huge + `"}]}`}, "\n")+"\n")
	r := gendex(t, testEnv(nil), "--db", filepath.Join(t.TempDir(), "g.db"), "gen", "--server", url, dir)
	if r.code != 0 || !strings.Contains(r.stderr, "1 answer") || !strings.Contains(r.stderr, "2 errors") || asked.Load() != 1 {
		t.Errorf("no tokenizer: asked %d times: %s", asked.Load(), r)
	}
	errs, _ := os.ReadFile(filepath.Join(dir, "errors.jsonl"))
	for _, w := range []string{"prompts.jsonl:2: the prompt is at least 4081 tokens (its 130592 bytes", "prompts.jsonl:3: the prompt is at least 4081 tokens (its 130592 bytes"} {
		if !strings.Contains(string(errs), w) {
			t.Errorf("no tokenizer: errors lack %q:\n%s", w, errs)
		}
	}
}
