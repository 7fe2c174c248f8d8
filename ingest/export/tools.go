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

// toolCallsOf checks a flat answer's "tool_calls" (v: its raw value,
// ingest.Answer.ToolCalls; nil when absent) to be a list of calls and
// returns it (nil when absent or null).
func toolCallsOf(v []byte) ([]byte, error) {
	if isNull(v) {
		return nil, nil
	}
	if _, err := ingest.ReadToolCalls(v); err != nil {
		return nil, fmt.Errorf("the answer's %v", err)
	}
	return v, nil
}

// toolStep is a tool conversation step's place (gen's toolturns.go): the
// user turn it answers (from 0) and the indexes, among the prompt's tool
// turns, of the results that answered its calls.
type toolStep struct {
	user    int
	results []int
}

func readStep(user, results []byte) (*toolStep, error) {
	u, ok := ingest.DecodeCount(user)
	if !ok {
		return nil, errors.New(`"user_turn" is not a count`)
	}
	s := &toolStep{user: int(u)}
	if !isNull(results) {
		if err := json.Unmarshal(results, &s.results); err != nil {
			return nil, errors.New(`"results" is not a list of indexes`)
		}
	}
	return s, nil
}

// steps reports whether a is a tool conversation asked step by step.
func (a *answer) steps() bool {
	return a.conversation && len(a.turns) > 0 && a.turns[0].step != nil
}

// toolMessages rebuilds the conversation of a tool conversation's steps:
// the prompt's system and user turns in their order, each step's
// assistant turn, and after it the tool turns its results answered its
// calls with (the prompt's result, the call's id and tool name).
func (p *prompt) toolMessages(a answer, assistant func(i int) message) ([]message, error) {
	var leads [][]message
	var results []message
	var pending []message
	for _, m := range p.messages {
		switch m.Role {
		case "assistant":
		case "tool":
			results = append(results, m)
		case "user":
			leads = append(leads, append(pending, m))
			pending = nil
		default:
			pending = append(pending, m)
		}
	}
	if n := len(leads); n > 0 {
		leads[n-1] = append(leads[n-1], pending...)
	}
	var out []message
	u := -1
	for i, t := range a.turns {
		s := t.step
		if s == nil || s.user < u || s.user >= len(leads) {
			return nil, fmt.Errorf("step %d answers no user turn of the prompt in order", i+1)
		}
		for ; u < s.user; u++ {
			out = append(out, leads[u+1]...)
		}
		m := assistant(i)
		if len(s.results) != len(m.ToolCalls) && !(i == len(a.turns)-1 && len(s.results) == 0) {
			return nil, fmt.Errorf("step %d made %d call(s) but names %d result(s)", i+1, len(m.ToolCalls), len(s.results))
		}
		out = append(out, m)
		for k, at := range s.results {
			if at < 0 || at >= len(results) {
				return nil, fmt.Errorf("step %d: result %d is not one of the prompt's %d tool turns", i+1, at, len(results))
			}
			c := m.ToolCalls[k]
			out = append(out, message{Role: "tool", Content: results[at].Content, ToolCallID: c.ID, Name: c.Function.Name})
		}
	}
	return out, nil
}

// toolStopped returns, under ExcludeToolStops, the exclusion of a tool
// conversation gen stopped ("tool_stop" in its line).
func (c *Config) toolStopped(j *job) (outcome, bool) {
	if !c.ExcludeToolStops {
		return outcome{}, false
	}
	var o [1][]byte
	if getFields(j.line, []string{"tool_stop"}, o[:]) != nil || isNull(o[0]) {
		return outcome{}, false
	}
	var st struct {
		Reason string `json:"reason"`
		Detail string `json:"detail"`
	}
	json.Unmarshal(o[0], &st)
	return exclude(ReasonToolStop, "stopped (%s): %s", st.Reason, st.Detail), true
}
