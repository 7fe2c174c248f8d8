package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// toolShape is a tool dataset's shape as the tests know it: per user turn,
// the names of the tools whose results the data recorded, in order, and
// the calls the data ends at with no result.
type toolShape struct {
	results [][]string
	open    []string
}

// Two tools every line below offers, so that the model can call another.
const (
	twoToolsOpenAI = `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},` +
		`{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}]`
	twoToolsGlaive = `"[{\"name\": \"get_weather\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}, ` +
		`{\"name\": \"search\", \"parameters\": {\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}}, \"required\": [\"q\"]}}]"`
)

// toolShapes are the shapes of function-calling and agent sets, each a
// line for prompt i and its toolShape:
//   - atcall: a query, the tools, the assistant's call (most sets);
//   - atpar: the same ending at two parallel calls;
//   - result: a call, its result, the final answer;
//   - gatcall, gresult: glaive's function_call / observation, ending at
//     the call or with the answer;
//   - traj: an OpenAI agent trajectory over two user turns: parallel calls
//     and their results, a call and its result, an answer; then a call and
//     its result, a call left open.
var toolShapes = []struct {
	name  string
	line  func(i int) string
	shape toolShape
}{
	{"atcall", func(i int) string {
		return fmt.Sprintf(`{"id":"atcall%d","tools":%s,"messages":[{"role":"user","content":"Weather in town %d?"},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"T%d\"}"}}]}]}`, i, twoToolsOpenAI, i, i)
	}, toolShape{results: [][]string{nil}, open: []string{"get_weather"}}},
	{"atpar", func(i int) string {
		return fmt.Sprintf(`{"id":"atpar%d","tools":%s,"messages":[{"role":"system","content":"You help."},{"role":"user","content":"Weather and news of town %d?"},`+
			`{"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"T%d\"}"}},`+
			`{"id":"b","type":"function","function":{"name":"search","arguments":"{\"q\": \"T%d news\"}"}}]}]}`, i, twoToolsOpenAI, i, i, i)
	}, toolShape{results: [][]string{nil}, open: []string{"get_weather", "search"}}},
	{"result", func(i int) string {
		return fmt.Sprintf(`{"id":"result%d","tools":%s,"messages":[{"role":"user","content":"Weather in city %d?"},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"C%d\"}"}}]},`+
			`{"role":"tool","tool_call_id":"c1","content":"%dC"},{"role":"assistant","content":"It is %dC."}]}`, i, twoToolsOpenAI, i, i, i, i)
	}, toolShape{results: [][]string{{"get_weather"}}}},
	{"gatcall", func(i int) string {
		return fmt.Sprintf(`{"id":"gatcall%d","tools":%s,"conversations":[{"from":"human","value":"Find %d cats"},`+
			`{"from":"function_call","value":"{\"name\": \"search\", \"arguments\": {\"q\": \"%d cats\"}}"}]}`, i, twoToolsGlaive, i, i)
	}, toolShape{results: [][]string{nil}, open: []string{"search"}}},
	{"gresult", func(i int) string {
		return fmt.Sprintf(`{"id":"gresult%d","tools":%s,"conversations":[{"from":"human","value":"Find %d dogs"},`+
			`{"from":"function_call","value":"{\"name\": \"search\", \"arguments\": {\"q\": \"%d dogs\"}}"},`+
			`{"from":"observation","value":"{\"hits\": %d}"},{"from":"gpt","value":"%d hits."}]}`, i, twoToolsGlaive, i, i, i, i)
	}, toolShape{results: [][]string{{"search"}}}},
	{"traj", func(i int) string {
		return fmt.Sprintf(`{"id":"traj%d","tools":%s,"messages":[{"role":"system","content":"You plan trips."},{"role":"user","content":"Plan day %d."},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"p1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Rome\"}"}},`+
			`{"id":"p2","type":"function","function":{"name":"search","arguments":"{\"q\": \"Rome day %d\"}"}}]},`+
			`{"role":"tool","tool_call_id":"p1","content":"sunny"},{"role":"tool","tool_call_id":"p2","content":"museums"},`+
			`{"role":"assistant","content":"Checking more.","tool_calls":[{"id":"s1","type":"function","function":{"name":"search","arguments":"{\"q\": \"tickets\"}"}}]},`+
			`{"role":"tool","tool_call_id":"s1","content":"sold out"},{"role":"assistant","content":"Sunny; museums sold out."},`+
			`{"role":"user","content":"And day %d?"},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"q1","type":"function","function":{"name":"search","arguments":"{\"q\": \"day %d\"}"}}]},`+
			`{"role":"tool","tool_call_id":"q1","name":"search","content":"open"},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"q2","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Rome\"}"}}]}]}`,
			i, twoToolsOpenAI, i, i, i+1, i+1)
	}, toolShape{results: [][]string{{"get_weather", "search", "search"}, {"search"}}, open: []string{"get_weather"}}},
}

// toolShapeDataset writes n prompts of each of toolShapes, and returns the
// dataset and each prompt's shape by id.
func toolShapeDataset(t *testing.T, n int) (string, map[string]toolShape) {
	t.Helper()
	var lines []string
	shapes := map[string]toolShape{}
	for _, s := range toolShapes {
		for i := range n {
			lines = append(lines, s.line(i))
			shapes[fmt.Sprint(s.name, i)] = s.shape
		}
	}
	return toolDataset(t, lines...), shapes
}

// stepSeen is a regenerated step as its raw line has it.
type stepSeen struct {
	Text         *string `json:"text"`
	FinishReason string  `json:"finish_reason"`
	UserTurn     int     `json:"user_turn"`
	Results      []int   `json:"results"`
	ToolCalls    []struct {
		ID       string `json:"id"`
		Function struct{ Name string }
	} `json:"tool_calls"`
}

func (s stepSeen) names() []string {
	var out []string
	for _, c := range s.ToolCalls {
		out = append(out, c.Function.Name)
	}
	return out
}

// wantToolStop is the stop README's table calls for where the model made
// steps on data of shape sh ("" for none): the k-th call of a user turn
// is of the k-th recorded result's tool, then of the calls the data ends
// at (no stop: the conversation ends there, as the data's does); text
// where the data called at the last user turn is no_call, more calls than
// that more_calls, another tool other_tool. An error says the steps went
// on past where the conversation ends.
func wantToolStop(sh toolShape, steps []stepSeen) (string, error) {
	u, used := 0, 0
	for i, st := range steps {
		over := func(reason string) (string, error) {
			if i != len(steps)-1 {
				return "", fmt.Errorf("step %d ends the conversation (%q), yet %d steps follow", i+1, reason, len(steps)-i-1)
			}
			return reason, nil
		}
		if st.FinishReason == "length" {
			return over("")
		}
		last := u == len(sh.results)-1
		left := sh.results[u][used:]
		calls := st.names()
		switch {
		case len(calls) == 0 && last && len(left)+len(sh.open) > 0:
			return over("no_call")
		case len(calls) == 0:
			if u, used = u+1, 0; u == len(sh.results) {
				return over("")
			}
			continue
		case len(calls) > len(left) && (!last || len(calls) > len(left)+len(sh.open)):
			return over("more_calls")
		}
		want := append(slices.Clone(left), sh.open...)
		for k, c := range calls {
			if c != want[k] {
				return over("other_tool")
			}
		}
		if len(calls) > len(left) {
			return over("")
		}
		used += len(calls)
	}
	return "", fmt.Errorf("the conversation ends at step %d, yet its data goes on", len(steps))
}

// simToolFlavors are the simulator's tool-calling flavors the tests run:
// SGLang (/generate, its parser read from /server_info) and vLLM (chat
// with auto tool choice).
var simToolFlavors = []struct {
	name string
	args []string
}{
	{"sglang", []string{"--sim-tool-calls", "--sim-tool-call-parser", "qwen25"}},
	{"vllm", []string{"--sim-tool-calls", "--sim-flavor", "vllm", "--sim-tool-call-parser", "hermes", "--sim-enable-auto-tool-choice"}},
}

// TestToolStopsNamedByWhatTheModelDid: on every data shape (ending at the
// assistant's call, at parallel calls, with results, glaive's, an agent
// trajectory with sequential and parallel calls) against the simulator's
// tool-calling model as SGLang and as vLLM, each raw line's tool_stop is
// the one the model's steps call for (README's table): none where the
// model called the tools the data ends calling, other_tool, no_call,
// more_calls where it departed; each happens. gen's summary, query stops
// and --exclude-tool-stops say the same: the stopped are excluded, the
// others kept, those ending at the model's call with that call last.
// (Before, the data's own call was more_calls and text where the data
// ends calling had no stop.)
func TestToolStopsNamedByWhatTheModelDid(t *testing.T) {
	t.Parallel()
	for _, fl := range simToolFlavors {
		dir, shapes := toolShapeDataset(t, 24)
		db := filepath.Join(t.TempDir(), "g.db")
		args := append([]string{"--db", db, "gen", "--server", "sim", "--max-new-tokens", "400", "--include-truncated",
			"--export", "conversations", "--exclude-tool-stops"}, fl.args...)
		r := gendex(t, testEnv(nil), append(args, dir)...)
		if r.code != 0 {
			t.Fatalf("%s: %s", fl.name, r)
		}
		raws := readRecords(t, filepath.Join(dir, "raw_responses.jsonl"))
		if len(raws) != len(shapes) {
			t.Fatalf("%s: %d answers; want %d", fl.name, len(raws), len(shapes))
		}
		stopped := map[string]string{} // id -> reason
		byReason := map[string]int{}
		endedAtCall := map[string]bool{} // shape -> a conversation ended at the model's call, no stop
		seen := map[string]map[string]int{}
		for _, l := range raws {
			var id string
			var steps []stepSeen
			var st struct{ Reason string }
			json.Unmarshal(l["id"], &id)
			if err := json.Unmarshal(l["turns"], &steps); err != nil || len(steps) == 0 {
				t.Fatalf("%s: %s: turns %s", fl.name, id, l["turns"])
			}
			json.Unmarshal(l["tool_stop"], &st)
			want, err := wantToolStop(shapes[id], steps)
			if err != nil {
				t.Errorf("%s: %s: %v", fl.name, id, err)
				continue
			}
			if st.Reason != want {
				t.Errorf("%s: %s: tool_stop %q, want %q; steps %s", fl.name, id, st.Reason, want, l["turns"])
			}
			shape := strings.TrimRight(id, "0123456789")
			if seen[shape] == nil {
				seen[shape] = map[string]int{}
			}
			seen[shape][want]++
			if want != "" {
				stopped[id] = want
				byReason[want]++
			} else if lastStep := steps[len(steps)-1]; len(lastStep.ToolCalls) > 0 && lastStep.FinishReason != "length" {
				endedAtCall[shape] = true
			}
		}
		t.Logf("%s: outcomes by shape: %v", fl.name, seen)
		for _, reason := range []string{"other_tool", "more_calls", "no_call"} {
			if byReason[reason] == 0 {
				t.Errorf("%s: no %s stop in %d conversations: the test needs each", fl.name, reason, len(raws))
			}
		}
		for _, shape := range []string{"atcall", "gatcall", "atpar"} {
			if !endedAtCall[shape] || seen[shape]["no_call"] == 0 {
				t.Errorf("%s: %s: the model never ended at the data's call, or never answered in text there: %v", fl.name, shape, seen[shape])
			}
		}

		// gen's summary and query stops count the same.
		var parts []string
		for _, reason := range []string{"other_tool", "more_calls", "no_call"} {
			if c := byReason[reason]; c > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", reason, c))
			}
		}
		if want := fmt.Sprintf("%d stopped where the model departed from the data (%s)", len(stopped), strings.Join(parts, ", ")); !strings.Contains(r.stderr, want) {
			t.Errorf("%s: summary lacks %q:\n%s", fl.name, want, r.stderr)
		}
		q := gendex(t, testEnv(nil), "--db", db, "query", "--format", "json", "stops", "tools")
		var rows []map[string]any
		if q.code != 0 || json.Unmarshal([]byte(q.stdout), &rows) != nil || len(rows) != 1 {
			t.Fatalf("%s: query stops: %s", fl.name, q)
		}
		for _, reason := range []string{"other_tool", "more_calls", "no_call"} {
			if got := rows[0][reason]; got != float64(byReason[reason]) {
				t.Errorf("%s: query stops %s %v, want %d", fl.name, reason, got, byReason[reason])
			}
		}

		// --exclude-tool-stops: the stopped excluded, the others kept; a
		// conversation that ended at the model's call ends with that call.
		excluded := map[string]bool{}
		if b, _ := os.ReadFile(filepath.Join(dir, "excluded.jsonl")); len(b) > 0 {
			for _, l := range readRecords(t, filepath.Join(dir, "excluded.jsonl")) {
				var id, reason string
				json.Unmarshal(l["id"], &id)
				json.Unmarshal(l["reason"], &reason)
				if reason == "tool_stop" {
					excluded[id] = true
				}
			}
		}
		for id := range stopped {
			if !excluded[id] {
				t.Errorf("%s: %s stopped (%s) but not excluded", fl.name, id, stopped[id])
			}
		}
		kept := 0
		for _, l := range readRecords(t, filepath.Join(dir, "tokenized.jsonl")) {
			var id string
			var conv []map[string]any
			json.Unmarshal(l["id"], &id)
			json.Unmarshal(l["conversations"], &conv)
			if stopped[id] != "" {
				t.Errorf("%s: %s stopped (%s) but has a record", fl.name, id, stopped[id])
			}
			if last := conv[len(conv)-1]; last["role"] != "assistant" {
				t.Errorf("%s: record %s ends with %v, not the model's turn", fl.name, id, last)
			}
			kept++
		}
		if kept+len(excluded) != len(raws) || kept == 0 {
			t.Errorf("%s: %d records kept, %d excluded as tool_stop, of %d answers", fl.name, kept, len(excluded), len(raws))
		}
	}
}
