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
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestGenToolDatasetNeedsToolServer: a tool dataset against a server that
// cannot carry tools (the plain simulator: SGLang that says no tool-call
// parser) is refused before anything is sent, naming the flags; under
// --turns all (the default) a tool history is refused first, naming
// --turns last. Nothing is written, no prompt marked failed. (Before,
// the calls were dropped and gen reported success.)
func TestGenToolDatasetNeedsToolServer(t *testing.T) {
	for _, line := range []string{toolMessagesLine, toolShareGPTLine} {
		dir := toolDataset(t, line)
		db := filepath.Join(t.TempDir(), "g.db")
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{nil, []string{"prompts.jsonl:1", "is a tool conversation", "--turns last"}},
			{[]string{"--turns", "last"}, []string{"--tool-call-parser NAME", "no prompt was sent"}},
			{[]string{"--turns", "last", "--api", "chat"}, []string{"does not say which tool-call parser", "start SGLang with --tool-call-parser"}},
		} {
			args := append([]string{"--db", db, "gen", "--server", "sim"}, tc.args...)
			r := gendex(t, testEnv(nil), append(args, dir)...)
			if r.code != 1 {
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
// get_weather call, and a chat endpoint that answers with that call. It
// keeps the bodies of the requests it got, by path.
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
			io.WriteString(w, `{"normal_text":"Let me check.","calls":[{"tool_index":-1,"name":"get_weather","parameters":"{\"city\": \"Lyon\"}","tool_call_id":null}]}`)
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
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%s: %v: %s", path, err, l)
		}
		out = append(out, m)
	}
	return out
}
