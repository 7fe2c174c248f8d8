package sglang

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// sse answers with the given data events, as SGLang frames them.
func sse(events ...string) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, e := range events {
			io.WriteString(w, "data: "+e+"\n\n")
			w.(http.Flusher).Flush()
		}
	}
}

// chunk builds a /generate stream chunk.
func chunk(text string, ids []int, completion int, finish string) string {
	idsJSON := strings.ReplaceAll(fmt.Sprint(ids), " ", ",")
	meta := fmt.Sprintf(`{"id":"r","finish_reason":%s,"prompt_tokens":4,"completion_tokens":%d,"cached_tokens":1`, finish, completion)
	if finish != "null" {
		meta += `,"e2e_latency":0.75`
	}
	return fmt.Sprintf(`{"text":%q,"output_ids":%s,"meta_info":%s}}`, text, idsJSON, meta)
}

const eos = `{"type":"stop","matched":2}`

func TestGenerateStreamModes(t *testing.T) {
	const want = `{"id":"p","output_ids":[10,11,12,2],"text":"Hello world!","prompt_tokens":4,"completion_tokens":4,"cached_tokens":1,"finish_reason":"stop","matched_stop":2,"e2e_latency":0.75}` + "\n"
	for _, tc := range []struct {
		name   string
		events []string
	}{
		{"cumulative (default)", []string{
			chunk("Hello", []int{10}, 1, "null"),
			chunk("Hello world", []int{10, 11}, 2, "null"),
			chunk("Hello world!", []int{10, 11, 12, 2}, 4, eos),
			"[DONE]"}},
		{"incremental", []string{
			chunk("Hello", []int{10}, 1, "null"),
			chunk(" world", []int{11}, 2, "null"),
			chunk("!", []int{12, 2}, 4, eos),
			"[DONE]"}},
		{"old --stream-output: ids incremental, text cumulative", []string{
			chunk("Hello", []int{10}, 1, "null"),
			chunk("Hello world", []int{11}, 2, "null"),
			chunk("Hello world!", []int{12, 2}, 4, eos),
			"[DONE]"}},
		{"single chunk", []string{chunk("Hello world!", []int{10, 11, 12, 2}, 4, eos), "[DONE]"}},
		{"final chunk without [DONE]", []string{
			chunk("Hello", []int{10}, 1, "null"),
			chunk("Hello world!", []int{10, 11, 12, 2}, 4, eos)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, sse(tc.events...))
			res, err := f.client(Options{}).GenerateStream(t.Context(), GenerateRequest{InputIDs: []int{1}})
			if err != nil {
				t.Fatal(err)
			}
			if got := string(withoutFinishedAt(res)); got != want {
				t.Errorf("\n got %s want %s", got, want)
			}
			r := f.last(t)
			if body := object(t, r.Body); body["stream"] != true || r.Header.Get("Accept") != "text/event-stream" {
				t.Errorf("stream %v accept %q", body["stream"], r.Header.Get("Accept"))
			}
		})
	}
}

func TestGenerateStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name   string
		events []string
		kind   Kind
		msg    string
	}{
		{"error event, not retryable", []string{
			`{"error":{"message":"The input (40000 tokens) is longer than the model's context length (32768 tokens).","type":"invalid_request_error","code":400,"retryable":false}}`,
			"[DONE]"}, Permanent, "stream error (code 400): The input (40000 tokens)"},
		{"old error event", []string{`{"error":{"message":"boom"}}`, "[DONE]"}, Transient, "stream error: boom"},
		{"error event, code 503", []string{`{"error":{"message":"busy","code":503}}`}, Transient, "stream error (code 503): busy"},
		{"abort chunk", []string{
			chunk("He", []int{10}, 1, "null"),
			chunk("He", []int{10}, 1, `{"type":"abort","message":"too long","status_code":400,"err_type":null}`),
			"[DONE]"}, Permanent, "request aborted (status 400): too long"},
		{"cut before the end", []string{chunk("He", []int{10}, 1, "null")}, Transient, "stream ended before [DONE]"},
		{"[DONE] without final chunk", []string{chunk("He", []int{10}, 1, "null"), "[DONE]"}, Transient, "without a final chunk"},
		{"garbage", []string{"{not json"}, Permanent, "invalid stream event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, sse(tc.events...))
			_, err := f.client(Options{}).GenerateStream(t.Context(), GenerateRequest{InputIDs: []int{1}})
			e := asError(t, err)
			if e.Kind != tc.kind || e.Status != http.StatusOK || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("got kind %v status %d message %q; want %v 200 %q", e.Kind, e.Status, e.Message, tc.kind, tc.msg)
			}
		})
	}
	// An HTTP error before the stream starts is classified like any other.
	f := newFake(t, reply(400, `{"error":{"message":"input_ids cannot be empty."}}`))
	_, err := f.client(Options{}).GenerateStream(t.Context(), GenerateRequest{InputIDs: []int{1}})
	if e := asError(t, err); e.Kind != Permanent || e.Status != 400 {
		t.Errorf("HTTP 400: %v", err)
	}
}
