package ingest

// Tool conversations, read as they are (tools-api.md §1, §7):
//
//   - OpenAI messages: an assistant turn's "tool_calls" ([{id, type:
//     "function", function: {name, arguments}}], content null, "" or text;
//     the legacy "function_call" {name, arguments} is one call), a "tool"
//     turn's "tool_call_id" and "name" (the legacy role "function" is a
//     tool turn);
//   - ShareGPT: "function_call" turns (value {"name", "arguments"}, or a
//     list of them: parallel calls) and "observation" / "function_response"
//     / "tool" / "function" turns (results); a "gpt" turn's Hermes
//     <tool_call>{"name", "arguments"}</tool_call> blocks are its calls,
//     the text around them its content;
//   - the line's top-level "tools": a list, or a JSON string holding one,
//     of function schemas, wrapped ({"type":"function","function":{...}})
//     or bare ({"name", "description", "parameters"}); sent wrapped.
//
// A call's arguments are kept as a JSON string (an object is written
// compact, its keys in their order). Pairing (PairTools): the tool turns
// after an assistant turn answer its calls, by tool_call_id when they have
// one, else in order (the k-th result the k-th call), and take the call's
// id (a call without one gets "call_<turn>_<k>") and name. Refused, with
// the turn and what is wrong: a tool turn that answers no call, a result
// whose name is not its call's, a call left without a result before the
// conversation goes on, arguments that are not a JSON object, tools that
// are not schemas, and a call of a tool the line's tools do not define.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ToolCall is one call of an assistant turn, as OpenAI's wire has it:
// Arguments is a JSON string.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction is a call's function: its name and arguments (a JSON string).
type ToolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// toolFields are the fields of an OpenAI message that tool use adds.
type toolFields struct {
	ToolCalls    json.RawMessage `json:"tool_calls"`
	FunctionCall json.RawMessage `json:"function_call"`
	ToolCallID   *string         `json:"tool_call_id"`
	Name         *string         `json:"name"`
}

// read sets t's tool fields from an OpenAI message's.
func (f *toolFields) read(t *Turn) error {
	if t.Role == "function" { // the legacy result turn
		t.Role = "tool"
	}
	if f.ToolCallID != nil {
		t.ToolCallID = *f.ToolCallID
	}
	if f.Name != nil {
		t.Name = *f.Name
	}
	var calls []json.RawMessage
	if !isNullJSON(f.ToolCalls) {
		if err := json.Unmarshal(f.ToolCalls, &calls); err != nil {
			return errors.New(`"tool_calls" is not a list`)
		}
	}
	if !isNullJSON(f.FunctionCall) {
		calls = append(calls, f.FunctionCall)
	}
	if len(calls) > 0 && t.Role != "assistant" {
		return fmt.Errorf("a %s turn has tool calls (only an assistant turn makes calls)", t.Role)
	}
	for k, raw := range calls {
		c, err := readCall(raw, true)
		if err != nil {
			return fmt.Errorf("tool call %d: %w", k+1, err)
		}
		t.ToolCalls = append(t.ToolCalls, c)
	}
	return nil
}

// ReadToolCalls reads a server's "tool_calls" (a list of calls; null or
// absent: none). Arguments sent as a string are kept as the server sent
// them, JSON or not (the model does not always write valid JSON); an
// object is written compact.
func ReadToolCalls(raw []byte) ([]ToolCall, error) {
	if isNullJSON(raw) {
		return nil, nil
	}
	var calls []json.RawMessage
	if err := json.Unmarshal(raw, &calls); err != nil {
		return nil, errors.New(`"tool_calls" is not a list`)
	}
	var out []ToolCall
	for k, c := range calls {
		tc, err := readCall(c, false)
		if err != nil {
			return nil, fmt.Errorf("tool call %d: %w", k+1, err)
		}
		out = append(out, tc)
	}
	return out, nil
}

// readCall reads one call: OpenAI's {id, type, function: {name,
// arguments}}, or a bare {name, arguments} (legacy function_call,
// ShareGPT, Hermes). Arguments may be a JSON string or an object; missing,
// they are {}. check: arguments must be a JSON object.
func readCall(raw json.RawMessage, check bool) (ToolCall, error) {
	var c struct {
		ID        *string         `json:"id"`
		Type      *string         `json:"type"`
		Function  json.RawMessage `json:"function"`
		Name      *string         `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		// Parameters is the Hermes spelling of arguments.
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return ToolCall{}, errors.New("not an object")
	}
	if c.Type != nil && *c.Type != "function" {
		return ToolCall{}, fmt.Errorf("type %q (want \"function\")", *c.Type)
	}
	out := ToolCall{Type: "function"}
	if c.ID != nil {
		out.ID = *c.ID
	}
	if !isNullJSON(c.Function) {
		var fn struct {
			Name      *string         `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := json.Unmarshal(c.Function, &fn); err != nil {
			return out, errors.New(`"function" is not an object`)
		}
		c.Name, c.Arguments = fn.Name, fn.Arguments
	}
	if isNullJSON(c.Arguments) {
		c.Arguments = c.Parameters
	}
	if c.Name == nil || *c.Name == "" {
		return out, errors.New("no function name")
	}
	out.Function.Name = *c.Name
	if a := bytes.TrimSpace(c.Arguments); !check && len(a) > 0 && a[0] == '"' {
		json.Unmarshal(a, &out.Function.Arguments)
		return out, nil
	}
	args, err := arguments(c.Arguments)
	if err != nil {
		return out, fmt.Errorf("%s: %w", out.Function.Name, err)
	}
	out.Function.Arguments = args
	return out, nil
}

// arguments returns a call's arguments as a JSON string holding an object:
// a string is checked, an object written compact.
func arguments(raw json.RawMessage) (string, error) {
	if isNullJSON(raw) {
		return "{}", nil
	}
	text := []byte(raw)
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		if strings.TrimSpace(s) == "" {
			return "{}", nil
		}
		text = []byte(s)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(text, &obj); err != nil {
		return "", fmt.Errorf("arguments %s are not a JSON object (%v)", clip(text), err)
	}
	if raw[0] == '"' {
		return string(text), nil // as written: the model's bytes
	}
	var b bytes.Buffer
	json.Compact(&b, text)
	return b.String(), nil
}

func clip(b []byte) string {
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

func isNullJSON(b []byte) bool {
	b = bytes.TrimSpace(b)
	return len(b) == 0 || string(b) == "null"
}

// shareGPTCalls reads a ShareGPT function_call turn's value: one call
// {"name", "arguments"}, or a list of them.
func shareGPTCalls(value string) ([]ToolCall, error) {
	v := bytes.TrimSpace([]byte(value))
	raws := []json.RawMessage{v}
	if len(v) > 0 && v[0] == '[' {
		raws = nil
		if err := json.Unmarshal(v, &raws); err != nil {
			return nil, fmt.Errorf("function_call value is not JSON: %v", err)
		}
	} else if !json.Valid(v) {
		return nil, fmt.Errorf("function_call value %s is not JSON", clip(v))
	}
	var out []ToolCall
	for k, raw := range raws {
		c, err := readCall(raw, true)
		if err != nil {
			return nil, fmt.Errorf("tool call %d: %w", k+1, err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("function_call value holds no call")
	}
	return out, nil
}

// hermesCall is a Hermes <tool_call> block in a gpt turn.
var hermesCall = regexp.MustCompile(`(?s)<tool_call>\s*(.*?)\s*</tool_call>`)

// hermesCalls takes the <tool_call>{...}</tool_call> blocks out of a
// ShareGPT gpt turn: its calls, and its text without them (trimmed).
func hermesCalls(value string) (string, []ToolCall, error) {
	blocks := hermesCall.FindAllStringSubmatchIndex(value, -1)
	if blocks == nil {
		return value, nil, nil
	}
	var calls []ToolCall
	var text strings.Builder
	from := 0
	for k, b := range blocks {
		text.WriteString(value[from:b[0]])
		from = b[1]
		c, err := readCall(json.RawMessage(value[b[2]:b[3]]), true)
		if err != nil {
			return "", nil, fmt.Errorf("<tool_call> %d: %w", k+1, err)
		}
		calls = append(calls, c)
	}
	text.WriteString(value[from:])
	return strings.TrimSpace(text.String()), calls, nil
}

// hermesResult reads the tool name of a Hermes result
// (<tool_response>{"name": ..., "content": ...}</tool_response>), or "".
func hermesResult(value string) string {
	v := strings.TrimSpace(value)
	inner, ok := strings.CutPrefix(v, "<tool_response>")
	if !ok {
		return ""
	}
	inner, _ = strings.CutSuffix(inner, "</tool_response>")
	var r struct {
		Name string `json:"name"`
	}
	json.Unmarshal([]byte(strings.TrimSpace(inner)), &r)
	return r.Name
}

// ParseTools reads a line's top-level "tools" (raw, nil when absent): a
// list of function schemas, or a JSON string holding one, each wrapped
// ({"type":"function","function":{...}}) or bare ({"name", ...}). It
// returns the list wrapped, as the servers take it (nil for none: absent,
// null or empty), and the tools' names.
func ParseTools(raw []byte) (json.RawMessage, []string, error) {
	if isNullJSON(raw) {
		return nil, nil, nil
	}
	raw = bytes.TrimSpace(raw)
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, nil, fmt.Errorf(`"tools": %v`, err)
		}
		if raw = bytes.TrimSpace([]byte(s)); len(raw) == 0 {
			return nil, nil, nil
		}
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, nil, fmt.Errorf(`"tools" is not a list of function schemas (%s)`, clip(raw))
	}
	if len(list) == 0 {
		return nil, nil, nil
	}
	var out bytes.Buffer
	out.WriteByte('[')
	var names []string
	for i, t := range list {
		fn, name, err := toolSchema(t)
		if err != nil {
			return nil, nil, fmt.Errorf(`"tools" item %d: %w`, i+1, err)
		}
		if i > 0 {
			out.WriteByte(',')
		}
		out.WriteString(`{"type":"function","function":`)
		json.Compact(&out, fn)
		out.WriteByte('}')
		names = append(names, name)
	}
	out.WriteByte(']')
	return out.Bytes(), names, nil
}

// toolSchema returns a tool's function schema (unwrapped) and its name.
func toolSchema(raw json.RawMessage) (json.RawMessage, string, error) {
	var w struct {
		Type     *string         `json:"type"`
		Function json.RawMessage `json:"function"`
	}
	if err := json.Unmarshal(raw, &w); err != nil {
		return nil, "", fmt.Errorf("not a function schema (%s)", clip(raw))
	}
	fn := raw
	if !isNullJSON(w.Function) {
		if w.Type != nil && *w.Type != "function" {
			return nil, "", fmt.Errorf("type %q (want \"function\")", *w.Type)
		}
		fn = w.Function
	}
	var s struct {
		Name       *string         `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(fn, &s); err != nil || s.Name == nil || *s.Name == "" {
		return nil, "", fmt.Errorf("not a function schema: no \"name\" (%s)", clip(raw))
	}
	if p := bytes.TrimSpace(s.Parameters); !isNullJSON(p) && p[0] != '{' {
		return nil, "", fmt.Errorf("%s: \"parameters\" is not a JSON schema object", *s.Name)
	}
	return fn, *s.Name, nil
}

// HasTools reports whether turns use tools: a call or a tool result.
func HasTools(turns []Turn) bool {
	for _, t := range turns {
		if len(t.ToolCalls) > 0 || t.Role == "tool" {
			return true
		}
	}
	return false
}

// PairTools checks the tool turns of a conversation against its calls and
// the line's tool names (names: nil when the line has no tools), and fills
// in what pairing gives: a call's id when it has none, a result's
// tool_call_id and name. See the top of this file.
func PairTools(turns []Turn, names []string) error {
	var open []int // indexes of the current assistant turn's calls not yet answered, by position
	var calls []ToolCall
	caller := 0 // the assistant turn (from 1) whose calls are answered (0: none)
	for i := range turns {
		t := &turns[i]
		switch {
		case t.Role == "tool":
			if len(open) == 0 {
				if caller == 0 {
					return fmt.Errorf("turn %d is a tool result that answers no call (no assistant turn with tool calls before it)", i+1)
				}
				return fmt.Errorf("turn %d is a tool result that answers no call (turn %d made %d call(s), all answered before it)", i+1, caller, len(calls))
			}
			at := 0
			if t.ToolCallID != "" {
				at = -1
				for k, c := range open {
					if calls[c].ID == t.ToolCallID {
						at = k
					}
				}
				if at < 0 {
					return fmt.Errorf("turn %d: tool_call_id %q answers no open call of turn %d", i+1, t.ToolCallID, caller)
				}
			}
			c := &calls[open[at]]
			if t.Name != "" && t.Name != c.Function.Name {
				return fmt.Errorf("turn %d: the result of tool %q answers call %q of %s (turn %d)", i+1, t.Name, c.ID, c.Function.Name, caller)
			}
			t.ToolCallID, t.Name = c.ID, c.Function.Name
			open = append(open[:at], open[at+1:]...)
		case len(open) > 0:
			c := calls[open[0]]
			return fmt.Errorf("turn %d: call %s of %s (turn %d) has no tool result before the conversation goes on", i+1, c.ID, c.Function.Name, caller)
		default:
			caller, calls = 0, nil
		}
		if len(t.ToolCalls) == 0 {
			continue
		}
		caller, calls, open = i+1, t.ToolCalls, nil
		for k := range calls {
			c := &calls[k]
			if c.ID == "" {
				c.ID = fmt.Sprintf("call_%d_%d", i+1, k+1)
			}
			if names == nil {
				return fmt.Errorf("turn %d calls %s, but the line has no \"tools\" (a server drops calls of tools it is not given)", i+1, c.Function.Name)
			}
			if !contains(names, c.Function.Name) {
				return fmt.Errorf("turn %d calls %s, which the line's \"tools\" do not define (they define %s)", i+1, c.Function.Name, strings.Join(names, ", "))
			}
			open = append(open, k)
		}
	}
	return nil
}

func contains(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// ParseChat reads a chat prompt's turns (ParseTurns) with its line's
// "tools" (raw, nil when absent), pairs the tool turns with their calls
// (PairTools), and returns the turns and the tools, wrapped (nil: none).
// Its errors name the turn, or "tools".
func ParseChat(raw []json.RawMessage, tools []byte) ([]Turn, json.RawMessage, error) {
	ts, err := ParseTurns(raw)
	if err != nil {
		return nil, nil, err
	}
	list, names, err := ParseTools(tools)
	if err != nil {
		return nil, nil, err
	}
	if err := PairTools(ts, names); err != nil {
		return nil, nil, err
	}
	return ts, list, nil
}

// toolStopReason is the reason of an answer line's "tool_stop" (sp): a
// tool conversation gen stopped where the model departed from the data,
// counted per reason in the index (store.Record.ToolStop). A "tool_stop"
// that is not null but has no reason string is "unknown"; none is "".
func toolStopReason(b []byte, sp span) string {
	if !sp.ok() || isNull(b, sp) {
		return ""
	}
	if r := str(b, get(b, sp, "reason")); r != "" {
		return r
	}
	return "unknown"
}
