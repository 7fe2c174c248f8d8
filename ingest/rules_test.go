package ingest

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gendex/store"
)

// TestAnswerRules: the rules for a line of a shape not seen before. A
// line with no id is an answer (known by its line) when it holds a reply
// where replies are kept, never for a count or a text alone; a body that
// reports a failure in its own status fields, with no reply, is an error
// with its message, whatever the shape around it; a count inside a
// choice is read.
func TestAnswerRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line   string
		stage  store.Stage // the stage the line goes to; 0 with lineID false: skipped (ErrNoID)
		lineID bool
		finish string
		msg    string
		comp   int64
	}{
		// Answers with no id.
		{`{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`, store.Raw, true, "stop", "", U},
		{`{"usage":{"completion_tokens":3}}`, store.Raw, true, "", "", 3},
		{`{"text":"hi","completion_tokens":2}`, store.Raw, true, "", "", 2},
		{`{"message":{"role":"assistant","content":"hi"},"stop_reason":"end_turn"}`, store.Raw, true, "stop", "", U},
		{`{"content":[{"type":"text","text":"hi"}],"finish_reason":"COMPLETE"}`, store.Raw, true, "stop", "", U},
		// No answers: a count alone, a text alone, a log line, nothing.
		{`{"completion_tokens":54181,"benchmark":"mtbench","throughput":1321.8}`, 0, false, "", "", 0},
		{`{"text":"a","finish_reason":null}`, 0, false, "", "", 0},
		{`{"phase":"engine_ready","tp_size":4}`, 0, false, "", "", 0},
		// Bodies that report a failure in their own status fields.
		{`{"id":"a","choices":null,"base_resp":{"status_code":1008,"status_msg":"insufficient balance"}}`, store.Errors, false, "code 1008", "insufficient balance", U},
		{`{"id":"a","status":429,"msg":"too many requests"}`, store.Errors, false, "http 429", "too many requests", U},
		{`{"error_code":110,"error_msg":"Access token invalid"}`, store.Errors, true, "code 110", "Access token invalid", U},
		{`{"request_id":"r","status_code":400,"code":"InvalidParameter","message":"bad input","output":null}`, store.Errors, false, "http 400", "bad input", U},
		// Not failures: a success code, no message, a reply beside the code.
		{`{"id":"a","choices":[{"message":{"content":"x"}}],"usage":{"completion_tokens":1},"base_resp":{"status_code":0,"status_msg":""}}`, store.Raw, false, "", "", 1},
		{`{"request_id":"r","status_code":200,"code":"","message":"","output":{"text":"x"},"usage":{"output_tokens":1}}`, store.Raw, false, "", "", 1},
		{`{"id":"a","code":500,"message":""}`, store.Raw, false, "", "", U},
		{`{"id":"a","choices":[{"message":{"content":"x"}}],"usage":{"completion_tokens":2},"code":503,"message":"degraded"}`, store.Raw, false, "", "", 2},
		{`{"id":"a","status_code":1008,"status_msg":"x","completion_tokens":5}`, store.Raw, false, "", "", 5},
		// Usage inside a choice, when the line has none of its own.
		{`{"id":"a","object":"chat.completion.chunk","choices":[{"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}],"usage":null}`, store.Raw, false, "stop", "", 7},
		{`{"id":"a","choices":[{"index":0},{"index":1,"usage":{"completion_tokens":4}}]}`, store.Raw, false, "", "", 4},
		{`{"id":"a","choices":[{"usage":{"completion_tokens":4}}],"usage":{"completion_tokens":9}}`, store.Raw, false, "", "", 9},
	}
	for _, tt := range tests {
		var r store.Record
		st, info, err := normalize([]byte(tt.line), store.Raw, nil, &r)
		if tt.stage == 0 {
			if !errors.Is(err, ErrNoID) || info.lineID {
				t.Errorf("%s: stage %s, err %v; want it skipped for no id", tt.line, st, err)
			}
			continue
		}
		if err != nil || st != tt.stage || info.lineID != tt.lineID || r.Finish != tt.finish || r.Message != tt.msg || r.CompletionTokens != tt.comp {
			t.Errorf("%s: %s, line id %v, finish %q, message %q, completion %d, err %v; want %s, %v, %q, %q, %d",
				tt.line, st, info.lineID, r.Finish, r.Message, r.CompletionTokens, err, tt.stage, tt.lineID, tt.finish, tt.msg, tt.comp)
		}
	}
}

// TestStreamEventsWithoutID: a stream's events saved one a line with no
// id to merge them by (an Anthropic stream's events, chunks of an
// OpenAI-compatible server that writes no id) are no answers of their
// own: each is skipped for no id, as before answers were read by rule
// (6a6e9f0 indexed the ones with a usage object or choices).
func TestStreamEventsWithoutID(t *testing.T) {
	t.Parallel()
	for _, line := range []string{
		`{"type":"message_start","message":{"id":"msg_01Xq","type":"message","role":"assistant","content":[],"model":"claude-x","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
		`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}}`,
		`{"type":"message_stop"}`,
		`{"object":"chat.completion.chunk","created":1739900000,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}`,
		`{"created":1739900000,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":4,"completion_tokens":2}}`,
	} {
		var r store.Record
		st, info, err := normalize([]byte(line), store.Raw, nil, &r)
		if !errors.Is(err, ErrNoID) || info.lineID {
			t.Errorf("%s: stage %s, line id %v, err %v; want it skipped for no id", line, st, info.lineID, err)
		}
	}
}

// TestLifecycleIsNoFinish: a request's lifecycle status (succeeded,
// completed, in_progress, canceled) written where a finish reason goes is
// no finish reason; a generation's stop reason is kept, and a Responses
// API object that completed stopped by itself.
func TestLifecycleIsNoFinish(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ line, finish string }{
		{`{"id":"a","status":"succeeded","output":["Hi","!"],"metrics":{"output_token_count":2}}`, ""},
		{`{"id":"a","text":"Hi","completion_tokens":2,"finish_reason":"completed"}`, ""},
		{`{"id":"a","text":"Hi","completion_tokens":2,"finish_reason":"in_progress"}`, ""},
		{`{"id":"a","choices":[{"message":{"content":"Hi"},"finish_reason":"SUCCEEDED"}],"usage":{"completion_tokens":2}}`, ""},
		{`{"id":"a","message":{"content":"Hi"},"stop_reason":"canceled","usage":{"output_tokens":2}}`, ""},
		{`{"id":"a","text":"Hi","completion_tokens":2,"finish_reason":"eos_token"}`, store.FinishStop},
		{`{"id":"a","text":"Hi","completion_tokens":2,"finish_reason":"MAX_TOKENS"}`, store.FinishLength},
		{`{"id":"r","object":"response","status":"completed","output":[{"type":"message","content":[{"type":"output_text","text":"Hi"}]}],"usage":{"input_tokens":3,"output_tokens":2}}`, store.FinishStop},
	} {
		var r store.Record
		st, err := Normalize([]byte(c.line), store.Raw, &r)
		if err != nil || st != store.Raw || r.Finish != c.finish {
			t.Errorf("%s: stage %s, finish %q, err %v; want raw, %q", c.line, st, r.Finish, err, c.finish)
		}
	}
}

// TestNamesSayWhat: the rules by name (names.go) on lines no shape
// decides: a count's family is read by its words (num_input_tokens,
// outputTokenCount, token_usage.output), never a total, a limit or a
// cached count, and the nearest wins (two that disagree at one depth:
// none); a count inside an input or its parameters is not the answer's.
func TestNamesSayWhat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line               string
		prompt, completion int64
	}{
		{`{"id":"a","generated_text":"x","num_input_tokens":7,"num_generated_tokens":3}`, 7, 3},
		{`{"id":"a","output":"x","stats":{"inputTokenCount":7,"outputTokenCount":3}}`, 7, 3},
		{`{"id":"a","response_message":"x","token_usage":{"input":7,"output":3,"total":10}}`, 7, 3},
		{`{"id":"a","generation":"x","meta":{"step":{"input_tokens":7,"output_tokens":3}}}`, 7, 3},
		{`{"id":"a","generation":"x","total_tokens":10,"max_new_tokens":64,"cached_input_tokens":2}`, U, U},
		{`{"id":"a","generation":"x","request":{"max_output_tokens":64,"prompt_tokens":7}}`, U, U},
		{`{"id":"a","generation":"x","output_tokens":3,"stats":{"output_tokens":9}}`, U, 3},
		{`{"id":"a","generation":"x","a":{"output_tokens":3},"b":{"output_tokens":9}}`, U, U},
		{`{"id":"a","generation":"x","token_usage":{"input":7}}`, 7, U},
		{`{"id":"a","response_id":"r","text":"x","generation_id":"g","finish_reason":"COMPLETE","meta":{"billed_units":{"input_tokens":9,"output_tokens":16},"tokens":{"input_tokens":75,"output_tokens":16}}}`, 75, 16},
	} {
		var r store.Record
		_, err := Normalize([]byte(c.line), store.Raw, &r)
		if err != nil || r.PromptTokens != c.prompt || r.CompletionTokens != c.completion {
			t.Errorf("%s: prompt %d, completion %d, err %v; want %d, %d", c.line, r.PromptTokens, r.CompletionTokens, err, c.prompt, c.completion)
		}
	}
}

// TestStreamWithoutCountWarns: a stream whose chunks carry no count (no
// usage: stream_options.include_usage off) is one record with its tokens
// unknown, and is warned of at its line, as every other line without a
// count is; a stream whose last chunk has its usage is not.
func TestStreamWithoutCountWarns(t *testing.T) {
	t.Parallel()
	lines := `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}]}
{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}
{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Yo"},"finish_reason":null}]}
{"id":"chatcmpl-2","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}
{"id":"chatcmpl-3","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Ok"},"finish_reason":"stop"}]}
`
	path := filepath.Join(t.TempDir(), "raw_responses.jsonl")
	if err := os.WriteFile(path, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var c collector
	db := openDB(t)
	res := index(t, &Indexer{DB: db, Report: c.report}, Source{Path: path, Dataset: "s", Stage: store.Raw})
	if got := c.kinds()[NoTokens]; !slices.Equal(got, []int64{1, 5}) || res.Unknown != 2 {
		t.Errorf("warned of no count at lines %v, %d unknown; want lines [1 5], 2: %v", got, res.Unknown, c.problems)
	}
	for _, p := range c.problems {
		if p.Kind == NoTokens && !strings.Contains(p.Msg, "include_usage") {
			t.Errorf("warning %q does not say why a stream has no count", p.Msg)
		}
	}
	if s := summary(t, db, "s").Stage(store.Raw); s.Records != 3 || s.UnknownCompletion != 2 {
		t.Errorf("%d records, %d unknown; want 3, 2", s.Records, s.UnknownCompletion)
	}
}

// TestListOfOneObject: a response line that is a list holding one object
// (a server's body for one request) is read as that object; a list of
// more, or a prompt line that is a list, is still no object.
func TestListOfOneObject(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		line  string
		stage store.Stage
		want  error
	}{
		{` [ {"generated_text":"x","details":{"generated_tokens":3}} ] `, store.Raw, ErrNoID},
		{`[{"id":"a","completion_tokens":3}]`, store.Raw, nil},
		{`[{"generated_text":"x"},{"generated_text":"y"}]`, store.Raw, ErrNotObject},
		{`[{"role":"user","content":"hi"}]`, store.Prompts, ErrNotObject},
		{`[]`, store.Raw, ErrNotObject},
	} {
		var r store.Record
		_, err := Normalize([]byte(c.line), c.stage, &r)
		if !errors.Is(err, c.want) && err != c.want {
			t.Errorf("%s (%s): err %v; want %v", c.line, c.stage, err, c.want)
		}
		if c.want != ErrNotObject && r.CompletionTokens != 3 {
			t.Errorf("%s: completion %d; want 3", c.line, r.CompletionTokens)
		}
	}
}
