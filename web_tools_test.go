package main

import (
	"encoding/json"
	"html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Tool conversations as the web view's answer page shows them: OpenAI
// messages with parallel calls whose results come out of order (paired by
// tool_call_id), a hostile result and hostile arguments; glaive's
// function_call / observation; a set whose data ends at its call; two user
// turns.
var webToolLines = map[string]string{
	"par": `{"id":"par","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],` +
		`"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris and Lyon? twice"},` +
		`{"role":"assistant","content":"Checking both.","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}},` +
		`{"id":"c2","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"<img src=x onerror=alert(2)>\"}"}}]},` +
		`{"role":"tool","tool_call_id":"c2","content":"<script>window.__pwned=1</script>"},{"role":"tool","tool_call_id":"c1","content":"15C"},` +
		`{"role":"assistant","content":"Paris 15C, Lyon hot."}]}`,
	"gl": `{"id":"gl","tools":"[{\"name\": \"calculate_area\", \"description\": \"area\", \"parameters\": {\"type\": \"object\"}}]",` +
		`"conversations":[{"from":"human","value":"Area of a 5 by 3 rectangle?"},` +
		`{"from":"function_call","value":"{\"name\": \"calculate_area\", \"arguments\": {\"shape\": \"rectangle\"}}"},` +
		`{"from":"observation","value":"{\"area\": 15}"},{"from":"gpt","value":"15 square units."}]}`,
	"end": `{"id":"end","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],` +
		`"messages":[{"role":"user","content":"Weather in Oslo?"},{"role":"assistant","content":null,"tool_calls":[{"id":"e1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\"}"}}]}]}`,
	"two": `{"id":"two","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],` +
		`"messages":[{"role":"user","content":"Weather in Rome?"},{"role":"assistant","content":null,"tool_calls":[{"id":"r1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Rome\"}"}}]},` +
		`{"role":"tool","tool_call_id":"r1","content":"20C"},{"role":"assistant","content":"20C in Rome."},{"role":"user","content":"And Bern?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"b1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Bern\"}"}}]},` +
		`{"role":"tool","tool_call_id":"b1","content":"9C"},{"role":"assistant","content":"9C in Bern."}]}`,
}

// pageCall is a call as the page shows it: name, arguments, and its
// result, or why it has none ("-" + the reason).
type pageCall struct{ Name, Args, Result string }

// The data's calls of each line, with the results the data recorded.
var webToolDataCalls = map[string][]pageCall{
	"par": {{"get_weather", `{"city": "Paris"}`, "15C"}, {"get_weather", `{"city": "<img src=x onerror=alert(2)>"}`, "<script>window.__pwned=1</script>"}},
	"gl":  {{"calculate_area", `{"shape":"rectangle"}`, `{"area": 15}`}},
	"end": {{"get_weather", `{"city": "Oslo"}`, "-no result recorded in the data"}},
	"two": {{"get_weather", `{"city": "Rome"}`, "20C"}, {"get_weather", `{"city": "Bern"}`, "9C"}},
}

// The tool results of each line, in order (a step's "results" index them).
var webToolResults = map[string][]string{
	"par": {"<script>window.__pwned=1</script>", "15C"}, "gl": {`{"area": 15}`}, "two": {"20C", "9C"},
}

var (
	sideRE  = regexp.MustCompile(`<div class="side (data|model)">|<div class="round">|</section>`)
	callRE  = regexp.MustCompile(`(?s)<div class="call">.*?<code class="name">(.*?)</code>.*?<pre class="text args">(.*?)</pre></div>\s*<div class="result">(?:<span class="role">[^<]*</span><pre class="text">(.*?)</pre>|<p class="unknown">(.*?)</p>)</div></div>`)
	stepRE  = regexp.MustCompile(`data-step="(\d+)"`)
	scriptR = regexp.MustCompile(`<script>window|<img src=x`)
)

// pageSides reads the calls of an answer page's data sides and model
// sides, in page order, and the steps each kind of side shows.
func pageSides(body string) (calls map[string][]pageCall, steps map[string]int) {
	calls, steps = map[string][]pageCall{}, map[string]int{}
	at := sideRE.FindAllStringSubmatchIndex(body, -1)
	for i, m := range at {
		if m[2] < 0 || i+1 == len(at) {
			continue // not a side
		}
		side, text := body[m[2]:m[3]], body[m[1]:at[i+1][0]]
		steps[side] += len(stepRE.FindAllString(text, -1))
		for _, c := range callRE.FindAllStringSubmatch(text, -1) {
			result := html.UnescapeString(c[3])
			if c[4] != "" {
				result = "-" + html.UnescapeString(c[4])
			}
			calls[side] = append(calls[side], pageCall{html.UnescapeString(c[1]), html.UnescapeString(c[2]), result})
		}
	}
	return calls, steps
}

// TestWebShowsToolConversations: gen regenerates tool conversations
// against the simulator's tool-calling model (SGLang through /generate,
// vLLM through chat) and against a model that makes parallel calls; the
// answer page of each shows every call of the data with the result the
// data recorded for it (paired by tool_call_id, out of order too), every
// call of the model with the result gen sent back for it (or why none),
// the data's turns and the model's steps on their own sides, the stop
// with its reason, and the hostile text as text. (Before, the page showed
// no call at all, and the model's steps after the data's whole
// trajectory.)
func TestWebShowsToolConversations(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	url := scriptedChat(t) // "twice": two calls at every step
	all := []string{webToolLines["par"], webToolLines["gl"], webToolLines["end"], webToolLines["two"]}
	runs := map[string][]string{
		"sglang": {"--server", "sim", "--sim-tool-calls", "--sim-tool-call-parser", "qwen25"},
		"vllm":   {"--server", "sim", "--sim-flavor", "vllm", "--sim-tool-calls", "--sim-enable-auto-tool-choice", "--sim-tool-call-parser", "hermes"},
		"twice":  {"--server", url, "--api", "chat"},
	}
	for ds, args := range runs {
		lines := all
		if ds == "twice" {
			lines = all[:1]
		}
		writeTestFile(t, filepath.Join(p.dir, "tools", ds, "prompts.jsonl"), strings.Join(lines, "\n")+"\n")
		p.mustRun(append(append([]string{"gen"}, args...), filepath.Join("tools", ds))...)
	}
	base, _ := startWeb(t, p, []string{"GENDEX_TOKEN=t0k"})
	parallel, stops := 0, 0
	for ds := range runs {
		raw, err := os.ReadFile(filepath.Join(p.dir, "tools", ds, "raw_responses.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var a struct {
				ID    string
				Turns []struct {
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
					Results []int
				}
				ToolStop *struct{ Reason, Detail string } `json:"tool_stop"`
			}
			decodeJSON(t, l, &a)
			body := webGet(t, base+"answer?d="+ds+"&id="+a.ID, "t0k")
			calls, steps := pageSides(body)
			var model []pageCall
			for _, s := range a.Turns {
				if len(s.ToolCalls) > 1 {
					parallel++
				}
				for k, c := range s.ToolCalls {
					pc := pageCall{c.Function.Name, c.Function.Arguments, ""}
					if k < len(s.Results) {
						pc.Result = webToolResults[a.ID][s.Results[k]]
					}
					model = append(model, pc)
				}
			}
			for i := range calls["model"] {
				if i < len(model) && model[i].Result == "" && strings.HasPrefix(calls["model"][i].Result, "-no result") {
					model[i].Result = calls["model"][i].Result // a call gen sent no result for: the page says why
				}
			}
			if !sameCalls(calls["model"], model) || !sameCalls(calls["data"], webToolDataCalls[a.ID]) {
				t.Errorf("%s %s: the page's calls\n data  %q\n model %q\nwant\n data  %q\n model %q", ds, a.ID, calls["data"], calls["model"], webToolDataCalls[a.ID], model)
			}
			if steps["model"] != len(a.Turns) || steps["data"] != 0 {
				t.Errorf("%s %s: %d steps on the model's sides, %d on the data's; want the %d steps on the model's", ds, a.ID, steps["model"], steps["data"], len(a.Turns))
			}
			if a.ToolStop != nil {
				stops++
				want := "<b>" + a.ToolStop.Reason + "</b>: " + a.ToolStop.Detail
				if !strings.Contains(body, `id="tool-stop"`) || !strings.Contains(html.UnescapeString(body), want) {
					t.Errorf("%s %s: the page does not say the stop %q", ds, a.ID, want)
				}
			}
			if scriptR.MatchString(body) {
				t.Errorf("%s %s: the page holds the data's markup unescaped", ds, a.ID)
			}
			if a.ID == "two" && strings.Count(body, `<div class="round">`) != 2 {
				t.Errorf("%s two: %d rounds, want one per user turn", ds, strings.Count(body, `<div class="round">`))
			}
		}
	}
	if parallel == 0 || stops == 0 {
		t.Errorf("%d steps with parallel calls, %d stops: the test does not test them", parallel, stops)
	}
}

// sameCalls compares the page's calls with those wanted; arguments are
// compared as JSON when both are.
func sameCalls(got, want []pageCall) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Result != w.Result || g.Args != w.Args && compactJSON(g.Args) != compactJSON(w.Args) {
			return false
		}
	}
	return true
}

func compactJSON(s string) string {
	var v any
	if json.Unmarshal([]byte(s), &v) != nil {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}
