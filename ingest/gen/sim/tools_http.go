package sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// The HTTP side of the tool-calling model (tools.go): the tools and
// tool_calls of a request, each flavor's parsed answer, SGLang's
// /parse_function_call (its /server_info, which names the parser, is the
// meters part's: metrics_pages.go). Facts from ../shared/tools-api.md
// (§2 SGLang, §3 vLLM, §4 llama.cpp) and the sources it cites:
//   - SGLang parses calls into tool_calls (content "" when there is no
//     other text, ids call_<24 hex>, or functions.N:K for kimi_k2 with K
//     counted over the request's history, finish_reason "tool_calls" in
//     place of "stop", matched_stop null) only when it runs a
//     --tool-call-parser; without one the markup stays in content. It
//     renders no tools with tool_choice "none". Its parser strips the text
//     before the markup and drops calls of tools the request did not give.
//   - vLLM refuses tools with tool_choice "auto" (the default when tools
//     are given) unless started with --enable-auto-tool-choice and
//     --tool-call-parser: 400 BadRequestError '"auto" tool choice requires
//     --enable-auto-tool-choice and --tool-call-parser to be set'
//     (serving_chat.py). Parsed: content the text before the markup as it
//     is (null when empty), ids chatcmpl-tool-<32 hex> (kimi_k2: the
//     model's functions.N:K), finish_reason "tool_calls".
//   - llama-server without --jinja answers a request with tools 500
//     {"error":{"code":500,"message":"tools param requires --jinja
//     flag","type":"server_error"}}, and one with a tool_choice 500
//     "Unsupported param: tool_choice" (oaicompat params parse). With
//     jinja (the default) calls come back parsed: content "" when empty,
//     ids of 32 random letters and digits (random_string), finish_reason
//     "tool_calls".
//   - /parse_function_call {text, tools, tool_call_parser} ->
//     {normal_text, calls:[{tool_index, name, parameters, tool_call_id}]}
//     (http_server.py); a missing or unknown tool_call_parser raises a
//     ValueError nothing catches: 500 "Internal Server Error".
//
// sim: tool_choice "required" or a named function (structured outputs on
// the real servers) is refused with a 400 saying so; gendex sends "auto".

// SimulatedToolParsers lists the --tool-call-parser names the simulator
// speaks per flavor (llama.cpp takes none: its format comes from the chat
// template).
var SimulatedToolParsers = map[string][]string{
	FlavorSGLang: {"qwen25", "qwen", "hermes", "kimi_k2"},
	FlavorVLLM:   {"hermes", "kimi_k2"},
}

// sglangToolParsers are the names SGLang's FunctionCallParser knows
// (tools-api.md §2a); a name outside them is its ValueError.
var sglangToolParsers = strings.Fields("apertus2509 cohere_command4 deepseekv3 deepseekv31 deepseekv32 deepseekv4 dots glm glm45 glm47 gpt-oss k2_horizon kimi_k2 kimi_k3 lfm2 ling3 llama3 mimo minicpm5 mistral muse poolside_v1 pythonic qwen qwen25 qwen3_coder spark25 step3 step3p5 minimax-m2 minimax-m3 trinity interns1 hermes hunyuan gigachat3 gigachat35 gemma4 inkling")

// toolRequest is what a request says about tools.
type toolRequest struct {
	lines  [][]byte        // each tool as compact JSON, for the template
	names  map[string]bool // the tools' names
	choice string          // "auto" or "none"
}

// calling reports whether the request lets the model call a tool.
func (t *toolRequest) calling() bool { return t != nil && len(t.names) > 0 && t.choice != "none" }

// readTools reads a request's tools and tool_choice (the default is
// "auto" with tools, "none" without).
func readTools(m map[string]json.RawMessage) (*toolRequest, *apiError) {
	t := &toolRequest{names: map[string]bool{}, choice: "none"}
	if raw := m["tools"]; !isNull(raw) {
		list, ok := asArray(raw)
		if !ok {
			return nil, validationError(fieldError{typ: "list_type", loc: []any{"body", "tools"}, msg: "Input should be a valid list"})
		}
		for i, e := range list {
			tool, _ := asObject(e)
			fn, ok := asObject(tool["function"])
			if !ok {
				return nil, validationError(fieldError{typ: "missing", loc: []any{"body", "tools", i, "function"}, msg: "Field required"})
			}
			name, ok := asString(fn["name"])
			if !ok {
				return nil, validationError(fieldError{typ: "missing", loc: []any{"body", "tools", i, "function", "name"}, msg: "Field required"})
			}
			t.lines = append(t.lines, marshal(e)) // compact, as sent
			t.names[name] = true
		}
		if len(list) > 0 {
			t.choice = "auto"
		}
	}
	switch c := m["tool_choice"]; jsonKind(c) {
	case "", "null":
	case "string":
		s, _ := asString(c)
		if s != "auto" && s != "none" {
			return nil, httpError(http.StatusBadRequest, "BadRequestError", "sim: tool_choice "+strconv.Quote(s)+" is not simulated (gendex sends \"auto\")")
		}
		t.choice = s
	default:
		return nil, httpError(http.StatusBadRequest, "BadRequestError", "sim: a named tool_choice is not simulated (gendex sends \"auto\")")
	}
	return t, nil
}

// attachToolCalls reads the tool_calls of a request's messages into msgs
// (parsed from the same list), arguments a JSON object or a string of one.
func attachToolCalls(raw json.RawMessage, msgs []chatMessage) *apiError {
	list, _ := asArray(raw)
	for i, e := range list {
		m, _ := asObject(e)
		calls, _ := asArray(m["tool_calls"])
		if i >= len(msgs) {
			break
		}
		for _, c := range calls {
			cm, _ := asObject(c)
			fn, _ := asObject(cm["function"])
			name, _ := asString(fn["name"])
			args := fn["arguments"]
			if str, ok := asString(args); ok {
				args = json.RawMessage(str)
			}
			switch {
			case isNull(args) || len(strings.TrimSpace(string(args))) == 0:
				args = json.RawMessage("{}")
			case !json.Valid(args):
				return valueError("Assistant tool call function.arguments must be valid JSON.")
			case jsonKind(args) != "object":
				return valueError("Assistant tool call function.arguments must be a JSON object.")
			}
			msgs[i].toolCalls = append(msgs[i].toolCalls, toolCall{name: name, args: pyDumps(args)})
		}
	}
	return nil
}

// historyCalls counts the tool calls of a request's messages.
func historyCalls(msgs []chatMessage) int {
	n := 0
	for _, m := range msgs {
		n += len(m.toolCalls)
	}
	return n
}

// promptLines are the tools the chat template renders for request m:
// none without Config.ToolCalls, and none on SGLang with tool_choice
// "none".
func (t *toolModel) promptLines(m map[string]json.RawMessage) [][]byte {
	if !t.cfg.ToolCalls || (t.cfg.Flavor == FlavorLlamaCpp && t.cfg.NoJinja) {
		return nil
	}
	req, err := readTools(m)
	if err != nil || (req.choice == "none" && t.cfg.Flavor == FlavorSGLang) {
		return nil
	}
	return req.lines
}

// randomHex returns n random hex digits.
func randomHex(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}

// randomAlnum returns n random letters and digits, as llama.cpp's
// random_string.
func randomAlnum(n int) string {
	const chars = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, n)
	rand.Read(b)
	for i := range b {
		b[i] = chars[int(b[i])%len(chars)]
	}
	return string(b)
}

// sglangCalls are SGLang's tool_calls for parsed calls; history is the
// number of calls in the request's messages.
func (t *toolModel) sglangCalls(calls []parsedCall, history int) []any {
	out := make([]any, len(calls))
	for i, c := range calls {
		id := "call_" + randomHex(24)
		if t.cfg.ToolCallParser == "kimi_k2" {
			id = "functions." + c.name + ":" + strconv.Itoa(history+i)
		}
		out[i] = json.RawMessage(orderedJSON([]kv{{"id", id}, {"index", i}, {"type", "function"},
			{"function", orderedJSON([]kv{{"name", c.name}, {"arguments", c.args}})}}))
	}
	return out
}

// vllmToolCalls are vLLM's tool_calls for parsed calls.
func vllmToolCalls(calls []parsedCall) []byte {
	out := make([][]byte, len(calls))
	for i, c := range calls {
		id := c.modelID
		if id == "" {
			id = "chatcmpl-tool-" + randomHex(32)
		}
		out[i] = orderedJSON([]kv{{"id", id}, {"type", "function"},
			{"function", orderedJSON([]kv{{"name", c.name}, {"arguments", c.args}})}})
	}
	return jsonList(out...)
}

// llamaToolCalls are llama-server's tool_calls for parsed calls.
func llamaToolCalls(calls []parsedCall) []byte {
	out := make([][]byte, len(calls))
	for i, c := range calls {
		out[i] = orderedJSON([]kv{{"type", "function"},
			{"function", orderedJSON([]kv{{"name", c.name}, {"arguments", string(compactJSON(c.args))}})}, {"id", randomAlnum(32)}})
	}
	return jsonList(out...)
}

// compactJSON removes the insignificant spaces of a JSON text, as
// nlohmann's dump() writes it.
func compactJSON(s string) []byte {
	var b strings.Builder
	in := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in && c == '\\' && i+1 < len(s):
			b.WriteByte(c)
			i++
			c = s[i]
		case c == '"':
			in = !in
		case !in && (c == ' ' || c == '\n' || c == '\t' || c == '\r'):
			continue
		}
		b.WriteByte(c)
	}
	return []byte(b.String())
}

// handleParseFunctionCall serves SGLang's POST /parse_function_call.
func (t *toolModel) handleParseFunctionCall(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(r)
	if !ok {
		return
	}
	if err := checkJSONContentType(r.Header.Get("Content-Type")); err != nil {
		writeOpenAIError(w, err)
		return
	}
	m, err := decodeBody(body, "Input should be a dictionary or an instance of ParseFunctionCallReq")
	if err == nil {
		if isNull(m["text"]) {
			err = validationError(fieldError{typ: "missing", loc: []any{"body", "text"}, msg: "Field required"})
		} else {
			err = checkFields(m, map[string]kind{"text": kStr, "tool_call_parser": kStr})
		}
	}
	var tools *toolRequest
	if err == nil {
		tools, err = readTools(map[string]json.RawMessage{"tools": m["tools"]})
	}
	if err != nil {
		writeOpenAIError(w, err)
		return
	}
	parser, _ := asString(m["tool_call_parser"])
	if !slices.Contains(sglangToolParsers, parser) {
		writeInternalError(w) // FunctionCallParser's ValueError, uncaught
		return
	}
	if !slices.Contains(SimulatedToolParsers[FlavorSGLang], parser) {
		writeOpenAIError(w, httpError(http.StatusBadRequest, "BadRequestError", "sim: tool_call_parser "+strconv.Quote(parser)+
			" is not simulated (the simulator speaks "+strings.Join(SimulatedToolParsers[FlavorSGLang], ", ")+")"))
		return
	}
	text, _ := asString(m["text"])
	normal, calls := parseCalls(formatOf(parser), sglangParser, text, tools.names)
	items := make([][]byte, len(calls))
	for i, c := range calls {
		items[i] = orderedJSON([]kv{{"tool_index", c.index}, {"name", c.name}, {"parameters", c.args}, {"tool_call_id", nil}})
	}
	writeRaw(w, http.StatusOK, "application/json", orderedJSON([]kv{{"normal_text", normal}, {"calls", jsonList(items...)}}))
}
