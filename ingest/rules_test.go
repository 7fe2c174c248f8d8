package ingest

import (
	"errors"
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
