package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"gendex/ingest"
)

// Tool calls on the servers' routes (tools-api.md): the chat endpoint takes
// "tools" with tool_choice "auto" and answers the model's calls in
// message.tool_calls (SGLang only with --tool-call-parser, vLLM only with
// --enable-auto-tool-choice --tool-call-parser, llama.cpp only with
// Jinja); /v1/tokenize renders the tools with the messages; /generate runs
// no parser, so its output is parsed by SGLang's POST /parse_function_call
// with the parser named.

// ErrToolsRefused marks a server's refusal of tools for want of the flags
// NeedsFlags names (an *Error of Kind Setup wraps it).
var ErrToolsRefused = errors.New("the server does not take tools")

// ToolCall is one call of an assistant turn (ingest.ToolCall: arguments a
// JSON string).
type ToolCall = ingest.ToolCall

// ToolFunction is a call's function (ingest.ToolFunction).
type ToolFunction = ingest.ToolFunction

// addTools puts tools (a wrapped list; nil: none) in a chat or tokenize
// body, with tool_choice "auto".
func addTools(body map[string]any, tools json.RawMessage) {
	if tools != nil {
		body["tools"] = tools
		body["tool_choice"] = "auto"
	}
}

// readToolCalls sets r's calls from a chat message's tool_calls.
func (c *Client) readToolCalls(op string, r *Result, raw json.RawMessage) error {
	calls, err := ingest.ReadToolCalls(raw)
	if err != nil {
		return &Error{Kind: Permanent, Status: http.StatusOK, Server: c.server(), Op: op,
			Message: "the answer's " + err.Error()}
	}
	r.ToolCalls = calls
	return nil
}

// toolsRefused makes a server's refusal of tools a Setup error naming the
// flags it needs: vLLM answers 400 '"auto" tool choice requires
// --enable-auto-tool-choice and --tool-call-parser to be set', llama.cpp
// without Jinja 'tools param requires --jinja flag'.
func (c *Client) toolsRefused(err error) error {
	var e *Error
	if !errors.As(err, &e) || e.Status < 400 || e.Status >= 600 {
		return err
	}
	m := strings.ToLower(e.Message)
	if strings.Contains(m, "enable-auto-tool-choice") || strings.Contains(m, "tool-call-parser") ||
		strings.Contains(m, "jinja") && strings.Contains(m, "tool") {
		e.Kind, e.Err = Setup, ErrToolsRefused
		e.Message += " (" + NeedsFlags(c.Flavor) + ")"
	}
	return err
}

// NeedsFlags says what a server of flavor f must be started with for its
// chat endpoint to take tools and answer the model's calls as tool_calls.
func NeedsFlags(f Flavor) string {
	switch f {
	case FlavorVLLM:
		return "start vLLM with --enable-auto-tool-choice --tool-call-parser NAME (hermes for Qwen2.5/3, kimi_k2, glm45, ...)"
	case FlavorLlamaCpp:
		return "start llama-server with --jinja (not --no-jinja), and a template that renders tools"
	}
	return "start SGLang with --tool-call-parser NAME (qwen25 for Qwen2.5/3, kimi_k2, glm45, qwen3_coder, ...)"
}

// TokenizeChat is TokenizeMessages with tools (a wrapped list; nil: none)
// rendered by the chat template, as the chat endpoint would render them.
func (c *Client) TokenizeChat(ctx context.Context, messages []Message, tools json.RawMessage) ([]int, error) {
	return c.tokenizeMessages(ctx, messages, tools, Template{})
}

// ToolParser returns the tool-call parser an SGLang server runs
// (--tool-call-parser, from GET /server_info, or /get_server_info on
// servers before v0.5.6): "" when it runs none. known is false when the
// server does not say (no such route, or no tool_call_parser in it).
func (c *Client) ToolParser(ctx context.Context) (parser string, known bool, err error) {
	for _, path := range []string{"/server_info", "/get_server_info"} {
		var raw map[string]json.RawMessage
		_, err := c.call(ctx, http.MethodGet, path, nil, &raw)
		var e *Error
		if errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusMethodNotAllowed) {
			continue
		}
		if err != nil {
			return "", false, err
		}
		v, ok := raw["tool_call_parser"]
		if !ok {
			return "", false, nil
		}
		var name *string
		if json.Unmarshal(v, &name) != nil {
			return "", false, nil
		}
		if name == nil {
			return "", true, nil // null: it runs none
		}
		return *name, true, nil
	}
	return "", false, nil
}

// ParseFunctionCall asks SGLang's POST /parse_function_call for the calls in
// text, a model's raw output, with the parser named and the tools it was
// given (the parser finds nothing without them). It returns the calls (ids
// as the parser gives them: none, except kimi_k2's) and the text the
// parser did not take as calls.
func (c *Client) ParseFunctionCall(ctx context.Context, text, parser string, tools json.RawMessage) ([]ToolCall, string, error) {
	const op = "POST /parse_function_call"
	body := map[string]any{"text": text, "tool_call_parser": parser, "tools": tools}
	var out struct {
		NormalText string `json:"normal_text"`
		Calls      []struct {
			Name       *string `json:"name"`
			Parameters string  `json:"parameters"`
			ToolCallID *string `json:"tool_call_id"`
		} `json:"calls"`
	}
	if _, err := c.call(ctx, http.MethodPost, "/parse_function_call", body, &out); err != nil {
		return nil, "", err
	}
	var calls []ToolCall
	for k, pc := range out.Calls {
		raw, _ := json.Marshal(map[string]any{"name": pc.Name, "arguments": pc.Parameters})
		tc, err := ingest.ReadToolCalls(append(append([]byte{'['}, raw...), ']'))
		if err != nil {
			return nil, "", &Error{Kind: Permanent, Status: http.StatusOK, Server: c.server(), Op: op,
				Message: fmt.Sprintf("call %d: %v", k+1, err)}
		}
		if pc.ToolCallID != nil {
			tc[0].ID = *pc.ToolCallID
		}
		calls = append(calls, tc...)
	}
	return calls, out.NormalText, nil
}

// appendToolCalls appends calls as a JSON list of OpenAI calls, strings
// escaped as appendString does.
func appendToolCalls(dst []byte, calls []ToolCall) []byte {
	dst = append(dst, '[')
	for i, tc := range calls {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if tc.ID != "" {
			dst = append(dst, `"id":`...)
			dst = appendString(dst, tc.ID)
			dst = append(dst, ',')
		}
		dst = append(dst, `"type":"function","function":{"name":`...)
		dst = appendString(dst, tc.Function.Name)
		dst = append(dst, `,"arguments":`...)
		dst = appendString(dst, tc.Function.Arguments)
		dst = append(dst, "}}"...)
	}
	return append(dst, ']')
}
