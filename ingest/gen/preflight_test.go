package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// TestGenChatSendsTokenIDsAsCompletions: under --api chat, a token-id
// prompt goes to /v1/completions with its ids as the prompt, never to the
// chat endpoint (where only SGLang would read them); text and chat prompts
// go to the chat endpoint.
func TestGenChatSendsTokenIDsAsCompletions(t *testing.T) {
	t.Parallel()
	rc, url := recordedSim(t, sim.Config{Seed: 9})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "I", "ids", 6)
	writePrompts(t, root, "T", "text", 4)
	sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{url}, Out: out, API: client.APIChat}, root)
	if err != nil || sum.Responses != 10 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	var completions, chats int
	for _, r := range rc.all() {
		var body map[string]any
		json.Unmarshal(r.body, &body)
		switch r.path {
		case "/v1/completions":
			if _, ok := body["prompt"].([]any); !ok {
				t.Errorf("/v1/completions without a token-id prompt: %s", r.body)
			}
			completions++
		case "/v1/chat/completions":
			if _, ok := body["input_ids"]; ok {
				t.Errorf("token ids sent to the chat endpoint: %s", r.body)
			}
			chats++
		}
	}
	if completions != 6 || chats != 4 {
		t.Errorf("%d completions and %d chat requests; want 6 and 4", completions, chats)
	}
}

// TestGenStopsWhenThePromptWasNotRead: a server whose prompt_tokens show it
// did not read the prompt (a chat endpoint that dropped SGLang's
// input_ids, or a proxy that lost the text) stops the run: the answer is
// not kept and no prompt is marked failed. Both halves of the check: token
// ids (under half of them read) and a text of 500+ bytes (under one token
// per 50 bytes read).
func TestGenStopsWhenThePromptWasNotRead(t *testing.T) {
	t.Parallel()
	h := sim.New(sim.Config{Seed: 11}).Handler()
	emptied := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req map[string]any
		json.Unmarshal(body, &req)
		if _, ok := req["prompt"]; ok { // answer an empty prompt, as if it were not read
			req["prompt"] = "."
			body, _ = json.Marshal(req)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		h.ServeHTTP(w, r)
	}
	url := wrap(t, h, map[string]http.HandlerFunc{"/v1/completions": emptied})
	for _, tc := range []struct {
		name string
		api  client.API
		line map[string]any
	}{
		{"token ids", client.APIChat, map[string]any{"id": "long", "input_ids": sim.Encode(strings.Repeat("many words here ", 20), true)}},
		{"text", client.APICompletions, map[string]any{"id": "long", "text": strings.Repeat("many words here ", 40)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, out := t.TempDir(), t.TempDir()
			dir := filepath.Join(root, "L")
			os.MkdirAll(dir, 0o755)
			line, _ := json.Marshal(tc.line)
			os.WriteFile(filepath.Join(dir, "prompts.jsonl"), append(line, '\n'), 0o644)
			sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{url}, Out: out, API: tc.api}, root)
			var se *stopError
			if !errors.As(err, &se) || !strings.Contains(err.Error(), "did not read the prompt gen sent") || !strings.Contains(err.Error(), "prompt long") {
				t.Fatalf("%v; want the run stopped, naming the prompt\n%s", err, log)
			}
			if sum == nil || sum.Responses != 0 || sum.Errors != 0 {
				t.Errorf("%+v: an answer kept or a prompt marked failed", sum)
			}
			for _, f := range []string{"raw_responses.jsonl", "errors.jsonl"} {
				if b, _ := os.ReadFile(filepath.Join(out, "L", f)); len(b) > 0 {
					t.Errorf("%s: %s", f, b)
				}
			}
		})
	}
}

// TestGenChecksRoutesBeforeAnything: against a server without /generate
// (llama.cpp, vLLM), --api generate stops before its first request, with
// nothing written: chat prompts are not answered through the chat
// endpoint first (a fallback that answered 45 before the stop).
func TestGenChecksRoutesBeforeAnything(t *testing.T) {
	t.Parallel()
	h := sim.New(sim.Config{Seed: 12}).Handler()
	notFound := answer(404, `{"error":{"message":"File Not Found","type":"not_found_error","code":404}}`)
	var generations atomic.Int64
	url := wrap(t, h, map[string]http.HandlerFunc{"/generate": notFound, "/v1/tokenize": notFound,
		"/v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > 3 {
				generations.Add(1)
			}
			h.ServeHTTP(w, r)
		}})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "C", "messages", 30)
	writePrompts(t, root, "I", "ids", 5)
	sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{url}, Out: out, Concurrency: 8}, root)
	var se *stopError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "POST /generate") || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("%v; want the run stopped on the missing /generate\n%s", err, log)
	}
	if generations.Load() != 0 || sum.Responses != 0 {
		t.Errorf("%d chat requests, %d answers before the stop; want none", generations.Load(), sum.Responses)
	}
}

// TestGenReadsLlamaCppContext: llama.cpp's /v1/models gives the context
// per slot as meta.n_ctx (no max_model_len): it is read, and
// max_new_tokens clipped to it.
func TestGenReadsLlamaCppContext(t *testing.T) {
	t.Parallel()
	h := sim.New(sim.Config{Seed: 13, ContextLength: 4096}).Handler()
	var mu sync.Mutex
	var maxTokens []float64
	url := wrap(t, h, map[string]http.HandlerFunc{
		"/v1/models": answer(200, `{"object":"list","data":[{"id":"tiny.gguf","object":"model","owned_by":"llamacpp","meta":{"n_ctx":128,"n_ctx_train":4096}}]}`),
		"/v1/completions": func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var req map[string]any
			json.Unmarshal(body, &req)
			if v, ok := req["max_tokens"].(float64); ok {
				mu.Lock()
				maxTokens = append(maxTokens, v)
				mu.Unlock()
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.ServeHTTP(w, r)
		}})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "I", "ids", 3)
	maxNew := 1000
	sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"),
		Config{Servers: []string{url}, Out: out, API: client.APICompletions, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}}, root)
	if err != nil || sum.Responses != 3 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	if !strings.Contains(log, "is ready: llama.cpp, model tiny.gguf, context length 128") {
		t.Errorf("the log does not say the flavor and context:\n%s", log)
	}
	for _, v := range maxTokens {
		if v > 128-clipMargin {
			t.Errorf("max_tokens %v for a 128-token context", v)
		}
	}
	if len(maxTokens) != 3 {
		t.Errorf("%d requests with max_tokens, want 3", len(maxTokens))
	}
}
