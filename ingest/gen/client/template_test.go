package client

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

// TestTemplateReachesTokenizeAndChat: a request's own template kwargs and
// reasoning effort go where each server reads them: SGLang's
// /v1/tokenize beside the messages, vLLM's /tokenize among the kwargs,
// the chat body as chat_template_kwargs and reasoning_effort.
func TestTemplateReachesTokenizeAndChat(t *testing.T) {
	var bodies []map[string]any
	keep := func(answer string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var req map[string]any
			json.NewDecoder(r.Body).Decode(&req)
			delete(req, "messages")
			bodies = append(bodies, req)
			answerWith(200, answer)(w, r)
		}
	}
	c := serve(t, map[string]http.HandlerFunc{"/v1/tokenize": keep(`{"tokens":[1]}`), "/tokenize": keep(`{"tokens":[1]}`),
		"/v1/chat/completions": keep(`{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`)})
	msgs := []Message{{Role: "user", Content: "a"}}
	tpl := Template{Kwargs: map[string]any{"enable_thinking": false}, Effort: "low"}
	for _, f := range []Flavor{FlavorSGLang, FlavorVLLM} {
		c.Flavor = f
		if _, err := c.TokenizeChatAs(t.Context(), msgs, nil, tpl); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	c.Flavor = FlavorSGLang
	if _, err := c.Chat(t.Context(), ChatRequest{Messages: msgs, ChatTemplateKwargs: tpl.Kwargs, Extra: tpl.Extra()}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TokenizeMessages(t.Context(), msgs); err != nil { // no template of its own: none sent
		t.Fatal(err)
	}
	want := []map[string]any{
		{"chat_template_kwargs": map[string]any{"enable_thinking": false}, "reasoning_effort": "low"},
		{"chat_template_kwargs": map[string]any{"enable_thinking": false, "reasoning_effort": "low"}, "add_generation_prompt": true, "add_special_tokens": false},
		{"chat_template_kwargs": map[string]any{"enable_thinking": false}, "reasoning_effort": "low", "stream": false},
		{},
	}
	delete(bodies[2], "rid")
	if !reflect.DeepEqual(bodies, want) {
		t.Errorf("bodies:\n got %v\nwant %v", bodies, want)
	}
}
