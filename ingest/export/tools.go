package export

// Records of tool conversations (issue 42, item 4): a conversations record
// carries the prompt's turns as gen sent them (assistant tool_calls with
// arguments a JSON string, tool turns with tool_call_id and name), the
// model's answer with its own calls ("tool_calls" of the answer line), and
// the prompt's tools at the top level, as SpecForge reads them:
//
//	{"id", "conversations": [...], "tools": [{"type":"function","function":{...}}]}
//
// An ids record of a tool prompt takes its prompt ids from the answer line
// (gen's /v1/tokenize with the tools, or vLLM's prompt_token_ids); when
// they must be rebuilt, the prompt is tokenized with its tools.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"gendex/ingest"
	"gendex/ingest/gen/client"
)

// ToolTokenizer is a Tokenizer that renders tools with the messages, as
// the chat endpoint does (/v1/tokenize with "tools").
type ToolTokenizer interface {
	TokenizeChat(ctx context.Context, messages []client.Message, tools json.RawMessage) ([]int, error)
}

// TokenizeChat returns the ids the chat endpoint would see for messages
// with tools.
func (t ServerTokenizer) TokenizeChat(ctx context.Context, msgs []client.Message, tools json.RawMessage) ([]int, error) {
	return t.C.TokenizeChat(ctx, msgs, tools)
}

// TokenizeChat is the server's, from the window's answers when it can.
func (c *cachedTokenizer) TokenizeChat(ctx context.Context, msgs []client.Message, tools json.RawMessage) ([]int, error) {
	tt, ok := c.t.(ToolTokenizer)
	if !ok {
		return nil, errNoToolTokenizer
	}
	b, _ := json.Marshal(msgs)
	return c.lookup(ctx, "c"+string(tools)+"\x00"+string(b), func(ctx context.Context) ([]int, error) { return tt.TokenizeChat(ctx, msgs, tools) })
}

var errNoToolTokenizer = errors.New("the tokenizer cannot render tools with the messages")

// tokenizeChat tokenizes a chat prompt's messages, with its tools when it
// has them.
func (c *Config) tokenizeChat(ctx context.Context, msgs []client.Message, tools json.RawMessage) ([]int, error) {
	if tools == nil {
		return c.Tokenizer.TokenizeMessages(ctx, msgs)
	}
	tt, ok := c.Tokenizer.(ToolTokenizer)
	if !ok {
		return nil, errNoToolTokenizer
	}
	return tt.TokenizeChat(ctx, msgs, tools)
}

// toolCallsOf returns a flat answer line's "tool_calls" (raw; nil when
// absent or null), checked to be a list of calls.
func toolCallsOf(line []byte) ([]byte, error) {
	var o [1][]byte
	if err := getFields(line, []string{"tool_calls"}, o[:]); err != nil {
		return nil, err
	}
	if isNull(o[0]) {
		return nil, nil
	}
	if _, err := ingest.ReadToolCalls(o[0]); err != nil {
		return nil, fmt.Errorf("the answer's %v", err)
	}
	return o[0], nil
}
