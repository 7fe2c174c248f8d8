package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

const chatBody = `{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hello"}]}],"max_tokens":200,"seed":5}`

func TestChatShape(t *testing.T) {
	_, url := testServer(t, Config{})
	resp, b := post(t, url+"/v1/chat/completions", chatBody)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	wantKeys(t, b, []string{"id", "object", "created", "model", "choices", "usage", "metadata"})
	wantKeys(t, b, []string{"prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details", "reasoning_tokens"}, "usage")
	if got := orderedKeys(firstChoice(t, b)); !reflect.DeepEqual(got, []string{"index", "message", "logprobs", "finish_reason", "matched_stop"}) {
		t.Errorf("choice keys %v", got)
	}
	choice, _ := asObject(firstChoice(t, b))
	if got := orderedKeys(choice["message"]); !reflect.DeepEqual(got, []string{"role", "content", "reasoning_content", "tool_calls"}) {
		t.Errorf("message keys %v", got)
	}
	m := obj(t, decode(t, b))
	if m["object"] != "chat.completion" || m["model"] != "m" || len(str(t, m["id"])) != 32 {
		t.Errorf("header fields %v", m)
	}
	num(t, m["created"])
	choices := arr(t, m["choices"])
	if len(choices) != 1 {
		t.Fatalf("%d choices", len(choices))
	}
	c := obj(t, choices[0])
	msg := obj(t, c["message"])
	if msg["role"] != "assistant" || msg["reasoning_content"] != nil || msg["tool_calls"] != nil || c["logprobs"] != nil || num(t, c["index"]) != 0 {
		t.Errorf("choice %v", c)
	}
	u := obj(t, m["usage"])
	prompt := applyChatTemplate([]chatMessage{{role: "system", content: "Be brief."}, {role: "user", content: "Hello"}}, chatTemplate{addGenerationPrompt: true})
	if num(t, u["prompt_tokens"]) != len(prompt) || u["prompt_tokens_details"] != nil || num(t, u["reasoning_tokens"]) != 0 ||
		num(t, u["total_tokens"]) != num(t, u["prompt_tokens"])+num(t, u["completion_tokens"]) {
		t.Errorf("usage %v", u)
	}
	if !reflect.DeepEqual(m["metadata"], map[string]any{"weight_version": "default"}) {
		t.Errorf("metadata %v", m["metadata"])
	}
	// Chat is /generate on the templated ids.
	gen := obj(t, postOK(t, url+"/generate", fmt.Sprintf(`{"input_ids":%s,"sampling_params":{"max_new_tokens":200,"sampling_seed":5}}`, marshal(prompt))))
	fr := obj(t, obj(t, gen["meta_info"])["finish_reason"])
	if msg["content"] != gen["text"] || c["finish_reason"] != fr["type"] || fmt.Sprint(c["matched_stop"]) != fmt.Sprint(orNil(fr["matched"])) {
		t.Errorf("chat %v / %v differs from /generate %q / %v", msg["content"], c["finish_reason"], gen["text"], fr)
	}
	if num(t, u["completion_tokens"]) != num(t, obj(t, gen["meta_info"])["completion_tokens"]) {
		t.Error("completion_tokens differ from /generate")
	}
}

func orNil(v any) any {
	if v == nil {
		return "<nil>"
	}
	return v
}

func TestChatOptions(t *testing.T) {
	_, url := testServer(t, Config{})
	m := obj(t, postOK(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"return_prompt_token_ids":true,"return_meta_info":true,"temperature":0.8}`))
	if m["model"] != "default" {
		t.Errorf("default model %v", m["model"])
	}
	choices := arr(t, m["choices"])
	if len(choices) != 1 {
		t.Fatalf("%d choices", len(choices))
	}
	for i, c := range choices {
		co := obj(t, c)
		if num(t, co["index"]) != i || !reflect.DeepEqual(ints(t, co["prompt_token_ids"]), applyChatTemplate([]chatMessage{{role: "user", content: "Hi"}}, chatTemplate{addGenerationPrompt: true})) {
			t.Errorf("choice %d: %v", i, co)
		}
		obj(t, co["meta_info"])
	}
	u := obj(t, m["usage"])
	if num(t, u["prompt_tokens"]) != 8 {
		t.Errorf("prompt tokens %v, want 8", u["prompt_tokens"])
	}
	// max_tokens null generates until EOS (no context check).
	m = obj(t, postOK(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi"}],"max_tokens":null}`))
	if fr := obj(t, arr(t, m["choices"])[0])["finish_reason"]; fr != "stop" {
		t.Errorf("unbounded chat finished with %v", fr)
	}
}

func TestChatErrors(t *testing.T) {
	_, url := testServer(t, Config{ContextLength: 64})
	for _, tc := range []struct {
		name, ct, body string
		status         int
		typ, msg       string
	}{
		{"content type", "text/plain", chatBody, 400, "Bad Request", ""},
		{"no messages", "application/json", `{"model":"m"}`, 400, "Bad Request", ""},
		{"bad role", "application/json", `{"messages":[{"role":"robot","content":"x"}]}`, 400, "Bad Request", ""},
		{"empty", "application/json", `{"messages":[]}`, 400, "BadRequestError", "Messages cannot be empty."},
		{"stream", "application/json", `{"messages":[{"role":"user","content":"x"}],"stream":true}`, 400, "BadRequestError",
			"sim: streaming is not simulated"},
		{"context", "application/json", `{"messages":[{"role":"user","content":"x"}],"max_tokens":60}`, 400, "BadRequestError",
			"Requested token count exceeds the model's maximum context length of 64 tokens. You requested a total of 67 tokens: 7 tokens from the input messages and 60 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit."},
		{"top_p", "application/json", `{"messages":[{"role":"user","content":"x"}],"top_p":0}`, 400, "BadRequestError", "top_p must be in (0, 1], got 0."},
	} {
		resp, b := do(t, http.MethodPost, url+"/v1/chat/completions", tc.ct, tc.body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d: %s", tc.name, resp.StatusCode, b)
			continue
		}
		wantKeys(t, b, []string{"object", "message", "type", "param", "code"})
		m := obj(t, decode(t, b))
		if m["type"] != tc.typ || num(t, m["code"]) != tc.status || (tc.msg != "" && m["message"] != tc.msg) {
			t.Errorf("%s: %s", tc.name, b)
		}
	}
	_, b := do(t, http.MethodPost, url+"/v1/chat/completions", "text/plain", chatBody)
	if !strings.Contains(errMessage(t, b), "Unsupported Media Type: Only 'application/json' is allowed") {
		t.Errorf("content type message %s", b)
	}
}

func TestChatReasoning(t *testing.T) {
	_, url := testServer(t, Config{ReasoningParser: true})
	m := obj(t, postOK(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Why?"}],"max_tokens":4000}`))
	msg := obj(t, obj(t, arr(t, m["choices"])[0])["message"])
	rc, _ := msg["reasoning_content"].(string)
	if rc == "" || strings.Contains(str(t, msg["content"]), "think>") || num(t, obj(t, m["usage"])["reasoning_tokens"]) == 0 {
		t.Errorf("reasoning %q, content %q, usage %v", rc, msg["content"], m["usage"])
	}
	// /v1/tokenize with messages gives the ids chat uses; /generate on them
	// returns the raw think section.
	tok := obj(t, postOK(t, url+"/v1/tokenize", `{"messages":[{"role":"user","content":"Why?"}]}`))
	gen := obj(t, postOK(t, url+"/generate", fmt.Sprintf(`{"input_ids":%s,"sampling_params":{"max_new_tokens":4000}}`, marshal(ints(t, tok["tokens"])))))
	r, c := splitReasoning(str(t, gen["text"]))
	if r != rc || c != msg["content"] || num(t, obj(t, gen["meta_info"])["reasoning_tokens"]) != num(t, obj(t, m["usage"])["reasoning_tokens"]) {
		t.Errorf("/generate %q does not match chat", gen["text"])
	}
	// Thinking off: no reasoning.
	m = obj(t, postOK(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"Why?"}],"chat_template_kwargs":{"enable_thinking":false}}`))
	if msg := obj(t, obj(t, arr(t, m["choices"])[0])["message"]); msg["reasoning_content"] != nil {
		t.Errorf("thinking disabled still reasons: %v", msg)
	}
}

func TestCompletions(t *testing.T) {
	_, url := testServer(t, Config{})
	resp, b := post(t, url+"/v1/completions", `{"model":"m","prompt":"Once upon a time"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	wantKeys(t, b, []string{"id", "object", "created", "model", "choices", "usage", "metadata"})
	m := obj(t, decode(t, b))
	c := obj(t, arr(t, m["choices"])[0])
	if got := orderedKeys(firstChoice(t, b)); !reflect.DeepEqual(got, []string{"index", "text", "logprobs", "finish_reason", "matched_stop"}) {
		t.Errorf("choice keys %v", got)
	}
	if m["object"] != "text_completion" || num(t, obj(t, m["usage"])["completion_tokens"]) > 16 {
		t.Errorf("completion %v", m)
	}
	gen := obj(t, postOK(t, url+"/generate", `{"text":"Once upon a time","sampling_params":{"max_new_tokens":16}}`))
	if c["text"] != gen["text"] {
		t.Errorf("completion %q differs from /generate %q", c["text"], gen["text"])
	}
	ids := arr(t, obj(t, postOK(t, url+"/v1/completions", `{"prompt":[1,300],"max_tokens":5,"echo":true}`))["choices"])
	if len(ids) != 1 || !strings.HasPrefix(str(t, obj(t, ids[0])["text"]), ",") {
		t.Errorf("token prompt with echo %v", ids)
	}
	for body, msg := range map[string]string{
		`{"prompt":""}`:                 "Prompt cannot be empty",
		`{"prompt":"x","max_tokens":0}`: "",
		`{"max_tokens":3}`:              "",
	} {
		resp, b := post(t, url+"/v1/completions", body)
		if resp.StatusCode != 400 || (msg != "" && errMessage(t, b) != msg) {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
}

func TestTokenize(t *testing.T) {
	_, url := testServer(t, Config{})
	resp, b := post(t, url+"/v1/tokenize", `{"prompt":"Hi"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	wantKeys(t, b, []string{"tokens", "count", "max_model_len"})
	if !strings.Contains(string(b), `"max_model_len":1000000000000000019884624838656`) {
		t.Errorf("max_model_len is not the tokenizer sentinel: %s", b)
	}
	m := obj(t, decode(t, b))
	if !reflect.DeepEqual(ints(t, m["tokens"]), Encode("Hi", true)) || num(t, m["count"]) != 3 {
		t.Errorf("tokenize %v", m)
	}
	m = obj(t, postOK(t, url+"/v1/tokenize", `{"prompt":["Hi","Yo!"],"add_special_tokens":false}`))
	if !reflect.DeepEqual(m["count"], decode(t, []byte("[2,3]"))) {
		t.Errorf("list tokenize %v", m)
	}
	m = obj(t, postOK(t, url+"/v1/tokenize", `{"messages":[{"role":"user","content":"Hi"}]}`))
	if !reflect.DeepEqual(ints(t, m["tokens"]), applyChatTemplate([]chatMessage{{role: "user", content: "Hi"}}, chatTemplate{addGenerationPrompt: true})) {
		t.Errorf("messages tokenize %v", m["tokens"])
	}
	for _, body := range []string{`{}`, `{"prompt":"a","messages":[{"role":"user","content":"b"}]}`} {
		if resp, b := post(t, url+"/v1/tokenize", body); resp.StatusCode != 400 || !strings.Contains(errMessage(t, b), "Exactly one of 'prompt' or 'messages' must be provided.") {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
	_, url2 := testServer(t, Config{TokenizerMaxLength: 4096})
	if m := obj(t, postOK(t, url2+"/v1/tokenize", `{"prompt":"x"}`)); num(t, m["max_model_len"]) != 4096 {
		t.Errorf("configured max_model_len %v", m["max_model_len"])
	}
}

// firstChoice returns the raw JSON of choices[0].
func firstChoice(t *testing.T, b []byte) json.RawMessage {
	t.Helper()
	m, _ := asObject(b)
	a, ok := asArray(m["choices"])
	if !ok || len(a) == 0 {
		t.Fatalf("no choices in %s", b)
	}
	return a[0]
}

// TestMultiTurnTokenizeMatchesChat: a conversation with earlier assistant
// turns gets the same prompt ids from /v1/tokenize with messages as chat
// uses (SGLang renders both through _process_messages), the earlier turns
// in order; on a reasoning model the earlier turn's thinking is left out of
// both.
func TestMultiTurnTokenizeMatchesChat(t *testing.T) {
	for _, reasoning := range []bool{false, true} {
		_, url := testServer(t, Config{ReasoningParser: reasoning})
		msgs := `[{"role":"system","content":"S"},{"role":"user","content":"U1"},{"role":"assistant","content":"<think>r</think>A1"},{"role":"user","content":"U2"}]`
		tok := ints(t, obj(t, postOK(t, url+"/v1/tokenize", `{"messages":`+msgs+`}`))["tokens"])
		ch := firstChoice(t, mustMarshal(t, postOK(t, url+"/v1/chat/completions", `{"messages":`+msgs+`,"max_tokens":4,"return_prompt_token_ids":true}`)))
		if got := ints(t, obj(t, decode(t, ch))["prompt_token_ids"]); !reflect.DeepEqual(got, tok) {
			t.Errorf("reasoning %v: chat prompt ids %v, tokenize %v", reasoning, got, tok)
		}
		want := "<|bos|><|im_start|><|system|>S<|im_end|><|im_start|><|user|>U1<|im_end|><|im_start|><|assistant|><think>r</think>A1<|im_end|><|im_start|><|user|>U2<|im_end|><|im_start|><|assistant|>"
		if reasoning {
			want = strings.Replace(want, "<think>r</think>", "", 1)
		}
		if got := Decode(tok, false); got != want {
			t.Errorf("reasoning %v: prompt %q, want %q", reasoning, got, want)
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
