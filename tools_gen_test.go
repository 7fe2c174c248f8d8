package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gendex/ingest/gen/sim"
)

// Tool datasets in the two shapes issue 42 names: OpenAI messages with
// top-level tools, an assistant call (content null) and its result; a
// glaive-style ShareGPT set (function_call / observation, tools as a JSON
// string of bare schemas).
const (
	toolMessagesLine = `{"id":"m1","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}],` +
		`"messages":[{"role":"user","content":"Weather in Paris?"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","name":"get_weather","content":"15C"},` +
		`{"role":"assistant","content":"It is 15C."}]}`
	toolShareGPTLine = `{"id":"g1","tools":"[{\"name\": \"calculate_area\", \"description\": \"area\", \"parameters\": {\"type\": \"object\"}}]",` +
		`"conversations":[{"from":"human","value":"Area of a 5 by 3 rectangle?"},` +
		`{"from":"function_call","value":"{\"name\": \"calculate_area\", \"arguments\": {\"shape\": \"rectangle\"}}"},` +
		`{"from":"observation","value":"{\"area\": 15}"},{"from":"gpt","value":"15 square units."}]}`
)

func toolDataset(t *testing.T, lines ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tools")
	os.MkdirAll(dir, 0o755)
	writePrompts(t, dir, strings.Join(lines, "\n")+"\n")
	return dir
}

// TestGenToolDatasetNeedsToolServer: a tool dataset against a server that
// cannot carry tools (the plain simulator: SGLang that says no tool-call
// parser) is refused before anything is sent, naming the flags; vLLM
// without auto tool choice and llama.cpp without Jinja stop the run at
// their refusal, naming theirs. Nothing is written, no prompt marked failed; the run
// refused before anything was sent exits 5 (refused). (Before,
// the calls were dropped and gen reported success.)
func TestGenToolDatasetNeedsToolServer(t *testing.T) {
	t.Parallel()
	for _, line := range []string{toolMessagesLine, toolShareGPTLine} {
		dir := toolDataset(t, line)
		db := filepath.Join(t.TempDir(), "g.db")
		for _, tc := range []struct {
			args []string
			code int // 5: refused before a prompt was sent; 1: stopped at the server's refusal of the first
			want []string
		}{
			{nil, 5, []string{"--tool-call-parser NAME", "no prompt was sent"}},
			{[]string{"--turns", "last"}, 5, []string{"--tool-call-parser NAME", "no prompt was sent"}},
			{[]string{"--turns", "last", "--api", "chat"}, 5, []string{"tool-call parser", "start SGLang with --tool-call-parser"}},
			{[]string{"--sim-tool-calls", "--sim-flavor", "vllm"}, 1, []string{"--enable-auto-tool-choice --tool-call-parser NAME", "no prompt was marked failed"}},
			{[]string{"--sim-tool-calls", "--sim-flavor", "llamacpp", "--sim-no-jinja"}, 1, []string{"llama-server with --jinja", "no prompt was marked failed"}},
		} {
			args := append([]string{"--db", db, "gen", "--server", "sim"}, tc.args...)
			r := gendex(t, testEnv(nil), append(args, dir)...)
			if r.code != tc.code {
				t.Errorf("%s %v: %s", line[:10], tc.args, r)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("%s %v: stderr lacks %q:\n%s", line[:10], tc.args, w, r.stderr)
				}
			}
			for _, f := range []string{"raw_responses.jsonl", "errors.jsonl"} {
				if b, _ := os.ReadFile(filepath.Join(dir, f)); len(b) > 0 {
					t.Errorf("%s %v: %s written:\n%s", line[:10], tc.args, f, b)
				}
			}
		}
	}
}

// toolServer is an SGLang that runs a tool-call parser: the simulator,
// with /server_info naming qwen25, a /parse_function_call that finds one
// get_weather call after the text it is given, and a chat endpoint that
// answers with that call. It keeps the bodies of the requests it got, by
// path.
type toolServer struct {
	mu     sync.Mutex
	bodies map[string][]map[string]any
}

func (ts *toolServer) start(t *testing.T) string {
	h := sim.New(sim.Config{}).Handler()
	ts.bodies = map[string][]map[string]any{}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var m map[string]any
		json.Unmarshal(body, &m)
		ts.mu.Lock()
		ts.bodies[r.URL.Path] = append(ts.bodies[r.URL.Path], m)
		ts.mu.Unlock()
		switch r.URL.Path {
		case "/server_info":
			io.WriteString(w, `{"model_path":"m","tool_call_parser":"qwen25","status":"ready"}`)
			return
		case "/parse_function_call":
			if m["text"] == nil {
				w.WriteHeader(400)
				io.WriteString(w, `{"error":{"message":"text required"}}`)
				return
			}
			normal, _ := json.Marshal(m["text"]) // the model's text, all before the call it is said to make
			io.WriteString(w, `{"normal_text":`+string(normal)+`,"calls":[{"tool_index":-1,"name":"get_weather","parameters":"{\"city\": \"Lyon\"}","tool_call_id":null}]}`)
			return
		case "/v1/chat/completions":
			if m["messages"] != nil {
				io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"","reasoning_content":null,`+
					`"tool_calls":[{"id":"call_0123","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Lyon\"}"}}]},`+
					`"finish_reason":"tool_calls","matched_stop":null}],"usage":{"prompt_tokens":40,"completion_tokens":12,"total_tokens":52}}`)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

func (ts *toolServer) got(path string) []map[string]any {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.bodies[path]
}

// TestGenSendsTools: under --turns last a tool prompt is sent with its
// tools and its history whole: /v1/tokenize gets the messages (the call
// with its arguments, the result with its tool_call_id and name) and the
// tools; /generate keeps special tokens; the model's call, read by
// /parse_function_call, is in the answer line as tool_calls. On the chat
// endpoint the tools go with tool_choice auto and the answer's tool_calls
// are kept.
func TestGenSendsTools(t *testing.T) {
	t.Parallel()
	for _, api := range []string{"generate", "chat"} {
		var ts toolServer
		url := ts.start(t)
		dir := toolDataset(t, toolMessagesLine, toolShareGPTLine)
		db := filepath.Join(t.TempDir(), "g.db")
		r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--api", api, "--turns", "last", dir)
		if r.code != 0 {
			t.Fatalf("--api %s: %s", api, r)
		}
		sent := ts.got("/v1/tokenize")
		if api == "chat" {
			sent = ts.got("/v1/chat/completions")
		}
		var withMsgs []map[string]any
		for _, b := range sent {
			if b["messages"] != nil {
				withMsgs = append(withMsgs, b)
			}
		}
		if len(withMsgs) != 2 {
			t.Fatalf("--api %s: %d requests with messages; want 2: %v", api, len(withMsgs), sent)
		}
		for _, b := range withMsgs {
			tools, _ := json.Marshal(b["tools"])
			msgs, _ := json.Marshal(b["messages"])
			if !strings.Contains(string(tools), `"type":"function"`) || !strings.Contains(string(tools), `"function":{"`) || b["tool_choice"] != "auto" {
				t.Errorf("--api %s: tools %s, tool_choice %v", api, tools, b["tool_choice"])
			}
			var m []map[string]any
			json.Unmarshal(msgs, &m)
			if len(m) != 3 || m[1]["tool_calls"] == nil || m[2]["role"] != "tool" || m[2]["tool_call_id"] == nil || m[2]["name"] == nil ||
				m[2]["tool_call_id"] != m[1]["tool_calls"].([]any)[0].(map[string]any)["id"] {
				t.Errorf("--api %s: messages sent %s", api, msgs)
			}
		}
		if api == "generate" {
			for _, b := range ts.got("/generate") {
				if b["sampling_params"] == nil {
					continue // the route's probe
				}
				if sp, _ := b["sampling_params"].(map[string]any); sp["skip_special_tokens"] != false {
					t.Errorf("/generate sampling_params %v: want skip_special_tokens false", sp)
				}
			}
			for _, b := range ts.got("/parse_function_call") {
				if b["text"] == nil {
					continue // the route's probe
				}
				if b["tool_call_parser"] != "qwen25" || b["tools"] == nil {
					t.Errorf("/parse_function_call got %v", b)
				}
			}
		}
		raw, _ := os.ReadFile(filepath.Join(dir, "raw_responses.jsonl"))
		if n := strings.Count(string(raw), `"tool_calls":[{`); n != 2 || !strings.Contains(string(raw), `"name":"get_weather","arguments":"{\"city\": \"Lyon\"}"`) {
			t.Errorf("--api %s: answers:\n%s", api, raw)
		}
	}
}

// TestGenToolRecords: under --turns last --export conversations, a tool
// prompt's record holds its history as sent (the data's call with its
// arguments a JSON string, the result with its tool_call_id and name), the
// model's own call as the last assistant turn, and the tools at the top
// level; --export ids records the prompt ids that /v1/tokenize gave for
// the messages with the tools, then the output ids.
func TestGenToolRecords(t *testing.T) {
	t.Parallel()
	for _, api := range []string{"generate", "chat"} {
		var ts toolServer
		url := ts.start(t)
		dir := toolDataset(t, toolMessagesLine, toolShareGPTLine)
		db := filepath.Join(t.TempDir(), "g.db")
		r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--api", api, "--turns", "last", "--export", "conversations", dir)
		if r.code != 0 {
			t.Fatalf("--api %s: %s", api, r)
		}
		recs := readRecords(t, filepath.Join(dir, "tokenized.jsonl"))
		if len(recs) != 2 {
			t.Fatalf("--api %s: %d records", api, len(recs))
		}
		for _, rec := range recs {
			var tools []map[string]any
			json.Unmarshal(rec["tools"], &tools)
			var conv []map[string]any
			json.Unmarshal(rec["conversations"], &conv)
			if len(tools) != 1 || tools[0]["type"] != "function" || len(conv) != 4 {
				t.Errorf("--api %s: record %s", api, rec["conversations"])
				continue
			}
			call := conv[1]["tool_calls"].([]any)[0].(map[string]any)
			fn := call["function"].(map[string]any)
			if _, isString := fn["arguments"].(string); !isString || conv[2]["role"] != "tool" || conv[2]["tool_call_id"] != call["id"] || conv[2]["name"] != fn["name"] {
				t.Errorf("--api %s: history %s", api, rec["conversations"])
			}
			last := conv[3]
			calls, _ := last["tool_calls"].([]any)
			if last["role"] != "assistant" || len(calls) != 1 || calls[0].(map[string]any)["function"].(map[string]any)["arguments"] != `{"city": "Lyon"}` {
				t.Errorf("--api %s: the model's turn %v", api, last)
			}
		}
	}
	var ts toolServer
	url := ts.start(t)
	dir := toolDataset(t, toolMessagesLine)
	db := filepath.Join(t.TempDir(), "g.db")
	if r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--turns", "last", "--export", "ids", dir); r.code != 0 {
		t.Fatal(r)
	}
	recs := readRecords(t, filepath.Join(dir, "tokenized.jsonl"))
	raws := readRecords(t, filepath.Join(dir, "raw_responses.jsonl"))
	if len(recs) != 1 || len(raws) != 1 {
		t.Fatalf("%d records, %d answers", len(recs), len(raws))
	}
	var ids, prompt, out []int
	json.Unmarshal(recs[0]["input_ids"], &ids)
	json.Unmarshal(raws[0]["prompt_ids"], &prompt)
	json.Unmarshal(raws[0]["output_ids"], &out)
	if len(prompt) == 0 || len(ids) != len(prompt)+len(out) || !strings.HasPrefix(string(recs[0]["input_ids"]), strings.TrimSuffix(string(raws[0]["prompt_ids"]), "]")) {
		t.Errorf("ids record %s\nanswer prompt_ids %s output_ids %s", recs[0]["input_ids"], raws[0]["prompt_ids"], raws[0]["output_ids"])
	}
}

func readRecords(t *testing.T, path string) []map[string]json.RawMessage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]json.RawMessage
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]json.RawMessage
		decodeJSON(t, l, &m)
		out = append(out, m)
	}
	return out
}

// scriptedChat is an SGLang chat endpoint with a tool-call parser whose
// model calls by script, by the first user turn's text: "weather" calls
// get_weather once then answers; "text" answers at once; "twice" makes
// two calls; "other" calls search. Other routes are the simulator's.
func scriptedChat(t *testing.T) string {
	h := sim.New(sim.Config{}).Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch r.URL.Path {
		case "/server_info":
			io.WriteString(w, `{"tool_call_parser":"qwen25"}`)
			return
		case "/v1/chat/completions":
			var req struct {
				Messages []map[string]any `json:"messages"`
			}
			json.Unmarshal(body, &req)
			if req.Messages == nil {
				break
			}
			first, results := "", 0
			for _, m := range req.Messages {
				if m["role"] == "user" && first == "" {
					first, _ = m["content"].(string)
				}
				if m["role"] == "tool" {
					results++
				}
			}
			call := func(names ...string) string {
				var cs []string
				for i, n := range names {
					cs = append(cs, `{"id":"call_srv`+string(rune('a'+results))+string(rune('0'+i))+`","index":0,"type":"function","function":{"name":"`+n+`","arguments":"{\"city\": \"Lyon\"}"}}`)
				}
				return `{"choices":[{"index":0,"message":{"role":"assistant","content":"","tool_calls":[` + strings.Join(cs, ",") + `]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":30,"completion_tokens":9}}`
			}
			text := `{"choices":[{"index":0,"message":{"role":"assistant","content":"Done: it is 15C."},"finish_reason":"stop"}],"usage":{"prompt_tokens":40,"completion_tokens":6}}`
			out := text
			switch {
			case strings.Contains(first, "weather") && results == 0:
				out = call("get_weather")
			case strings.Contains(first, "twice"):
				out = call("get_weather", "get_weather")
			case strings.Contains(first, "other"):
				out = call("search")
			}
			io.WriteString(w, out)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

func toolLine(id, ask string) string {
	return `{"id":"` + id + `","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}},{"type":"function","function":{"name":"search","parameters":{"type":"object"}}}],` +
		`"messages":[{"role":"system","content":"sys"},{"role":"user","content":"` + ask + `"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"d1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},` +
		`{"role":"tool","tool_call_id":"d1","content":"15C"},{"role":"assistant","content":"The data's answer."}]}`
}

// TestGenRegeneratesToolCalls: under --turns all each assistant turn is
// asked on the regenerated history: the model's call gets the data's
// result with the model's call id, and its answer follows; a departure
// (another tool, more calls than results, text where the data called)
// stops the conversation at the model's turn, counted with its reason in
// the summary and said in the raw line; its record ends with the model's
// own turn, or with --exclude-tool-stops it is excluded as tool_stop. No
// tool turn of any record answers anything but a call of the assistant
// turn before it, and the data's assistant turns are never sent.
func TestGenRegeneratesToolCalls(t *testing.T) {
	t.Parallel()
	url := scriptedChat(t)
	for _, exclude := range []bool{false, true} {
		dir := toolDataset(t, toolLine("w", "weather?"), toolLine("t", "text please"), toolLine("x", "twice"), toolLine("o", "other"))
		db := filepath.Join(t.TempDir(), "g.db")
		args := []string{"--db", db, "gen", "--server", url, "--api", "chat", "--export", "conversations"}
		if exclude {
			args = append(args, "--exclude-tool-stops")
		}
		r := gendex(t, testEnv(nil), append(args, dir)...)
		if r.code != 0 || !strings.Contains(r.stderr, "3 stopped where the model departed from the data (other_tool 1, more_calls 1, no_call 1)") {
			t.Fatalf("exclude %v: %s", exclude, r)
		}
		raws := map[string]map[string]json.RawMessage{}
		for _, l := range readRecords(t, filepath.Join(dir, "raw_responses.jsonl")) {
			var id string
			json.Unmarshal(l["id"], &id)
			raws[id] = l
		}
		for id, reason := range map[string]string{"w": "", "t": "no_call", "x": "more_calls", "o": "other_tool"} {
			var stop struct{ Reason string }
			json.Unmarshal(raws[id]["tool_stop"], &stop)
			if stop.Reason != reason {
				t.Errorf("%s: tool_stop %s; want %q", id, raws[id]["tool_stop"], reason)
			}
		}
		recs := map[string][]map[string]any{}
		for _, l := range readRecords(t, filepath.Join(dir, "tokenized.jsonl")) {
			var id string
			json.Unmarshal(l["id"], &id)
			var conv []map[string]any
			json.Unmarshal(l["conversations"], &conv)
			recs[id] = conv
			for i, m := range conv {
				if m["role"] != "tool" {
					continue
				}
				prev := conv[i-1]
				for prev["role"] == "tool" {
					prev = conv[i-2]
				}
				calls, _ := prev["tool_calls"].([]any)
				found := false
				for _, c := range calls {
					found = found || c.(map[string]any)["id"] == m["tool_call_id"] && c.(map[string]any)["function"].(map[string]any)["name"] == m["name"]
				}
				if !found {
					t.Errorf("%s: turn %d answers no call of the turn before it: %v", id, i+1, conv)
				}
			}
			for _, m := range conv {
				if m["content"] == "The data's answer." {
					t.Errorf("%s: the data's assistant turn is in the record: %v", id, conv)
				}
			}
		}
		w := recs["w"]
		if len(w) != 5 || w[2]["role"] != "assistant" || w[3]["content"] != "15C" || w[3]["tool_call_id"] != "call_srva0" || w[4]["content"] != "Done: it is 15C." {
			t.Errorf("w: record %v", w)
		}
		if exclude {
			if len(recs) != 1 {
				t.Errorf("--exclude-tool-stops: records %v", recs)
			}
			exc, _ := os.ReadFile(filepath.Join(dir, "excluded.jsonl"))
			if strings.Count(string(exc), `"tool_stop"`) != 3 {
				t.Errorf("excluded:\n%s", exc)
			}
			continue
		}
		if len(recs) != 4 {
			t.Fatalf("records %v", recs)
		}
		for id, n := range map[string]int{"t": 3, "x": 3, "o": 3} {
			conv := recs[id]
			if len(conv) != n || conv[n-1]["role"] != "assistant" {
				t.Errorf("%s: a stopped record must end with the model's own turn: %v", id, conv)
			}
		}
	}
}

// TestGenToolStepsOnGenerate: through /generate each step's prompt is
// /v1/tokenize of the regenerated history with the tools, and the model's
// calls are read by /parse_function_call: a call answered with the data's
// result, then a second call with no result left stops the conversation
// (more_calls); the ids record is the last step's prompt ids (the only
// ones in the line) and its output ids.
func TestGenToolStepsOnGenerate(t *testing.T) {
	t.Parallel()
	var ts toolServer
	url := ts.start(t)
	dir := toolDataset(t, toolMessagesLine)
	db := filepath.Join(t.TempDir(), "g.db")
	r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--export", "ids", dir)
	if r.code != 0 || !strings.Contains(r.stderr, "(more_calls 1)") {
		t.Fatal(r)
	}
	var steps [][]map[string]any
	for _, b := range ts.got("/v1/tokenize") {
		if msgs, ok := b["messages"].([]any); ok && b["tools"] != nil {
			var ms []map[string]any
			for _, m := range msgs {
				ms = append(ms, m.(map[string]any))
			}
			steps = append(steps, ms)
		}
	}
	if len(steps) != 2 || len(steps[0]) != 1 || len(steps[1]) != 3 || steps[1][2]["content"] != "15C" ||
		steps[1][2]["tool_call_id"] != "call_1_1" || steps[1][1]["tool_calls"].([]any)[0].(map[string]any)["id"] != "call_1_1" {
		t.Fatalf("the steps' prompts: %v", steps)
	}
	raw := readRecords(t, filepath.Join(dir, "raw_responses.jsonl"))[0]
	var turns []map[string]json.RawMessage
	json.Unmarshal(raw["turns"], &turns)
	if len(turns) != 2 || turns[0]["prompt_ids"] != nil || turns[1]["prompt_ids"] == nil || string(turns[0]["results"]) != "[0]" || turns[1]["tool_calls"] == nil {
		t.Fatalf("raw line %s", raw["turns"])
	}
	rec := readRecords(t, filepath.Join(dir, "tokenized.jsonl"))[0]
	var ids, prompt, out []int
	json.Unmarshal(rec["input_ids"], &ids)
	json.Unmarshal(turns[1]["prompt_ids"], &prompt)
	json.Unmarshal(turns[1]["output_ids"], &out)
	if len(ids) != len(prompt)+len(out) || len(prompt) == 0 {
		t.Errorf("ids record of %d ids; the last step: %d prompt ids, %d output ids", len(ids), len(prompt), len(out))
	}
}
