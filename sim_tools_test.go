package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestSimToolCalls: `gendex sim --tool-calls --tool-call-parser qwen25`
// answers a chat request with tools by calling one of them on some
// questions (tool_calls, finish_reason tool_calls) and in text on others,
// and its /server_info names the parser. Tool flags without --tool-calls,
// or a parser the flavor does not take, are usage errors.
func TestSimToolCalls(t *testing.T) {
	t.Parallel()
	bin := gendexBinary(t)
	url := startSimProcess(t, bin, "--tool-calls", "--tool-call-parser", "qwen25")
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]`
	calls, texts := 0, 0
	for n := range 12 {
		body := fmt.Sprintf(`{"messages":[{"role":"user","content":"weather %d?"}],"tools":%s}`, n, tools)
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Choices []struct {
				FinishReason string `json:"finish_reason"`
				Message      struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"message"`
			} `json:"choices"`
		}
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(a.Choices) != 1 {
			t.Fatalf("question %d: %d, %v", n, resp.StatusCode, err)
		}
		c := a.Choices[0]
		if len(c.Message.ToolCalls) == 0 {
			texts++
			continue
		}
		calls++
		tc := c.Message.ToolCalls[0]
		var args struct{ City *string }
		if c.FinishReason != "tool_calls" || tc.Type != "function" || tc.Function.Name != "get_weather" || !strings.HasPrefix(tc.ID, "call_") ||
			json.Unmarshal([]byte(tc.Function.Arguments), &args) != nil || args.City == nil {
			t.Errorf("question %d: finish %q, call %+v", n, c.FinishReason, tc)
		}
	}
	if calls == 0 || texts == 0 {
		t.Errorf("12 questions with a tool: %d calls, %d text answers; want some of each", calls, texts)
	}
	resp, err := http.Get(url + "/server_info")
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		ToolCallParser string `json:"tool_call_parser"`
	}
	json.NewDecoder(resp.Body).Decode(&info)
	resp.Body.Close()
	if info.ToolCallParser != "qwen25" {
		t.Errorf("/server_info tool_call_parser %q, want qwen25", info.ToolCallParser)
	}

	for _, args := range [][]string{
		{"--tool-call-parser", "qwen25"},
		{"--tool-calls", "--tool-call-parser", "glm45"},
		{"--tool-calls", "--flavor", "vllm", "--enable-auto-tool-choice"},
		{"--tool-calls", "--no-jinja"},
	} {
		r := gendex(t, testEnv(nil), append([]string{"sim", "--listen", "127.0.0.1:0"}, args...)...)
		if r.code != 2 || strings.Contains(r.stderr, "simulator on") {
			t.Errorf("gendex sim %s: exit %d\n%s\nwant a usage error", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
