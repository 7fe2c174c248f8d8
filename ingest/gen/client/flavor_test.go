package client

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// serve answers each path with its handler; others get 404 as llama.cpp
// words it.
func serve(t *testing.T, routes map[string]http.HandlerFunc) *Client {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h, ok := routes[r.URL.Path]; ok {
			h(w, r)
			return
		}
		w.WriteHeader(404)
		io.WriteString(w, `{"error":{"message":"File Not Found","type":"not_found_error","code":404}}`)
	}))
	t.Cleanup(hs.Close)
	return New(hs.URL, Options{})
}

func answerWith(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// TestServedModelFlavors: each server's /v1/models gives the flavor, the
// model ids and the context length of the served model: SGLang's LoRA
// cards (max_model_len null) before the base, vLLM's max_model_len,
// llama.cpp's meta.n_ctx.
func TestServedModelFlavors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		model      string // Client.Model
		want       ModelInfo
	}{
		{"sglang lora first", `{"data":[{"id":"ad1","owned_by":"sglang","parent":"base","max_model_len":null},{"id":"base","owned_by":"sglang","parent":null,"max_model_len":32768}]}`, "",
			ModelInfo{ID: "base", MaxModelLen: 32768, Flavor: FlavorSGLang, Models: []string{"ad1", "base"}}},
		{"vllm", `{"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","owned_by":"vllm","root":"Qwen/Qwen3-8B","parent":null,"max_model_len":40960}]}`, "",
			ModelInfo{ID: "Qwen/Qwen3-8B", MaxModelLen: 40960, Flavor: FlavorVLLM, Models: []string{"Qwen/Qwen3-8B"}, Root: "Qwen/Qwen3-8B"}},
		{"llamacpp", `{"object":"list","data":[{"id":"phi3.gguf","object":"model","owned_by":"llamacpp","meta":{"n_ctx":512,"n_ctx_train":4096,"n_vocab":32064}}]}`, "",
			ModelInfo{ID: "phi3.gguf", MaxModelLen: 512, Flavor: FlavorLlamaCpp, Models: []string{"phi3.gguf"}}},
		{"asked for a listed adapter", `{"data":[{"id":"base","owned_by":"sglang","max_model_len":8192},{"id":"ad1","owned_by":"sglang","parent":"base","max_model_len":null}]}`, "ad1",
			ModelInfo{ID: "ad1", Flavor: FlavorSGLang, Models: []string{"base", "ad1"}}},
		{"unknown", `{"data":[{"id":"gpt","owned_by":"someone"}]}`, "",
			ModelInfo{ID: "gpt", Flavor: FlavorUnknown, Models: []string{"gpt"}}},
	} {
		c := serve(t, map[string]http.HandlerFunc{"/v1/models": answerWith(200, tc.body)})
		c.Model = tc.model
		got, err := c.ServedModel(t.Context())
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

// TestProbeRoute: a route answering {} with a 400 or 422 exists; 404 and
// 405 do not; a bad key is an Auth error.
func TestProbeRoute(t *testing.T) {
	c := serve(t, map[string]http.HandlerFunc{
		"/v1/completions": answerWith(400, `{"error":{"message":"\"prompt\" must be provided","code":400}}`),
		"/generate":       answerWith(405, `{"detail":"Method Not Allowed"}`),
		"/v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			var body map[string]any
			if json.NewDecoder(r.Body).Decode(&body) != nil || len(body) != 0 {
				t.Errorf("the probe sent %v; want {}", body)
			}
			answerWith(422, `{"detail":[{"msg":"Field required"}]}`)(w, r)
		},
		"/locked": answerWith(401, `{"error":"Unauthorized"}`),
	})
	for path, want := range map[string]int{"/v1/completions": 0, "/v1/chat/completions": 0, "/generate": 405, "/v1/tokenize": 404} {
		missing, err := c.ProbeRoute(t.Context(), path)
		if err != nil || (missing == nil) != (want == 0) || (missing != nil && (missing.Status != want || missing.Kind != Setup || missing.Op != "POST "+path)) {
			t.Errorf("ProbeRoute(%s) = %+v, %v; want status %d", path, missing, err, want)
		}
	}
	if _, err := c.ProbeRoute(t.Context(), "/locked"); KindOf(err) != Auth {
		t.Errorf("a 401: %v; want an Auth error", err)
	}
}

// TestFieldsFor: llama.cpp gets repeat_penalty and not the fields it does
// not read (listed as ignored); vLLM include_stop_str_in_output for
// no_stop_trim; SGLang everything as named.
func TestFieldsFor(t *testing.T) {
	rp, mn, yes := 1.1, 3, true
	p := SamplingParams{RepetitionPenalty: &rp, MinNewTokens: &mn, NoStopTrim: &yes, StopTokenIDs: []int{7}, MaxNewTokens: &mn}
	f, ignored := p.FieldsFor(FlavorLlamaCpp)
	if f["repeat_penalty"] != 1.1 || f["repetition_penalty"] != nil || f["min_tokens"] != nil || f["max_tokens"] != 3 ||
		!reflect.DeepEqual(ignored, []string{"min_tokens", "no_stop_trim", "stop_token_ids"}) {
		t.Errorf("llama.cpp: %v ignored %v", f, ignored)
	}
	f, ignored = p.FieldsFor(FlavorVLLM)
	if f["include_stop_str_in_output"] != true || f["no_stop_trim"] != nil || f["min_tokens"] != 3 || len(ignored) != 0 {
		t.Errorf("vLLM: %v ignored %v", f, ignored)
	}
	f, ignored = p.FieldsFor(FlavorSGLang)
	if !reflect.DeepEqual(f, p.OpenAIFields()) || len(ignored) != 0 {
		t.Errorf("SGLang: %v ignored %v", f, ignored)
	}
}

// TestVLLMTokenIDs: on vLLM, completions and chat ask for the token ids
// and the answer carries them (output and prompt ids), as /generate's do.
func TestVLLMTokenIDs(t *testing.T) {
	var asked []bool
	check := func(body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req map[string]any
			json.NewDecoder(r.Body).Decode(&req)
			asked = append(asked, req["return_token_ids"] == true)
			answerWith(200, body)(w, r)
		}
	}
	c := serve(t, map[string]http.HandlerFunc{
		"/v1/completions":      check(`{"choices":[{"text":"hi","token_ids":[5,6,2],"prompt_token_ids":[1,2],"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":3}}`),
		"/v1/chat/completions": check(`{"prompt_token_ids":[1,9,9],"choices":[{"message":{"content":"yo","reasoning":"hmm"},"token_ids":[7,2],"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`),
	})
	c.Flavor = FlavorVLLM
	res, err := c.Complete(t.Context(), CompletionRequest{Prompt: "a"})
	if err != nil || !reflect.DeepEqual(res.OutputIDs, []int{5, 6, 2}) || !reflect.DeepEqual(res.PromptIDs, []int{1, 2}) {
		t.Errorf("completions: %+v %v", res, err)
	}
	res, err = c.Chat(t.Context(), ChatRequest{Messages: []Message{{Role: "user", Content: "a"}}})
	if err != nil || !reflect.DeepEqual(res.OutputIDs, []int{7, 2}) || !reflect.DeepEqual(res.PromptIDs, []int{1, 9, 9}) ||
		res.ReasoningContent == nil || *res.ReasoningContent != "hmm" {
		t.Errorf("chat: %+v %v", res, err)
	}
	if !reflect.DeepEqual(asked, []bool{true, true}) {
		t.Errorf("return_token_ids sent: %v", asked)
	}
}

// TestTokenizeRoutes: text and messages are tokenized where each flavor
// does it: SGLang /v1/tokenize, vLLM /tokenize, llama.cpp /tokenize
// {content} (messages: unsupported, so chat prompts take the chat route).
func TestTokenizeRoutes(t *testing.T) {
	var bodies []map[string]any
	tok := func(w http.ResponseWriter, r *http.Request) {
		var req map[string]any
		json.NewDecoder(r.Body).Decode(&req)
		bodies = append(bodies, req)
		answerWith(200, `{"tokens":[1,2,3]}`)(w, r)
	}
	c := serve(t, map[string]http.HandlerFunc{"/tokenize": tok})
	msgs := []Message{{Role: "user", Content: "a"}}
	for _, f := range []Flavor{FlavorVLLM, FlavorLlamaCpp} {
		c.Flavor = f
		if ids, err := c.TokenizeText(t.Context(), "a"); err != nil || len(ids) != 3 {
			t.Errorf("%s text: %v %v", f, ids, err)
		}
	}
	c.Flavor = FlavorVLLM
	if _, err := c.TokenizeMessages(t.Context(), msgs); err != nil {
		t.Errorf("vLLM messages: %v", err)
	}
	c.Flavor = FlavorLlamaCpp
	if _, err := c.TokenizeMessages(t.Context(), msgs); !errors.Is(err, ErrTokenizeUnsupported) {
		t.Errorf("llama.cpp messages: %v; want unsupported", err)
	}
	c.Flavor = FlavorSGLang
	if _, err := c.TokenizeText(t.Context(), "a"); !errors.Is(err, ErrTokenizeUnsupported) {
		t.Errorf("SGLang without /v1/tokenize: %v; want unsupported", err)
	}
	want := []map[string]any{
		{"prompt": "a", "add_special_tokens": true},
		{"content": "a", "add_special": true, "parse_special": true},
		{"messages": []any{map[string]any{"role": "user", "content": "a"}}, "add_generation_prompt": true, "add_special_tokens": false},
	}
	if !reflect.DeepEqual(bodies, want) {
		t.Errorf("tokenize bodies:\n got %v\nwant %v", bodies, want)
	}
}
