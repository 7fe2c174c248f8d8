package sim

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
)

// # The tool-calling model (Config.ToolCalls)
//
// The chat template renders a request's tools as a <tools> block at the end
// of the system message, one compact JSON line per tool as the client sent
// it, and an assistant message's tool_calls after its content in the
// model's markup. The model reads the tools back from the prompt ids, so a
// /generate of ids from /v1/tokenize (messages and tools) is answered as
// the chat endpoint answers the same messages: when the prompt asks for an
// answer and holds tools, a draw from the item's seed (the prompt, Seed and
// the request's sampling seed) decides whether this turn calls one of them
// (6 in 10 after a user message, 35 in 100 after a tool result), which one
// (uniformly) and its arguments (from its JSON schema: every required
// property, each other one at even odds; enums, types, nested objects and
// arrays followed), and whether it makes a second call at once (1 in 4,
// of any of the tools, drawn last: parallel calls; not where the request
// allows one call only, as llama.cpp without parallel_tool_calls). A
// turn that calls is an optional one-sentence preamble, a blank line, then
// the calls in the markup of the model's format, then EOS.
//
// Markup (tools-api.md §2d): Qwen's (--tool-call-parser qwen25, qwen or
// hermes, and the default) is <tool_call>\n{"name": N, "arguments": A}\n
// </tool_call>; Kimi-K2's (kimi_k2) is <|tool_calls_section_begin|>
// <|tool_call_begin|>functions.N:K<|tool_call_argument_begin|>A
// <|tool_call_end|><|tool_calls_section_end|>, K counting the calls before
// it in the conversation. The arguments are written as Python's
// json.dumps writes them (", " and ": "), so a parser that re-serializes
// them gives the model's bytes back.

// toolModel is the tools part: the tool-calling model (Config.ToolCalls,
// ToolCallParser, and the flavor's NoJinja). It decides whether an answer
// calls a tool and writes the call (planCall, for the engine), says which
// tools a prompt renders (promptLines), writes SGLang's tool_calls and
// serves SGLang's /parse_function_call. It reads Config only and holds no
// state: the flavors read a request's tools and parse an answer's calls
// with this file's and tools_http.go's functions, each in its server's
// style (parserStyle).
type toolModel struct {
	cfg Config
}

// format is the model's markup, from Config.ToolCallParser.
func (t *toolModel) format() toolFormat { return formatOf(t.cfg.ToolCallParser) }

// toolFormat is the markup of the model's tool calls.
type toolFormat int

const (
	formatQwen toolFormat = iota // <tool_call>\n{json}\n</tool_call>
	formatKimi                   // Kimi-K2's special-token section
)

// toolCall is one call: the tool's name and its arguments as Python's
// json.dumps writes them.
type toolCall struct {
	name string
	args string
}

// formatOf is the model's markup for a --tool-call-parser name.
func formatOf(parser string) toolFormat {
	if parser == "kimi_k2" {
		return formatKimi
	}
	return formatQwen
}

// markup writes calls in the format's markup; before counts the calls
// earlier in the conversation (Kimi numbers its calls).
func (f toolFormat) markup(calls []toolCall, before int) string {
	var b strings.Builder
	if f == formatKimi {
		b.WriteString(tokenNames[KimiSectionBeginID])
		for i, c := range calls {
			b.WriteString(tokenNames[KimiCallBeginID] + "functions." + c.name + ":" + strconv.Itoa(before+i))
			b.WriteString(tokenNames[KimiArgumentBeginID] + c.args + tokenNames[KimiCallEndID])
		}
		b.WriteString(tokenNames[KimiSectionEndID])
		return b.String()
	}
	for i, c := range calls {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(tokenNames[ToolCallStartID] + "\n{\"name\": " + pyString(c.name) + ", \"arguments\": " + c.args + "}\n" + tokenNames[ToolCallEndID])
	}
	return b.String()
}

// appendToolsBlock appends a system message's content followed by the
// tools block.
func appendToolsBlock(ids []int, tools [][]byte, content string) []int {
	if content != "" {
		ids = appendEncoded(ids, content+"\n\n")
	}
	ids = append(ids, ToolsStartID, ByteBase+'\n')
	for _, t := range tools {
		ids = appendEncoded(ids, string(t))
		ids = append(ids, ByteBase+'\n')
	}
	return append(ids, ToolsEndID)
}

// toolDef is a tool the model read from its prompt.
type toolDef struct {
	name   string
	params json.RawMessage // the JSON schema of its arguments, or nil
}

// promptTools reads the tools of the first <tools> block of a prompt.
func promptTools(prompt []int) []toolDef {
	start := -1
	for i, id := range prompt {
		if id == ToolsStartID && start < 0 {
			start = i + 1
		} else if id == ToolsEndID && start >= 0 {
			var tools []toolDef
			for _, line := range strings.Split(Decode(prompt[start:i], false), "\n") {
				tool, _ := asObject(json.RawMessage(line))
				fn, _ := asObject(tool["function"])
				if name, ok := asString(fn["name"]); ok && name != "" {
					tools = append(tools, toolDef{name: name, params: fn["parameters"]})
				}
			}
			return tools
		}
	}
	return nil
}

// lastTurnRole is the role token of the message before the generation
// prompt, or -1.
func lastTurnRole(prompt []int) int {
	n := len(prompt)
	if n >= 2 && prompt[n-1] == ThinkEndID {
		n -= 2
	}
	for i := n - 3; i >= 0; i-- {
		if prompt[i] == IMStartID && i+1 < n {
			return prompt[i+1]
		}
	}
	return -1
}

// countCalls counts the tool calls a prompt's history holds in format f.
func countCalls(prompt []int, f toolFormat) int {
	mark := ToolCallStartID
	if f == formatKimi {
		mark = KimiCallBeginID
	}
	n := 0
	for _, id := range prompt {
		if id == mark {
			n++
		}
	}
	return n
}

// planCall decides whether the answer to prompt calls a tool; if so it
// returns the answer's ids up to EOS (preamble, blank line, markup).
// oneCall: the request does not allow parallel calls.
func (t *toolModel) planCall(seed uint64, prompt []int, oneCall bool) []int {
	tools := promptTools(prompt)
	if len(tools) == 0 {
		return nil
	}
	r := &rng{state: seed ^ 0x7001CA11}
	p := 0.6
	if lastTurnRole(prompt) == ToolID {
		p = 0.35
	}
	if r.float() >= p {
		return nil
	}
	tool := tools[r.intn(len(tools))]
	calls := []toolCall{{name: tool.name, args: genObject(r, tool.params, 0)}}
	f := t.format()
	var text string
	if r.intn(2) == 0 {
		n := 3 + r.intn(6)
		ws := make([]string, n)
		for i := range ws {
			ws[i] = words[r.intn(len(words))]
		}
		text = strings.ToUpper(ws[0][:1]) + strings.Join(ws, " ")[1:] + ".\n\n"
	}
	if !oneCall && r.intn(4) == 0 {
		tool := tools[r.intn(len(tools))]
		calls = append(calls, toolCall{name: tool.name, args: genObject(r, tool.params, 0)})
	}
	return appendEncoded(nil, text+f.markup(calls, countCalls(prompt, f)))
}

// genObject writes arguments for an object schema as Python's json.dumps
// would: every required property, each other one at even odds (none past
// depth 3), in the schema's order.
func genObject(r *rng, schema json.RawMessage, depth int) string {
	m, _ := asObject(schema)
	props := m["properties"]
	req := map[string]bool{}
	list, _, _ := asStrings(m["required"])
	for _, k := range list {
		req[k] = true
	}
	pm, _ := asObject(props)
	var parts []string
	for _, k := range orderedKeys(props) {
		if req[k] || (depth < 3 && r.intn(2) == 0) {
			parts = append(parts, pyString(k)+": "+genValue(r, pm[k], depth))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// genValue writes a value for a JSON schema: one of its enum, its const,
// or a value of its type (the first type of a list that is not null).
func genValue(r *rng, schema json.RawMessage, depth int) string {
	m, _ := asObject(schema)
	if enum, ok := asArray(m["enum"]); ok && len(enum) > 0 {
		return pyDumps(enum[r.intn(len(enum))])
	}
	if c, ok := m["const"]; ok {
		return pyDumps(c)
	}
	typ, _ := asString(m["type"])
	if types, _, ok := asStrings(m["type"]); ok && typ == "" {
		for _, t := range types {
			if t != "null" {
				typ = t
				break
			}
		}
	}
	switch typ {
	case "integer":
		return strconv.Itoa(r.intn(100))
	case "number":
		return pyFloat(float64(r.intn(1000)) / 10)
	case "boolean":
		return strconv.FormatBool(r.intn(2) == 1)
	case "null":
		return "null"
	case "array":
		if depth >= 3 {
			return "[]"
		}
		items := make([]string, 1+r.intn(3))
		for i := range items {
			items[i] = genValue(r, m["items"], depth+1)
		}
		return "[" + strings.Join(items, ", ") + "]"
	case "object":
		return genObject(r, schema, depth+1)
	}
	return pyString(words[r.intn(len(words))])
}

// pyString writes s as Python's json.dumps(ensure_ascii=False) does.
func pyString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 {
				b.WriteString(`\u00` + strconv.FormatInt(int64(c)>>4, 16) + strconv.FormatInt(int64(c)&15, 16))
			} else {
				b.WriteRune(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// pyDumps re-serializes a JSON value as Python's json.dumps(json.loads(v),
// ensure_ascii=False) does: ", " and ": " separators, keys in document
// order (a repeated key keeps its first place and last value), floats in
// repr form.
func pyDumps(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	switch jsonKind(raw) {
	case "object":
		m, _ := asObject(raw)
		keys := orderedKeys(raw)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyString(k) + ": " + pyDumps(m[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case "array":
		a, _ := asArray(raw)
		parts := make([]string, len(a))
		for i, e := range a {
			parts[i] = pyDumps(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case "string":
		str, _ := asString(raw)
		return pyString(str)
	case "number":
		if !bytes.ContainsAny(raw, ".eE") {
			return string(raw)
		}
		n, _ := parseNum(raw)
		return pyFloat(n.f)
	}
	return string(raw)
}

// parsedCall is one call a server's tool parser found in a model output:
// its name, arguments (a JSON string), and for Kimi-K2 the index and id
// the model wrote.
type parsedCall struct {
	name, args string
	index      int    // tool_index: -1 from JSON detectors
	modelID    string // Kimi: functions.N:K
}

// parserStyle is how one server's parser treats what it finds.
type parserStyle struct {
	strip       bool // the text before the markup is stripped (SGLang)
	dropUnknown bool // calls of tools not in the request are dropped (SGLang)
	paramsKey   bool // "parameters" is read before "arguments" (SGLang)
}

var (
	sglangParser = parserStyle{strip: true, dropUnknown: true, paramsKey: true}
	vllmParser   = parserStyle{}
	llamaParser  = parserStyle{strip: true}
)

var kimiCallRe = regexp.MustCompile(`(?s)<\|tool_call_begin\|>\s*([\w\.]+:\d+)\s*<\|tool_call_argument_begin\|>\s*(\{.*?\})\s*<\|tool_call_end\|>`)

// parseCalls finds the tool calls of a model output in format f as a
// server's parser does (tools-api.md §2b, §2d, §3), given the request's
// tool names. With no tools, or no call found, the whole text is normal
// text.
func parseCalls(f toolFormat, st parserStyle, text string, tools map[string]bool) (string, []parsedCall) {
	if len(tools) == 0 {
		return text, nil
	}
	var normal string
	var calls []parsedCall
	if f == formatKimi {
		i := strings.Index(text, tokenNames[KimiSectionBeginID])
		if i < 0 {
			return text, nil
		}
		normal = text[:i]
		for _, m := range kimiCallRe.FindAllStringSubmatch(text[i:], -1) {
			id := m[1]
			name, k, _ := strings.Cut(id, ":")
			if _, after, ok := strings.Cut(name, "."); ok {
				name = after
			}
			idx, _ := strconv.Atoi(k)
			calls = append(calls, parsedCall{name: name, args: m[2], index: idx, modelID: id})
		}
	} else {
		bot, eot := tokenNames[ToolCallStartID]+"\n", "\n"+tokenNames[ToolCallEndID]
		i := strings.Index(text, bot)
		if i < 0 {
			return text, nil
		}
		normal = text[:i]
		rest := text[i:]
		for {
			j := strings.Index(rest, bot)
			if j < 0 {
				break
			}
			rest = rest[j+len(bot):]
			k := strings.Index(rest, eot)
			if k < 0 {
				break
			}
			c, ok := parseJSONCall(rest[:k], st)
			rest = rest[k+len(eot):]
			if ok && (!st.dropUnknown || tools[c.name]) {
				calls = append(calls, c)
			}
		}
	}
	if len(calls) == 0 {
		return text, nil
	}
	if st.strip {
		normal = strings.TrimSpace(normal)
	}
	return normal, calls
}

// parseJSONCall reads {"name": N, "arguments": A} (or "parameters").
func parseJSONCall(payload string, st parserStyle) (parsedCall, bool) {
	obj, ok := asObject(json.RawMessage(strings.TrimSpace(payload)))
	if !ok {
		return parsedCall{}, false
	}
	name, _ := asString(obj["name"])
	if name == "" {
		return parsedCall{}, false
	}
	args := obj["arguments"]
	if st.paramsKey && truthy(obj["parameters"]) {
		args = obj["parameters"]
	}
	if args == nil {
		args = json.RawMessage("{}")
	}
	return parsedCall{name: name, args: pyDumps(args), index: -1}, true
}
