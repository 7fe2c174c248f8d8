package ingest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"gendex/store"
)

func parseChat(t *testing.T, turns, tools string) ([]Turn, json.RawMessage, error) {
	t.Helper()
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(turns), &raw); err != nil {
		t.Fatal(err)
	}
	var tl []byte
	if tools != "" {
		tl = []byte(tools)
	}
	return ParseChat(raw, tl)
}

const weatherTool = `{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}`

// TestParseChatOpenAITools: an assistant turn's tool_calls (content null),
// a tool turn's tool_call_id and name, and the top-level tools are read as
// they are.
func TestParseChatOpenAITools(t *testing.T) {
	t.Parallel()
	got, tools, err := parseChat(t, `[{"role":"system","content":"s"},{"role":"user","content":"weather?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","name":"get_weather","content":"15C"},
		{"role":"assistant","content":"It is 15C."}]`, `[`+weatherTool+`]`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Turn{{Role: "system", Content: "s"}, {Role: "user", Content: "weather?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_1", Type: "function", Function: ToolFunction{Name: "get_weather", Arguments: `{"city": "Paris"}`}}}},
		{Role: "tool", Content: "15C", ToolCallID: "call_1", Name: "get_weather"},
		{Role: "assistant", Content: "It is 15C."}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("turns = %+v\nwant %+v", got, want)
	}
	if string(tools) != `[`+weatherTool+`]` {
		t.Errorf("tools = %s", tools)
	}
}

// TestParseChatShareGPTTools: glaive's function_call / observation turns,
// with tools as a JSON string of bare schemas, become an assistant call
// and its result, paired (the result takes the call's id and name), and
// the tools are wrapped; Hermes <tool_call> blocks in a gpt turn are its
// calls.
func TestParseChatShareGPTTools(t *testing.T) {
	t.Parallel()
	got, tools, err := parseChat(t, `[{"from":"human","value":"area?"},
		{"from":"function_call","value":"{\"name\": \"calculate_area\", \"arguments\": {\"shape\": \"rectangle\", \"dimensions\": [5, 3]}}"},
		{"from":"observation","value":"{\"area\": 15}"},
		{"from":"gpt","value":"15 square units."}]`,
		`"[{\"name\": \"calculate_area\", \"description\": \"d\", \"parameters\": {\"type\": \"object\"}}]"`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Turn{{Role: "user", Content: "area?"},
		{Role: "assistant", ToolCalls: []ToolCall{{ID: "call_2_1", Type: "function", Function: ToolFunction{Name: "calculate_area", Arguments: `{"shape":"rectangle","dimensions":[5,3]}`}}}},
		{Role: "tool", Content: `{"area": 15}`, ToolCallID: "call_2_1", Name: "calculate_area"},
		{Role: "assistant", Content: "15 square units."}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("turns = %+v\nwant %+v", got, want)
	}
	if want := `[{"type":"function","function":{"name":"calculate_area","description":"d","parameters":{"type":"object"}}}]`; string(tools) != want {
		t.Errorf("tools = %s\nwant %s", tools, want)
	}

	got, _, err = parseChat(t, `[{"from":"system","value":"sys"},{"from":"human","value":"weather?"},
		{"from":"gpt","value":"Let me look. <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}</tool_call>"},
		{"from":"tool","value":"<tool_response>\n{\"name\": \"get_weather\", \"content\": \"15C\"}\n</tool_response>"},
		{"from":"gpt","value":"It is 15C."}]`, `[`+weatherTool+`]`)
	if err != nil {
		t.Fatal(err)
	}
	if a := got[2]; a.Content != "Let me look." || len(a.ToolCalls) != 1 || a.ToolCalls[0].Function.Arguments != `{"city":"Paris"}` {
		t.Errorf("Hermes gpt turn = %+v", a)
	}
	if r := got[3]; r.Role != "tool" || r.Name != "get_weather" || r.ToolCallID != "call_3_1" {
		t.Errorf("Hermes tool turn = %+v", r)
	}
}

// TestParseChatToolErrors: bad tool input is refused with the turn and
// what is wrong.
func TestParseChatToolErrors(t *testing.T) {
	t.Parallel()
	call := func(name, args string) string {
		return `{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"` + name + `","arguments":` + args + `}}]}`
	}
	tools := `[` + weatherTool + `]`
	for _, tc := range []struct{ turns, tools, want string }{
		{`[{"role":"user","content":"q"},{"role":"tool","content":"15C"}]`, tools, "turn 2 is a tool result that answers no call"},
		{`[{"role":"user","content":"q"},` + call("get_weather", `"{}"`) + `,{"role":"tool","content":"a"},{"role":"tool","content":"b"}]`, tools, "turn 4 is a tool result that answers no call (turn 2 made 1 call(s)"},
		{`[{"role":"user","content":"q"},` + call("get_weather", `"{}"`) + `,{"role":"tool","tool_call_id":"x9","content":"a"}]`, tools, `turn 3: tool_call_id "x9" answers no open call of turn 2`},
		{`[{"role":"user","content":"q"},` + call("get_weather", `"{}"`) + `,{"role":"tool","name":"search","content":"a"}]`, tools, `turn 3: the result of tool "search" answers call "c1" of get_weather`},
		{`[{"role":"user","content":"q"},` + call("get_weather", `"{}"`) + `,{"role":"user","content":"and?"}]`, tools, "turn 3: call c1 of get_weather (turn 2) has no tool result"},
		{`[{"role":"user","content":"q"},` + call("get_weather", `"{city: Paris"`) + `]`, tools, "turn 2: tool call 1: get_weather: arguments {city: Paris are not a JSON object"},
		{`[{"role":"user","content":"q"},` + call("get_weather", `"[1]"`) + `]`, tools, "arguments [1] are not a JSON object"},
		{`[{"role":"user","content":"q"},` + call("search", `"{}"`) + `]`, tools, `turn 2 calls search, which the line's "tools" do not define (they define get_weather)`},
		{`[{"role":"user","content":"q"},` + call("get_weather", `"{}"`) + `]`, "", `turn 2 calls get_weather, but the line has no "tools"`},
		{`[{"role":"user","content":"q"}]`, `[{"type":"function","function":{"description":"x"}}]`, `"tools" item 1: not a function schema: no "name"`},
		{`[{"role":"user","content":"q"}]`, `"not json"`, `"tools" is not a list of function schemas`},
		{`[{"role":"user","content":"q"}]`, `[{"name":"f","parameters":"x"}]`, `"tools" item 1: f: "parameters" is not a JSON schema object`},
		{`[{"from":"human","value":"q"},{"from":"function_call","value":"get_weather(city=Paris)"}]`, tools, "turn 2: function_call value get_weather(city=Paris) is not JSON"},
		{`[{"role":"user","content":"q","tool_calls":[{"function":{"name":"get_weather"}}]}]`, tools, "turn 1: a user turn has tool calls"},
	} {
		if _, _, err := parseChat(t, tc.turns, tc.tools); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseChat(%s, %s) = %v\nwant an error with %q", tc.turns, tc.tools, err, tc.want)
		}
	}
	// Empty tools are none; a conversation without tool use needs none.
	for _, tl := range []string{`"[]"`, `[]`, `null`, `""`} {
		if _, tools, err := parseChat(t, `[{"role":"user","content":"q"}]`, tl); err != nil || tools != nil {
			t.Errorf("tools %s: %s, %v; want none", tl, tools, err)
		}
	}
}

// TestNormalizeToolStop: an answer line's "tool_stop" reason is its
// record's ToolStop (the index counts it per reason); null or absent is
// none, and one without a reason string is "unknown".
func TestNormalizeToolStop(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ line, want string }{
		{`{"id":"a","text":"x","completion_tokens":3,"finish_reason":"tool_calls","tool_stop":{"reason":"other_tool","step":2,"detail":"step 2: call 1: ..."}}`, "other_tool"},
		{`{"id":"a","text":"x","completion_tokens":3,"finish_reason":"stop","tool_stop":{"step":1}}`, "unknown"},
		{`{"id":"a","text":"x","completion_tokens":3,"finish_reason":"stop","tool_stop":null}`, ""},
		{`{"id":"a","text":"x","completion_tokens":3,"finish_reason":"stop"}`, ""},
	} {
		var rec store.Record
		st, err := Normalize([]byte(c.line), store.Raw, &rec)
		if err != nil || st != store.Raw || rec.ToolStop != c.want {
			t.Errorf("%s: stage %v, tool stop %q, %v; want raw, %q", c.line, st, rec.ToolStop, err, c.want)
		}
	}
}
