package client

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// exampleLine is gendex's own flat format, the first line of the project's
// examples/responses.jsonl.
const exampleLine = `{"id":"B2_opencodeinstruct-0000017","output_ids":[163606,2675,374,264,1296,163607,791,4320,13,163586],"text":"The answer.","prompt_tokens":812,"completion_tokens":10,"cached_tokens":256,"reasoning_tokens":0,"finish_reason":"stop","matched_stop":163586,"e2e_latency":41.207,"finished_at":"2026-11-28T09:14:03.512Z","server":"http://127.0.0.1:30000"}` + "\n"

func exampleResult() *Result {
	cet := time.FixedZone("CET", 3600)
	return &Result{
		API:              APIGenerate,
		RID:              "gendex-1-00000000",
		OutputIDs:        []int{163606, 2675, 374, 264, 1296, 163607, 791, 4320, 13, 163586},
		Text:             new("The answer."),
		PromptTokens:     new(812),
		CompletionTokens: new(10),
		CachedTokens:     new(256),
		ReasoningTokens:  new(0),
		FinishReason:     "stop",
		MatchedStop:      163586,
		E2ELatency:       41.207,
		FinishedAt:       time.Date(2026, 11, 28, 10, 14, 3, 512_345_678, cet), // written in UTC, milliseconds
		Server:           "http://127.0.0.1:30000",
	}
}

func TestAppendJSONLGolden(t *testing.T) {
	if got := string(exampleResult().AppendJSONL(nil, "B2_opencodeinstruct-0000017")); got != exampleLine {
		t.Errorf("AppendJSONL\n got %s\nwant %s", got, exampleLine)
	}

	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		r    Result
		want string
	}{
		{"unknown counts omitted", Result{API: APIGenerate, Text: new("x"), FinishReason: "length", E2ELatency: 1.5, FinishedAt: at, Server: "s"},
			`{"id":"p","text":"x","finish_reason":"length","matched_stop":null,"e2e_latency":1.5,"finished_at":"2026-01-02T03:04:05.000Z","server":"s"}`},
		{"chat with null reasoning", Result{API: APIChat, Text: new("ok"), PromptTokens: new(5), CompletionTokens: new(2), FinishReason: "stop", MatchedStop: "</s>", E2ELatency: 0.25, FinishedAt: at, Server: "s"},
			`{"id":"p","text":"ok","reasoning_content":null,"prompt_tokens":5,"completion_tokens":2,"finish_reason":"stop","matched_stop":"</s>","e2e_latency":0.25,"finished_at":"2026-01-02T03:04:05.000Z","server":"s"}`},
		{"chat with reasoning, null content", Result{API: APIChat, ReasoningContent: new("hmm"), CachedTokens: new(0), FinishReason: "tool_calls", FinishedAt: at},
			`{"id":"p","reasoning_content":"hmm","cached_tokens":0,"finish_reason":"tool_calls","matched_stop":null,"e2e_latency":0,"finished_at":"2026-01-02T03:04:05.000Z"}`},
		{"nothing known", Result{},
			`{"id":"p","matched_stop":null,"e2e_latency":0}`},
		{"empty output ids", Result{OutputIDs: []int{}, MatchedStop: int64(2), E2ELatency: 1e-7},
			`{"id":"p","output_ids":[],"matched_stop":2,"e2e_latency":1e-07}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(tc.r.AppendJSONL(nil, "p")); got != tc.want+"\n" {
				t.Errorf("\n got %s want %s", got, tc.want)
			}
		})
	}
}

func TestAppendJSONLAppends(t *testing.T) {
	buf := []byte("prefix\n")
	buf = exampleResult().AppendJSONL(buf, "B2_opencodeinstruct-0000017")
	buf = exampleResult().AppendJSONL(buf, "B2_opencodeinstruct-0000017")
	if want := "prefix\n" + exampleLine + exampleLine; string(buf) != want {
		t.Errorf("got %q", buf)
	}
	r := exampleResult()
	r.API = APIChat
	r.ReasoningContent = new("r")
	if n := testing.AllocsPerRun(100, func() { buf = r.AppendJSONL(buf[:0], "id") }); n != 0 {
		t.Errorf("%v allocations per line; want 0 when the buffer has room", n)
	}
}

// tricky strings that JSON escaping must get right.
var tricky = []string{
	"",
	"plain ascii",
	"quote \" backslash \\ slash /",
	"<html> & </html>",
	"tab\tnewline\ncr\rbackspace\bformfeed\f",
	"\x00\x01\x1f\x7f",
	"unicode: é 中文 🙂 \u2028 \u2029",
	"invalid utf8: \xff\xfe \xc3",
	"<think>\nstep by step\n</think>\n\nDone.",
}

func TestAppendJSONLRoundTrip(t *testing.T) {
	for _, s := range tricky {
		r := exampleResult()
		r.API = APIChat
		r.Text = new(s)
		r.ReasoningContent = new(s + "!")
		r.MatchedStop = s
		line := r.AppendJSONL(nil, s+"-id")
		if !bytes.HasSuffix(line, []byte("\n")) || bytes.Count(line, []byte("\n")) != 1 {
			t.Errorf("%q: line is not exactly one line: %q", s, line)
		}
		var got struct {
			ID               string    `json:"id"`
			OutputIDs        []int     `json:"output_ids"`
			Text             string    `json:"text"`
			ReasoningContent string    `json:"reasoning_content"`
			PromptTokens     int       `json:"prompt_tokens"`
			MatchedStop      string    `json:"matched_stop"`
			E2ELatency       float64   `json:"e2e_latency"`
			FinishedAt       time.Time `json:"finished_at"`
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%q: line is not JSON: %v\n%s", s, err, line)
		}
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatal(err)
		}
		var want string // what encoding/json makes of s: invalid bytes become U+FFFD each
		if err := json.Unmarshal([]byte(encodingJSON(s)), &want); err != nil {
			t.Fatal(err)
		}
		if got.ID != want+"-id" || got.Text != want || got.ReasoningContent != want+"!" || got.MatchedStop != want {
			t.Errorf("round trip of %q: id %q text %q reasoning %q matched %q", s, got.ID, got.Text, got.ReasoningContent, got.MatchedStop)
		}
		if !reflect.DeepEqual(got.OutputIDs, r.OutputIDs) || got.PromptTokens != 812 || got.E2ELatency != 41.207 ||
			!got.FinishedAt.Equal(r.FinishedAt.Truncate(time.Millisecond)) {
			t.Errorf("round trip: %+v", got)
		}
	}
}

// encodingJSON encodes s with encoding/json and SetEscapeHTML(false).
func encodingJSON(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range tricky {
		if got, want := string(appendString(nil, s)), encodingJSON(s); got != want {
			t.Errorf("appendString(%q) = %s; encoding/json gives %s", s, got, want)
		}
	}
	var all []byte
	for b := range 256 {
		all = append(all, byte(b))
	}
	if got, want := string(appendString(nil, string(all))), encodingJSON(string(all)); got != want {
		t.Errorf("all bytes:\n got %s\nwant %s", got, want)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := string(appendString(nil, s)), encodingJSON(s); got != want {
			t.Errorf("appendString(%q) = %s; encoding/json gives %s", s, got, want)
		}
	})
}

func TestAppendFloat(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0", 41.207: "41.207", 0.183: "0.183", 1e-7: "1e-07", 1e21: "1e+21", 123456.5: "123456.5",
		math.NaN(): "null", math.Inf(1): "null",
	} {
		if got := string(appendFloat(nil, f)); got != want {
			t.Errorf("appendFloat(%v) = %s; want %s", f, got, want)
		}
		if want != "null" {
			var back float64
			if err := json.Unmarshal([]byte(want), &back); err != nil || back != f {
				t.Errorf("%s does not decode to %v", want, f)
			}
		}
	}
}

func TestParseMatched(t *testing.T) {
	for raw, want := range map[string]any{
		``: nil, `null`: nil, `128009`: 128009, `"</s>"`: "</s>", `"NaN happened"`: "NaN happened", `1.5`: 1.5, `{}`: nil,
	} {
		if got := parseMatched(json.RawMessage(raw)); got != want {
			t.Errorf("parseMatched(%s) = %#v; want %#v", raw, got, want)
		}
	}
}

// BenchmarkAppendJSONL writes a line with about 10 KB of output_ids.
func BenchmarkAppendJSONL(b *testing.B) {
	r := exampleResult()
	r.OutputIDs = make([]int, 1450)
	for i := range r.OutputIDs {
		r.OutputIDs[i] = 100000 + i*37%63000
	}
	r.Text = new(strings.Repeat("The answer is 42. ", 300))
	buf := r.AppendJSONL(nil, "B2_opencodeinstruct-0000017")
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		buf = r.AppendJSONL(buf[:0], "B2_opencodeinstruct-0000017")
	}
}

// TestAppendFieldsPromptIDs: prompt ids the client computed go after the
// text (and reasoning) and before the counts; AppendFields is the line
// without its id and braces.
func TestAppendFieldsPromptIDs(t *testing.T) {
	r := exampleResult()
	r.PromptIDs = []int{1, 3, 6}
	line := string(r.AppendJSONL(nil, "B2_opencodeinstruct-0000017"))
	want := strings.Replace(exampleLine, `"text":"The answer.",`, `"text":"The answer.","prompt_ids":[1,3,6],`, 1)
	if line != want {
		t.Errorf("line\n%s\nwant\n%s", line, want)
	}
	if fields := string(r.AppendFields(nil)); `{"id":"B2_opencodeinstruct-0000017",`+fields+"}\n" != line {
		t.Errorf("fields %s are not the line's", fields)
	}
}
