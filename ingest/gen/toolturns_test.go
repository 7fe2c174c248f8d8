package gen

import (
	"reflect"
	"strings"
	"testing"

	"gendex/ingest/gen/client"
)

func toolPrompt(t *testing.T, line string) *Prompt {
	t.Helper()
	p, err := ParsePrompt([]byte(line), "c", 1)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func calling(names ...string) *client.Result {
	r := &client.Result{FinishReason: "tool_calls"}
	for _, n := range names {
		r.ToolCalls = append(r.ToolCalls, client.ToolCall{Type: "function", Function: client.ToolFunction{Name: n, Arguments: "{}"}})
	}
	return r
}

func saying(text string) *client.Result {
	return &client.Result{Text: &text, FinishReason: "stop"}
}

// TestToolConvPairing: the k-th call of a user turn takes that turn's k-th
// result, with the call's id; an answer in text at an earlier user turn
// leaves its results unused and goes on to the next user turn; at the last
// one it is a no_call stop; arguments that are not JSON stop the
// conversation.
func TestToolConvPairing(t *testing.T) {
	t.Parallel()
	const line = `{"tools":[{"name":"a"},{"name":"b"}],"messages":[{"role":"system","content":"s"},
		{"role":"user","content":"u1"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"a","arguments":{}}}]},{"role":"tool","content":"ra"},{"role":"assistant","content":"x"},
		{"role":"user","content":"u2"},{"role":"assistant","content":"","tool_calls":[{"function":{"name":"a","arguments":{}}},{"function":{"name":"b","arguments":{}}}]},{"role":"tool","content":"r2a"},{"role":"tool","content":"r2b"},{"role":"assistant","content":"y"}]}`
	p := toolPrompt(t, line)
	tc := newToolConv(p)
	if len(tc.history) != 2 || tc.history[1].Content != "u1" {
		t.Fatalf("first step's history %+v", tc.history)
	}
	// User turn 1: the model answers in text (its result "ra" goes unused).
	if tc.take(saying("no need")) || tc.stop != nil || tc.u != 1 {
		t.Fatalf("text at user turn 1: over or stopped (%+v)", tc.stop)
	}
	// User turn 2: two calls, answered in order with the model's ids.
	if tc.take(calling("a", "b")) || tc.stop != nil {
		t.Fatalf("two calls stopped: %+v", tc.stop)
	}
	h := tc.history
	got := h[len(h)-2:]
	if got[0].Content != "r2a" || got[0].ToolCallID != "call_2_1" || got[0].Name != "a" || got[1].Content != "r2b" || got[1].ToolCallID != "call_2_2" {
		t.Fatalf("results %+v", got)
	}
	if !tc.take(saying("done")) || tc.stop != nil || len(tc.steps) != 3 {
		t.Fatalf("the last answer: over %v, stop %+v, %d steps", true, tc.stop, len(tc.steps))
	}
	if s := tc.steps[1]; len(s.results) != 2 || s.results[0] != 1 || s.results[1] != 2 || s.user != 1 {
		t.Errorf("step 2 %+v", s)
	}
	for _, tcase := range []struct {
		first, second *client.Result
		reason        string
	}{
		{saying("x"), saying("no call"), StopNoCall},
		{saying("x"), calling("b"), StopOtherTool},
		{saying("x"), calling("a", "b", "a"), StopMoreCalls},
		{saying("x"), &client.Result{ToolCalls: []client.ToolCall{{Type: "function", Function: client.ToolFunction{Name: "a", Arguments: `{"x": `}}}}, StopBadArgs},
	} {
		tc := newToolConv(toolPrompt(t, line))
		tc.take(tcase.first)
		if !tc.take(tcase.second) || tc.stop == nil || tc.stop.reason != tcase.reason || tc.stop.step != 2 {
			t.Errorf("want %s: stop %+v", tcase.reason, tc.stop)
		}
		if m := tc.history[len(tc.history)-1]; m.Role != "assistant" {
			t.Errorf("%s: the history ends with %+v, not the model's turn", tcase.reason, m)
		}
	}
}

// TestToolStepsRetake: a step's turn line, read back and taken again by a
// fresh conversation (as a run started again does), gives the history the
// live step gave (the model's turn with its call id, the result paired to
// it) and the same answer object for the conversation line; a recorded
// step the prompt no longer leads to is an error, not a history.
func TestToolStepsRetake(t *testing.T) {
	t.Parallel()
	const line = `{"tools":[{"name":"a"},{"name":"b"}],"messages":[{"role":"user","content":"u1"},` +
		`{"role":"assistant","content":"","tool_calls":[{"function":{"name":"a","arguments":{}}}]},{"role":"tool","content":"ra"},{"role":"assistant","content":"x"}]}`
	p := toolPrompt(t, line)
	live := newToolConv(p)
	res := calling("a")
	res.Text = new(string)
	*res.Text = "let me see"
	if live.take(res) {
		t.Fatal("the call ended the conversation")
	}
	out := (&conversations{}).toolStepLine(&job{p: p}, live)
	if out.kind != turnLine || !out.opens || !strings.HasPrefix(string(out.line), `{"id":"c","turn":1,`) {
		t.Fatalf("turn line %s (kind %d, opens %v)", out.line, out.kind, out.opens)
	}
	var l turnFields
	step, err := l.read(out.line, "turns.jsonl:1", 1)
	if err != nil {
		t.Fatal(err)
	}
	fresh := newToolConv(p)
	if err := fresh.retake(&l, step); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fresh.history, live.history) || fresh.u != live.u || fresh.used != live.used {
		t.Errorf("history taken again %+v; live %+v", fresh.history, live.history)
	}
	if got, want := string(fresh.steps[0].t.obj), string(live.steps[0].t.obj); got != want {
		t.Errorf("step object read back %s; written %s", got, want)
	}
	// The data's result is now b's: the recorded call of a no longer
	// follows.
	changed := toolPrompt(t, strings.NewReplacer(`"name":"a","arguments"`, `"name":"b","arguments"`, `"content":"ra"`, `"content":"ra","name":"b"`).Replace(line))
	if err := newToolConv(changed).retake(&l, step); err == nil {
		t.Error("a recorded step the changed prompt does not lead to was taken")
	}
}

// TestToolConvEndsAtDataCall: where the data ends at the assistant's
// call(s) with no result recorded, the model calling those tools, in order,
// ends the conversation at its calls with no stop; another tool is
// other_tool, text no_call, calls past the data's more_calls. After a
// recorded result, the data's next call is open the same way.
func TestToolConvEndsAtDataCall(t *testing.T) {
	t.Parallel()
	const atCall = `{"tools":[{"name":"a"},{"name":"b"}],"messages":[{"role":"user","content":"u1"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"a","arguments":{}}}]}]}`
	const parallel = `{"tools":[{"name":"a"},{"name":"b"}],"messages":[{"role":"user","content":"u1"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"function":{"name":"a","arguments":{}}},{"function":{"name":"b","arguments":{}}}]}]}`
	const glaive = `{"tools":"[{\"name\": \"a\"}, {\"name\": \"b\"}]","conversations":[{"from":"human","value":"u1"},` +
		`{"from":"function_call","value":"{\"name\": \"a\", \"arguments\": {}}"},{"from":"observation","value":"ra"},` +
		`{"from":"function_call","value":"{\"name\": \"b\", \"arguments\": {}}"}]}`
	for _, tcase := range []struct {
		name, line string
		answers    []*client.Result
		reason     string // "" for no stop
	}{
		{"same tool", atCall, []*client.Result{calling("a")}, ""},
		{"other tool", atCall, []*client.Result{calling("b")}, StopOtherTool},
		{"text", atCall, []*client.Result{saying("no")}, StopNoCall},
		{"two calls", atCall, []*client.Result{calling("a", "a")}, StopMoreCalls},
		{"parallel, same", parallel, []*client.Result{calling("a", "b")}, ""},
		{"parallel, order", parallel, []*client.Result{calling("b", "a")}, StopOtherTool},
		{"parallel, first only", parallel, []*client.Result{calling("a")}, ""},
		{"parallel, three", parallel, []*client.Result{calling("a", "b", "a")}, StopMoreCalls},
		{"glaive, result then call", glaive, []*client.Result{calling("a"), calling("b")}, ""},
		{"glaive, both at once", glaive, []*client.Result{calling("a", "b")}, ""},
		{"glaive, text after result", glaive, []*client.Result{calling("a"), saying("no")}, StopNoCall},
		{"glaive, other after result", glaive, []*client.Result{calling("a"), calling("a")}, StopOtherTool},
		{"glaive, text first", glaive, []*client.Result{saying("no")}, StopNoCall},
	} {
		tc := newToolConv(toolPrompt(t, tcase.line))
		for i, res := range tcase.answers {
			over := tc.take(res)
			if last := i == len(tcase.answers)-1; over != last {
				t.Fatalf("%s: step %d over %v (stop %+v)", tcase.name, i+1, over, tc.stop)
			}
		}
		got := ""
		if tc.stop != nil {
			got = tc.stop.reason
		}
		if got != tcase.reason {
			t.Errorf("%s: stop %q (%+v), want %q", tcase.name, got, tc.stop, tcase.reason)
		}
		if m := tc.history[len(tc.history)-1]; m.Role != "assistant" {
			t.Errorf("%s: the history ends with %+v, not the model's turn", tcase.name, m)
		}
	}
}
