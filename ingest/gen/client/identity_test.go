package client

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// TestServerIdentity: SGLang's /get_server_info gives the keys that change
// its answers (an unset one is left out, the rest ignored); vLLM's
// /version its version; llama.cpp's /props the chat template's hash; a
// server that answers 404 has no identity to tell. The body of SGLang's
// and llama.cpp's answer comes back whole (what else gen reads there: the
// capacity the server states), vLLM's none.
func TestServerIdentity(t *testing.T) {
	for _, tc := range []struct {
		name   string
		flavor Flavor
		routes map[string]http.HandlerFunc
		want   map[string]any
	}{
		{"sglang", FlavorSGLang, map[string]http.HandlerFunc{"/get_server_info": answerWith(200,
			`{"model_path":"Qwen/Qwen3-8B","tp_size":2,"version":"0.5.6","reasoning_parser":"qwen3","tool_call_parser":null,"chat_template":"","speculative_algorithm":"EAGLE3","speculative_num_steps":3,"internal_states":[{"x":1}]}`)},
			map[string]any{"model_path": "Qwen/Qwen3-8B", "version": "0.5.6", "reasoning_parser": "qwen3", "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3.0}},
		{"vllm", FlavorVLLM, map[string]http.HandlerFunc{"/version": answerWith(200, `{"version":"0.11.0"}`)},
			map[string]any{"version": "0.11.0"}},
		{"llamacpp", FlavorLlamaCpp, map[string]http.HandlerFunc{"/props": answerWith(200, `{"model_path":"/m/phi3.gguf","build_info":"b6000","chat_template":"{{ messages }}"}`)},
			map[string]any{"model_path": "/m/phi3.gguf", "version": "b6000", "chat_template_sha256": "f24189f08c85a1eb"}},
		{"sglang without the route", FlavorSGLang, map[string]http.HandlerFunc{}, nil},
	} {
		c := serve(t, tc.routes)
		c.Flavor = tc.flavor
		got, info := c.ServerIdentity(t.Context())
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
		var want string
		for path, h := range tc.routes {
			if path != "/version" {
				rec := httptest.NewRecorder()
				h(rec, httptest.NewRequest(http.MethodGet, path, nil))
				want = rec.Body.String()
			}
		}
		if string(info) != want {
			t.Errorf("%s: the body read %q, want %q", tc.name, info, want)
		}
	}
}
