package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// testTools are two tools whose schemas exercise the argument generator:
// required and optional properties, an enum, numbers, a nested object and
// an array.
const testTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object",
 "properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["c","f"]},"days":{"type":"integer"}},"required":["city"]}}},
 {"type":"function","function":{"name":"search_code","parameters":{"type":"object",
 "properties":{"query":{"type":"string"},"limit":{"type":"number"},"exact":{"type":"boolean"},
 "paths":{"type":"array","items":{"type":"string"}},"range":{"type":"object","properties":{"start":{"type":"integer"},"end":{"type":"integer"}},"required":["start"]}},
 "required":["query","range"]}}}]`

// toolChat is a chat body asking question n with testTools; extra is
// added to the body's members.
func toolChat(n int, extra string) string {
	return fmt.Sprintf(`{"messages":[{"role":"user","content":"question %d"}],"tools":%s%s}`, n, testTools, extra)
}

// checkArgs checks a call's arguments against testTools' schemas.
func checkArgs(t *testing.T, name, args string) {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatalf("%s arguments %q: not a JSON object: %v", name, args, err)
	}
	allowed := map[string][]string{"get_weather": {"city", "unit", "days"}, "search_code": {"query", "limit", "exact", "paths", "range"}}[name]
	if allowed == nil {
		t.Fatalf("call of %q, a tool not given", name)
	}
	for k := range a {
		if !slices.Contains(allowed, k) {
			t.Errorf("%s arguments %s: %q is not in the schema", name, args, k)
		}
	}
	typed := func(k string, ok bool) {
		if v, has := a[k]; has && !ok {
			t.Errorf("%s arguments %s: %q = %v has the wrong type", name, args, k, v)
		}
	}
	switch name {
	case "get_weather":
		_, ok := a["city"].(string)
		if !ok {
			t.Errorf("get_weather arguments %s: the required city is missing or not a string", args)
		}
		u, _ := a["unit"].(string)
		typed("unit", u == "c" || u == "f")
		d, ok := a["days"].(float64)
		typed("days", ok && d == float64(int(d)))
	case "search_code":
		_, ok := a["query"].(string)
		r, rok := a["range"].(map[string]any)
		if !ok || !rok || r["start"] == nil {
			t.Errorf("search_code arguments %s: the required query, range or range.start is missing", args)
		}
		_, ok = a["exact"].(bool)
		typed("exact", ok)
		p, ok := a["paths"].([]any)
		typed("paths", ok && len(p) >= 1)
	}
}

// simCall is one call of a chat answer: its tool's name and arguments.
type simCall struct{ name, args string }

// callsOf returns the calls of a chat answer, in order; each one's
// arguments are checked against testTools.
func callsOf(t *testing.T, msg map[string]any) []simCall {
	t.Helper()
	var out []simCall
	for _, c := range arr(t, msg["tool_calls"]) {
		fn := obj(t, obj(t, c)["function"])
		out = append(out, simCall{str(t, fn["name"]), str(t, fn["arguments"])})
		checkArgs(t, out[len(out)-1].name, out[len(out)-1].args)
	}
	if len(out) == 0 || len(out) > 2 {
		t.Fatalf("%d tool calls, want 1 or 2: %v", len(out), msg)
	}
	return out
}

// callIDs returns the ids of a chat answer's calls.
func callIDs(t *testing.T, msg map[string]any) []string {
	t.Helper()
	var ids []string
	for _, c := range arr(t, msg["tool_calls"]) {
		ids = append(ids, str(t, obj(t, c)["id"]))
	}
	return ids
}

// TestToolCallsSGLang: with --tool-call-parser, some answers call a tool
// (name and arguments from its schema, finish_reason tool_calls,
// matched_stop null, content "" or the text before the call, an id
// call_<24 hex>), some two at once (parallel calls), the others are text;
// the same request gets the same answer; a call never appears with
// tool_choice "none".
func TestToolCallsSGLang(t *testing.T) {
	_, url := testServer(t, Config{ToolCalls: true, ToolCallParser: "qwen25"})
	idRe := regexp.MustCompile(`^call_[0-9a-f]{24}$`)
	calls, parallel, texts, named := 0, 0, 0, map[string]bool{}
	for n := range 40 {
		c := obj(t, arr(t, obj(t, postOK(t, url+"/v1/chat/completions", toolChat(n, "")))["choices"])[0])
		msg := obj(t, c["message"])
		if msg["tool_calls"] == nil {
			texts++
			if c["finish_reason"] != "stop" || strings.Contains(str(t, msg["content"]), "tool_call") {
				t.Errorf("question %d: a text answer with finish %v: %v", n, c["finish_reason"], msg)
			}
			continue
		}
		calls++
		cs := callsOf(t, msg)
		if len(cs) == 2 {
			parallel++
		}
		for _, c := range cs {
			named[c.name] = true
		}
		if c["finish_reason"] != "tool_calls" || c["matched_stop"] != nil || msg["content"] == nil {
			t.Errorf("question %d: a call with finish %v, matched_stop %v, content %v", n, c["finish_reason"], c["matched_stop"], msg["content"])
		}
		for _, id := range callIDs(t, msg) {
			if !idRe.MatchString(id) {
				t.Errorf("question %d: call id %q, want call_<24 hex>", n, id)
			}
		}
		again := obj(t, arr(t, obj(t, postOK(t, url+"/v1/chat/completions", toolChat(n, "")))["choices"])[0])
		if cs2 := callsOf(t, obj(t, again["message"])); !slices.Equal(cs, cs2) {
			t.Errorf("question %d asked twice: %v, then %v", n, cs, cs2)
		}
		none := obj(t, arr(t, obj(t, postOK(t, url+"/v1/chat/completions", toolChat(n, `,"tool_choice":"none"`)))["choices"])[0])
		if m := obj(t, none["message"]); m["tool_calls"] != nil || strings.Contains(str(t, m["content"]), "<tool_call>") {
			t.Errorf("question %d with tool_choice none: %v", n, m)
		}
	}
	if calls < 10 || texts < 10 || len(named) != 2 || parallel == 0 || parallel == calls {
		t.Errorf("40 questions: %d answers with calls (of %v; %d of them parallel), %d text answers; want some of each, both tools called", calls, named, parallel, texts)
	}
}

// TestToolCallMarkupWithoutParser: SGLang without --tool-call-parser
// leaves the model's markup in content (finish stop), the same call the
// parsing server returns.
func TestToolCallMarkupWithoutParser(t *testing.T) {
	_, plain := testServer(t, Config{ToolCalls: true})
	_, parsing := testServer(t, Config{ToolCalls: true, ToolCallParser: "qwen25"})
	seen := 0
	for n := range 20 {
		p := obj(t, arr(t, obj(t, postOK(t, parsing+"/v1/chat/completions", toolChat(n, "")))["choices"])[0])
		if obj(t, p["message"])["tool_calls"] == nil {
			continue
		}
		seen++
		var marks []string
		for _, c := range callsOf(t, obj(t, p["message"])) {
			marks = append(marks, "<tool_call>\n{\"name\": \""+c.name+"\", \"arguments\": "+c.args+"}\n</tool_call>")
		}
		c := obj(t, arr(t, obj(t, postOK(t, plain+"/v1/chat/completions", toolChat(n, "")))["choices"])[0])
		m := obj(t, c["message"])
		want := strings.Join(marks, "\n")
		if m["tool_calls"] != nil || c["finish_reason"] != "stop" || !strings.HasSuffix(str(t, m["content"]), want) {
			t.Errorf("question %d without a parser: finish %v, message %v; want the markup %q in content, finish stop", n, c["finish_reason"], m, want)
		}
	}
	if seen == 0 {
		t.Fatal("no call in 20 questions")
	}
}

// TestToolCallGenerateRoundTrip: /v1/tokenize with messages and tools,
// then /generate of its ids, answers the markup in text and output ids,
// and /parse_function_call of that text gives the chat endpoint's call;
// for Qwen's markup and Kimi-K2's (whose markers are special tokens,
// kept with skip_special_tokens false).
func TestToolCallGenerateRoundTrip(t *testing.T) {
	for _, parser := range []string{"qwen25", "kimi_k2"} {
		t.Run(parser, func(t *testing.T) {
			_, url := testServer(t, Config{ToolCalls: true, ToolCallParser: parser})
			marker := map[string]int{"qwen25": ToolCallStartID, "kimi_k2": KimiSectionBeginID}[parser]
			seen := 0
			for n := range 20 {
				chat := obj(t, arr(t, obj(t, postOK(t, url+"/v1/chat/completions", toolChat(n, `,"return_prompt_token_ids":true`)))["choices"])[0])
				tok := obj(t, postOK(t, url+"/v1/tokenize", toolChat(n, "")))
				if !reflect.DeepEqual(ints(t, tok["tokens"]), ints(t, chat["prompt_token_ids"])) {
					t.Fatalf("question %d: /v1/tokenize and chat render different prompts", n)
				}
				gen := obj(t, postOK(t, url+"/generate", fmt.Sprintf(`{"input_ids":%s,"sampling_params":{"skip_special_tokens":false,"max_new_tokens":1000}}`, marshal(ints(t, tok["tokens"])))))
				msg := obj(t, chat["message"])
				if msg["tool_calls"] == nil {
					if slices.Contains(ints(t, gen["output_ids"]), marker) {
						t.Errorf("question %d: /generate calls where chat did not", n)
					}
					continue
				}
				seen++
				if !slices.Contains(ints(t, gen["output_ids"]), marker) {
					t.Errorf("question %d: chat calls, /generate's output ids have no call marker", n)
				}
				if parser == "qwen25" { // Qwen's markers are not special: skipping special tokens keeps them
					plain := obj(t, postOK(t, url+"/generate", fmt.Sprintf(`{"input_ids":%s,"sampling_params":{"max_new_tokens":1000}}`, marshal(ints(t, tok["tokens"])))))
					if plain["text"] != gen["text"] {
						t.Errorf("question %d: skip_special_tokens changes Qwen's call: %q, not %q", n, plain["text"], gen["text"])
					}
				}
				cs := callsOf(t, msg)
				resp, raw := post(t, url+"/parse_function_call", fmt.Sprintf(`{"text":%s,"tool_call_parser":%q,"tools":%s}`, marshal(gen["text"]), parser, testTools))
				if resp.StatusCode != 200 || !regexp.MustCompile(`"calls":\[\{"tool_index":-?\d+,"name":"[a-z_]+","parameters":"[^\n]*","tool_call_id":null\}(,\{"tool_index":-?\d+,"name":"[a-z_]+","parameters":"[^\n]*","tool_call_id":null\})?\]\}$`).Match(raw) {
					t.Fatalf("question %d: /parse_function_call answers %d %s", n, resp.StatusCode, raw)
				}
				parsed := obj(t, decode(t, raw))
				var pcs []simCall
				for _, c := range arr(t, parsed["calls"]) {
					pcs = append(pcs, simCall{str(t, obj(t, c)["name"]), str(t, obj(t, c)["parameters"])})
				}
				if !slices.Equal(pcs, cs) {
					t.Errorf("question %d: /parse_function_call gives %v, chat %v", n, parsed, cs)
				}
				if parsed["normal_text"] != msg["content"] {
					t.Errorf("question %d: normal_text %q, chat content %q", n, parsed["normal_text"], msg["content"])
				}
				if parser == "kimi_k2" {
					for k, id := range callIDs(t, msg) {
						if want := fmt.Sprintf("functions.%s:%d", cs[k].name, k); id != want {
							t.Errorf("question %d: kimi_k2 call id %q, want %s", n, id, want)
						}
					}
				}
			}
			if seen == 0 {
				t.Fatal("no call in 20 questions")
			}
		})
	}
}

// TestParseFunctionCallRefusals: SGLang's answers to a request without a
// parser (its uncaught ValueError), without text, and without tools.
func TestParseFunctionCallRefusals(t *testing.T) {
	_, url := testServer(t, Config{})
	text := `<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>`
	for _, c := range []struct {
		body, want string
		status     int
	}{
		{`{"text":"` + text + `","tools":` + testTools + `}`, "Internal Server Error", 500},
		{`{"text":"` + text + `","tool_call_parser":"nope","tools":` + testTools + `}`, "Internal Server Error", 500},
		{`{"tool_call_parser":"qwen25"}`, "Field required", 400},
		{`{"text":"x","tool_call_parser":"glm45","tools":` + testTools + `}`, "not simulated", 400},
		{`{"text":"` + text + `","tool_call_parser":"qwen25"}`, `"calls":[]`, 200},
		{`{"text":"` + text + `","tool_call_parser":"qwen25","tools":[{"type":"function","function":{"name":"other"}}]}`, `"calls":[]`, 200},
		{`{"text":"` + text + `","tool_call_parser":"qwen25","tools":` + testTools + `}`, `"parameters":"{\"city\": \"Paris\"}"`, 200},
	} {
		resp, b := post(t, url+"/parse_function_call", c.body)
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.want) {
			t.Errorf("POST /parse_function_call %s: %d %s; want %d with %q", c.body, resp.StatusCode, b, c.status, c.want)
		}
	}
	if b := decode(t, func() []byte { _, b := do(t, http.MethodGet, url+"/server_info", "", ""); return b }()); obj(t, b)["tool_call_parser"] != nil {
		t.Errorf("/server_info without a parser: tool_call_parser %v, want null", obj(t, b)["tool_call_parser"])
	}
}

// TestToolHistoryRendered: an assistant turn's tool_calls (arguments a
// string or an object) render as the model's markup, so the history of a
// regenerated conversation is the model's own bytes; arguments that are
// not JSON are SGLang's 400.
func TestToolHistoryRendered(t *testing.T) {
	_, url := testServer(t, Config{ToolCalls: true, ToolCallParser: "qwen25"})
	want := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>"
	for _, args := range []string{`"{\"city\":\"Paris\",\"days\":2}"`, `{"city":"Paris","days":2}`} {
		body := `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":` + args + `}}]},{"role":"tool","tool_call_id":"c1","content":"15C"}],"tools":` + testTools + `}`
		got := Decode(ints(t, obj(t, postOK(t, url+"/v1/tokenize", body))["tokens"]), false)
		if !strings.Contains(got, want) || !strings.Contains(got, "<tools>\n{\"type\":\"function\"") {
			t.Errorf("arguments %s rendered as %q; want the tools block and %q", args, got, want)
		}
	}
	resp, b := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"get_weather","arguments":"{oops"}}]}],"tools":`+testTools+`}`)
	if resp.StatusCode != 400 || !strings.Contains(errMessage(t, b), "must be valid JSON") {
		t.Errorf("arguments that are not JSON: %d %s", resp.StatusCode, b)
	}
}

// TestToolsIgnoredWithoutToolCalls: without Config.ToolCalls a request's
// tools change nothing, as before.
func TestToolsIgnoredWithoutToolCalls(t *testing.T) {
	for _, flavor := range Flavors {
		_, url := testServer(t, Config{Flavor: flavor})
		with := obj(t, postOK(t, url+"/v1/chat/completions", toolChat(1, `,"seed":3`)))
		without := obj(t, postOK(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"question 1"}],"seed":3}`))
		if !reflect.DeepEqual(with["choices"], without["choices"]) {
			t.Errorf("%s: tools changed the answer: %v, without %v", flavor, with["choices"], without["choices"])
		}
	}
}

// TestToolCallsVLLM: vLLM refuses tools with tool_choice auto unless
// started with --enable-auto-tool-choice and --tool-call-parser, takes
// them with "none"; with both flags calls come back parsed (id
// chatcmpl-tool-, content null when empty, finish tool_calls), the raw ids
// in token_ids, and /tokenize with tools renders chat's prompt.
func TestToolCallsVLLM(t *testing.T) {
	_, bare := testServer(t, Config{Flavor: FlavorVLLM, ToolCalls: true, ToolCallParser: "hermes"})
	resp, b := post(t, bare+"/v1/chat/completions", toolChat(1, ""))
	want := `{"error":{"message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}`
	if resp.StatusCode != 400 || string(b) != want {
		t.Errorf("vLLM without --enable-auto-tool-choice: %d %s\nwant 400 %s", resp.StatusCode, b, want)
	}
	postOK(t, bare+"/v1/chat/completions", toolChat(1, `,"tool_choice":"none"`))

	_, url := testServer(t, Config{Flavor: FlavorVLLM, ToolCalls: true, ToolCallParser: "hermes", EnableAutoToolChoice: true})
	seen := 0
	for n := range 20 {
		a := obj(t, postOK(t, url+"/v1/chat/completions", toolChat(n, `,"return_token_ids":true`)))
		c := obj(t, arr(t, a["choices"])[0])
		msg := obj(t, c["message"])
		tok := obj(t, postOK(t, url+"/tokenize", toolChat(n, "")))
		if !reflect.DeepEqual(ints(t, tok["tokens"]), ints(t, a["prompt_token_ids"])) {
			t.Fatalf("question %d: /tokenize and chat render different prompts", n)
		}
		if len(arr(t, msg["tool_calls"])) == 0 {
			continue
		}
		seen++
		cs := callsOf(t, msg)
		for _, id := range callIDs(t, msg) {
			if !strings.HasPrefix(id, "chatcmpl-tool-") {
				t.Errorf("question %d: call id %q", n, id)
			}
		}
		marks := 0
		for _, id := range ints(t, c["token_ids"]) {
			if id == ToolCallStartID {
				marks++
			}
		}
		if c["finish_reason"] != "tool_calls" || msg["content"] == "" || marks != len(cs) {
			t.Errorf("question %d: finish %v, content %v, %d call(s), token_ids %v", n, c["finish_reason"], msg["content"], len(cs), c["token_ids"])
		}
	}
	if seen == 0 {
		t.Fatal("no call in 20 questions")
	}
}

// TestToolCallsLlamaCpp: llama-server answers tools with a 500 under
// --no-jinja, and with jinja returns parsed calls (ids of 32 letters and
// digits, compact arguments, finish tool_calls): one per answer unless the
// request sets parallel_tool_calls, then some answers make two.
func TestToolCallsLlamaCpp(t *testing.T) {
	_, nj := testServer(t, Config{Flavor: FlavorLlamaCpp, ToolCalls: true, NoJinja: true})
	resp, b := post(t, nj+"/v1/chat/completions", toolChat(1, ""))
	if want := `{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}`; resp.StatusCode != 500 || string(b) != want {
		t.Errorf("llama.cpp --no-jinja with tools: %d %s\nwant 500 %s", resp.StatusCode, b, want)
	}
	_, url := testServer(t, Config{Flavor: FlavorLlamaCpp, ToolCalls: true})
	idRe := regexp.MustCompile(`^[0-9A-Za-z]{32}$`)
	for _, extra := range []string{"", `,"parallel_tool_calls":true`} {
		seen, parallel := 0, 0
		for n := range 40 {
			c := obj(t, arr(t, obj(t, postOK(t, url+"/v1/chat/completions", toolChat(n, extra)))["choices"])[0])
			msg := obj(t, c["message"])
			if msg["tool_calls"] == nil {
				continue
			}
			seen++
			cs := callsOf(t, msg)
			if len(cs) > 1 {
				parallel++
			}
			for k, id := range callIDs(t, msg) {
				if !idRe.MatchString(id) || strings.Contains(cs[k].args, ": ") {
					t.Errorf("question %d: id %q, arguments %s", n, id, cs[k].args)
				}
			}
			if c["finish_reason"] != "tool_calls" || msg["content"] == nil {
				t.Errorf("question %d: finish %v, content %v", n, c["finish_reason"], msg["content"])
			}
		}
		if seen == 0 || (extra == "") != (parallel == 0) {
			t.Errorf("40 questions (body%s): %d with calls, %d of them parallel", extra, seen, parallel)
		}
	}
}
