package web_test

import (
	"encoding/json"
	"html"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/web"
)

// openAIChat reads a prompt line's OpenAI messages with their calls, as
// main's reader (ingest.ParseChat) gives them for these lines.
func openAIChat(line []byte) ([]web.ChatTurn, error) {
	var p struct {
		Messages []struct {
			Role, Content string
			ToolCallID    string `json:"tool_call_id"`
			ToolCalls     []struct {
				ID       string
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
		}
	}
	if err := json.Unmarshal(line, &p); err != nil {
		return nil, err
	}
	var out []web.ChatTurn
	for _, m := range p.Messages {
		t := web.ChatTurn{Role: m.Role, Content: m.Content, CallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			t.Calls = append(t.Calls, web.Call{ID: c.ID, Name: c.Function.Name, Arguments: c.Function.Arguments})
		}
		out = append(out, t)
	}
	return out, nil
}

// newToolSite serves a dataset of tool conversations: "t", regenerated
// step by step over two user turns, its first step two parallel calls
// with hostile text and arguments, stopped at its third step (more_calls,
// a hostile detail); "e", whose data ends at its call, the model's call
// its last step (no stop); "s", answered by one request (--turns last);
// "m", not answered yet.
func newToolSite(t *testing.T) *httptest.Server {
	t.Helper()
	root := t.TempDir()
	h, _ := json.Marshal(hostile)
	hArgs := rawJSON(hostileArgs)
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},{"type":"function","function":{"name":"search","parameters":{"type":"object"}}}]`
	writeFile(t, filepath.Join(root, "d", "prompts.jsonl"), strings.Join([]string{
		`{"id":"t",` + tools + `,"messages":[{"role":"system","content":"sys"},{"role":"user","content":"Paris and Lyon?"},` +
			`{"role":"assistant","content":"","tool_calls":[{"id":"d1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"d2","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lyon\"}"}}]},` +
			`{"role":"tool","tool_call_id":"d2","content":"R-Lyon"},{"role":"tool","tool_call_id":"d1","content":"R-Paris"},` +
			`{"role":"assistant","content":"the data's answer"},{"role":"user","content":"and search?"},{"role":"assistant","content":"the data's last"}]}`,
		`{"id":"s",` + tools + `,"messages":[{"role":"user","content":"Oslo?"},{"role":"assistant","content":"","tool_calls":[{"id":"o1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"o1","content":"R-Oslo"},{"role":"assistant","content":"cold"}]}`,
		`{"id":"e",` + tools + `,"messages":[{"role":"user","content":"Rome?"},{"role":"assistant","content":"","tool_calls":[{"id":"r1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]}]}`,
		`{"id":"m",` + tools + `,"messages":[{"role":"user","content":"Bern?"},{"role":"assistant","content":"","tool_calls":[{"id":"b1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Bern\"}"}}]}]}`,
	}, "\n")+"\n")
	writeFile(t, filepath.Join(root, "d", "raw_responses.jsonl"), strings.Join([]string{
		`{"id":"t","turns":[` +
			`{"text":` + string(h) + `,"tool_calls":[{"id":"m1","type":"function","function":{"name":"get_weather","arguments":` + hArgs + `}},{"id":"m2","type":"function","function":{"name":"get_weather","arguments":"{}"}}],"finish_reason":"tool_calls","user_turn":0,"results":[1,0]},` +
			`{"text":"model answer 1","finish_reason":"stop","user_turn":0,"results":[]},` +
			`{"text":"","tool_calls":[{"id":"m3","type":"function","function":{"name":"search","arguments":"{}"}}],"finish_reason":"tool_calls","user_turn":1,"results":[]}],` +
			`"finish_reason":"tool_calls","tool_stop":{"reason":"more_calls","step":3,"detail":"step 3: ` + strings.ReplaceAll(hostile, `"`, `'`) + `"}}`,
		`{"id":"e","turns":[{"text":"","tool_calls":[{"id":"x2","type":"function","function":{"name":"get_weather","arguments":"{}"}}],"finish_reason":"tool_calls","user_turn":0,"results":[]}],"finish_reason":"tool_calls"}`,
		`{"id":"s","text":"model single","tool_calls":[{"id":"x1","type":"function","function":{"name":"get_weather","arguments":"{}"}}],"finish_reason":"tool_calls"}`,
	}, "\n")+"\n")
	db, _ := ingesttest.Index(t, root)
	srv := httptest.NewServer(web.Handler(web.Options{Ask: query.Local{Src: db}, Read: flatText, Chat: openAIChat, Now: time.Now}))
	t.Cleanup(srv.Close)
	return srv
}

var (
	sideStart = regexp.MustCompile(`<div class="side (data|model)">|<div class="round">|</section>`)
	callBox   = regexp.MustCompile(`(?s)<div class="call">.*?<code class="name">(.*?)</code>.*?<pre class="text args">(.*?)</pre></div>\s*<div class="result">(?:<span class="role">[^<]*</span><pre class="text">(.*?)</pre>|<p class="unknown">(.*?)</p>)</div></div>`)
)

// sides reads a page's sides in order: "data" or "model", then each call
// as "name args -> result" (or "-> why none"), and the side's notes.
func sides(body string) []string {
	var out []string
	at := sideStart.FindAllStringSubmatchIndex(body, -1)
	for i, m := range at {
		if m[2] < 0 || i+1 == len(at) {
			continue
		}
		side := body[m[2]:m[3]]
		text := body[m[1]:at[i+1][0]]
		for _, c := range callBox.FindAllStringSubmatch(text, -1) {
			side += " | " + html.UnescapeString(c[1]+" "+c[2]+" -> "+c[3]+c[4])
		}
		if n := regexp.MustCompile(`<p class="note">(.*?)</p>`).FindStringSubmatch(text); n != nil {
			side += " | note: " + n[1]
		}
		out = append(out, side)
	}
	return out
}

// TestToolConversationPage: the answer page of a tool conversation shows
// each user turn with the data's side and the model's apart, every call
// with the result it got (the data's paired by tool_call_id, out of order;
// the model's parallel calls by its step's results), the calls without a
// result saying why, the stop with its reason, and hostile model output
// and details as text; an answer of one request and a prompt not answered
// yet too; and every link of the site answers.
func TestToolConversationPage(t *testing.T) {
	srv := newToolSite(t)
	_, body, _ := get(t, srv.Client(), srv.URL+"/answer?d=d&id=t")
	want := []string{
		`data | get_weather {"city":"Paris"} -> R-Paris | get_weather {"city":"Lyon"} -> R-Lyon`,
		`model | get_weather ` + hostileArgs + ` -> R-Paris | get_weather {} -> R-Lyon`,
		`data`,
		`model | search {} -> no result: the conversation stopped here (more_calls)`,
	}
	if got := sides(body); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the page's sides:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, w := range []string{`id="tool-stop"`, "<b>more_calls</b>: step 3: &lt;img src=x", "stopped: more_calls: step 3:", "&lt;script&gt;document.title=&#39;pwned-args",
		`data-step="1"`, `data-step="3"`, "&lt;script&gt;document.title=", "the data&#39;s answer", "model answer 1"} {
		if !strings.Contains(body, w) {
			t.Errorf("the page lacks %q", w)
		}
	}
	if strings.Contains(body, "<script>document") || strings.Contains(body, "<img src=x") || strings.Contains(body, "pwned-args'") {
		t.Error("the page holds the model's markup unescaped")
	}
	_, body, _ = get(t, srv.Client(), srv.URL+"/answer?d=d&id=s")
	want = []string{`data | get_weather {} -> R-Oslo`,
		`model | get_weather {} -> no result sent back: the conversation ended here | note: one request, on the data&#39;s turns up to its last assistant turn (gen --turns last)`}
	if got := sides(body); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("one request's page:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, body, _ = get(t, srv.Client(), srv.URL+"/answer?d=d&id=e")
	want = []string{`data | get_weather {} -> no result recorded in the data`,
		`model | get_weather {} -> no result: the data records none (it ends at its call), nor does the conversation`}
	if got := sides(body); strings.Join(got, "\n") != strings.Join(want, "\n") || strings.Contains(body, "tool-stop") {
		t.Errorf("the model calling where the data ends at its call:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	_, body, _ = get(t, srv.Client(), srv.URL+"/answer?d=d&id=m&stage=prompts")
	want = []string{`data | get_weather {"city":"Bern"} -> no result recorded in the data`, `model | note: not asked`}
	if got := sides(body); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("a prompt not answered:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if n := crawl(t, srv, 400); n < 8 {
		t.Errorf("the site links %d pages: the crawl does not test", n)
	}
}

// hostileArgs are a call's arguments that would run if put in as HTML.
const hostileArgs = `{"city": "<script>document.title='pwned-args'</script>"}`

// rawJSON is s as a JSON string, its markup not escaped (as a server may
// write it).
func rawJSON(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSpace(b.String())
}
