package client

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestToolsRefused: vLLM's and llama.cpp's refusal of tools is a Setup
// error (the run stops) that names the flags; another 400 stays Permanent.
func TestToolsRefused(t *testing.T) {
	tools := []byte(`[{"type":"function","function":{"name":"f"}}]`)
	for _, tc := range []struct {
		flavor     Flavor
		status     int
		msg, flags string
	}{
		{FlavorVLLM, 400, `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`, "--enable-auto-tool-choice --tool-call-parser NAME"},
		{FlavorLlamaCpp, 500, "tools param requires --jinja flag", "llama-server with --jinja"},
	} {
		f := newFake(t, reply(tc.status, `{"error":{"message":`+strings.ReplaceAll(`"`+tc.msg+`"`, `"auto"`, `\"auto\"`)+`}}`))
		c := f.client(Options{})
		c.Flavor = tc.flavor
		_, err := c.Chat(t.Context(), ChatRequest{Messages: []Message{{Role: "user", Content: "q"}}, Tools: tools})
		if KindOf(err) != Setup || !errors.Is(err, ErrToolsRefused) || !strings.Contains(err.Error(), tc.flags) {
			t.Errorf("%s: %v (kind %v); want a setup error naming %q", tc.flavor, err, KindOf(err), tc.flags)
		}
		body := string(f.requests()[0].Body)
		if !strings.Contains(body, `"tools":[{"type":"function"`) || !strings.Contains(body, `"tool_choice":"auto"`) {
			t.Errorf("%s: body %s", tc.flavor, body)
		}
	}
	f := newFake(t, reply(400, `{"error":{"message":"bad temperature"}}`))
	if _, err := f.client(Options{}).Chat(t.Context(), ChatRequest{Messages: []Message{{Role: "user", Content: "q"}}, Tools: tools}); KindOf(err) != Permanent {
		t.Errorf("another 400: %v; want permanent", err)
	}
}

// TestToolParser: the parser from /server_info (or /get_server_info when
// there is none); null is none, absent is not known.
func TestToolParser(t *testing.T) {
	for _, tc := range []struct {
		info, get string
		want      string
		known     bool
	}{
		{`{"tool_call_parser":"kimi_k2"}`, "", "kimi_k2", true},
		{`{"tool_call_parser":null}`, "", "", true},
		{`{"model_path":"m"}`, "", "", false},
		{"", `{"tool_call_parser":"qwen25"}`, "qwen25", true},
		{"", "", "", false},
	} {
		f := newFake(t, func(w http.ResponseWriter, r *http.Request, _ []byte) {
			body := map[string]string{"/server_info": tc.info, "/get_server_info": tc.get}[r.URL.Path]
			if body == "" {
				http.NotFound(w, r)
				return
			}
			reply(200, body)(w, r, nil)
		})
		got, known, err := f.client(Options{}).ToolParser(t.Context())
		if err != nil || got != tc.want || known != tc.known {
			t.Errorf("%s %s: %q %v %v; want %q %v", tc.info, tc.get, got, known, err, tc.want, tc.known)
		}
	}
}

// TestParseFunctionCall: the request carries text, parser and tools; the
// calls come back as OpenAI calls (arguments the parser's JSON string).
func TestParseFunctionCall(t *testing.T) {
	f := newFake(t, reply(200, `{"normal_text":"Let me see.","calls":[{"tool_index":-1,"name":"get_weather","parameters":"{\"city\": \"Paris\"}","tool_call_id":null},{"tool_index":1,"name":"f","parameters":"{}","tool_call_id":"functions.f:1"}]}`))
	calls, normal, err := f.client(Options{}).ParseFunctionCall(t.Context(), "raw <tool_call>", "qwen25", []byte(`[{"type":"function","function":{"name":"get_weather"}}]`))
	if err != nil || normal != "Let me see." || len(calls) != 2 || calls[0].Function.Arguments != `{"city": "Paris"}` || calls[0].ID != "" || calls[1].ID != "functions.f:1" {
		t.Fatalf("%+v %q %v", calls, normal, err)
	}
	body := string(f.requests()[0].Body)
	for _, w := range []string{`"text":"raw <tool_call>"`, `"tool_call_parser":"qwen25"`, `"tools":[{"type":"function"`} {
		if !strings.Contains(body, w) {
			t.Errorf("body %s lacks %s", body, w)
		}
	}
}
