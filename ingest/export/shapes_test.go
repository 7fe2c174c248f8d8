package export

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest"
	"gendex/store"
)

// TestExportShapes exports every fixture of testdata/shapes (each answer
// with a prompt of its id, so that the id-less answers, known by their
// file and line, have one too): each answer gets a record with its text,
// or an exclusion whose reason is true of its line.
func TestExportShapes(t *testing.T) {
	type want map[string]string // id: "record: TEXT" or "REASON: part of the detail"
	fixtures := []struct {
		dir, mapping string
		want         want
	}{
		{dir: "anthropic_batch", want: want{"q-001": "record: Paris is the capital of France.", "q-002": "length: finish_reason length"}},
		{dir: "bedrock", want: want{"REC0000001": "record: Seven.", "REC0000002": "record: blue.\n", "REC0000003": "record:  Hi there!", "REC0000004": "record: 4"}},
		{dir: "vertex", want: want{"raw_responses.jsonl:1": "record: Red, green and blue.", "raw_responses.jsonl:2": "length: finish_reason length"}},
		{dir: "gemini_batch", want: want{"request-1": "record: Photosynthesis turns light, water and CO2 into sugar."}},
		{dir: "ollama", want: want{"raw_responses.jsonl:1": "record: The sky is blue because of Rayleigh scattering.", "raw_responses.jsonl:2": "record: Hello!",
			"raw_responses.jsonl:5": "length: finish_reason length", "raw_responses.jsonl:6": "record: Again: blue."}},
		{dir: "llamacpp", want: want{"raw_responses.jsonl:1": "record:  Paris.", "raw_responses.jsonl:4": "length: finish_reason length"}},
		{dir: "tgi", want: want{"raw_responses.jsonl:1": "record:  Deep learning is a subset of machine learning.", "raw_responses.jsonl:2": "record:  Hello",
			"raw_responses.jsonl:5": "record:  Deep Learning"}},
		{dir: "mindie", want: want{"raw_responses.jsonl:1": "length: finish_reason length", "raw_responses.jsonl:4": "length: finish_reason length"}},
		{dir: "responses", want: want{"resp_0a1b2c3d4e5f60718293a4b5c6d7e8f9": "record: 17 + 25 = 42.", "resp_1b2c3d4e5f60718293a4b5c6d7e8f90a": "length: finish_reason length",
			"task-1": "record: Lisbon is the capital of Portugal.", "task-2": "length: finish_reason length",
			"resp_5f607182": "content_filter: finish_reason content_filter"}}, // "I can": a filter ended it
		{dir: "cohere", want: want{"5a3e1b0c-7d2f-4e8a-9b61-0c4d2e7f8a90": "record: Bonjour tout le monde.", "6b4f2c1d-8e3a-4f9b-8c72-1d5e3f8a9b01": "length: finish_reason length",
			"7c5a3d2e-9f4b-4a0c-9d83-2e6f4a9b0c12": "record: Yes."}},
		{dir: "tgi_messages", want: want{"raw_responses.jsonl:1": "record: Deep learning stacks many layers.", "raw_responses.jsonl:2": "length: finish_reason length",
			"raw_responses.jsonl:3": "record: Hello!"}},
		{dir: "gemini", want: want{"aBcDeF12345": "record: 91 is not prime.", "raw_responses.jsonl:2": "length: finish_reason length",
			"gHiJkL67890": "record: Yes, it is."}},
		{dir: "noid_answers", want: want{"raw_responses.jsonl:1": "record: Water boils at 100 degrees Celsius at sea level.",
			"raw_responses.jsonl:2": "record: 97 is the first prime above 90.", "raw_responses.jsonl:3": "length: finish_reason length"}},
		{dir: "mapped", mapping: "id=uid,prompt_tokens=stats.in,completion_tokens=stats.out,finish_reason=end,text=answer.body,error=failure",
			want: want{"m-1": "record: Forty-two.", "m-2": "length: finish_reason length"}},
	}
	for _, fx := range fixtures {
		t.Run(fx.dir, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("../../testdata/shapes", fx.dir, "raw_responses.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			var prompts strings.Builder
			for id := range fx.want {
				fmt.Fprintf(&prompts, `{"id":%q,"text":"Q"}`+"\n", id)
			}
			d, db := fixture(t, prompts.String(), string(raw))
			if fx.mapping != "" { // ingest --map: remembered with the file
				for _, s := range d.Sources {
					if s.Stage == store.Raw {
						s.IDPath = fx.mapping
						if _, err := (&ingest.Indexer{DB: db}).IndexFile(t.Context(), s); err != nil {
							t.Fatal(err)
						}
					}
				}
			}
			res, tok, exc := runExport(t, db, d, Config{Format: Conversations})
			got := want{}
			for _, l := range strings.Split(strings.TrimSpace(tok), "\n") {
				var r struct {
					ID            string    `json:"id"`
					Conversations []message `json:"conversations"`
				}
				if l != "" && json.Unmarshal([]byte(l), &r) == nil {
					got[r.ID] = "record: " + r.Conversations[len(r.Conversations)-1].Content
				}
			}
			for _, l := range strings.Split(strings.TrimSpace(exc), "\n") {
				var e struct{ ID, Reason, Detail string }
				if l != "" && json.Unmarshal([]byte(l), &e) == nil {
					got[e.ID] = e.Reason + ": " + e.Detail
				}
			}
			for id, w := range fx.want {
				if g := got[id]; !strings.HasPrefix(g, w) {
					t.Errorf("%s: %q; want %q", id, g, w)
				}
			}
			if len(got) != len(fx.want) || res.Left[0]+res.Left[1]+res.Left[2] != 0 {
				t.Errorf("%d decided, %v left; want %d, none left: %v", len(got), res.Left, len(fx.want), got)
			}
		})
	}
}

// TestDecideShapeWithoutText: an answer whose text is not where its shape
// keeps it is a bad_answer naming its file:line and its shape; without
// its prompt it is left, before anything else is decided of it.
func TestDecideShapeWithoutText(t *testing.T) {
	c := &Config{Format: Conversations}
	prompt := []byte(`{"id":"p","text":"Q"}`)
	tests := []struct{ line, reason, detail string }{
		{`{"model":"mistral","created_at":"2025-03-01T10:00:10.3Z","response":"","done":true,"done_reason":"stop","prompt_eval_count":9,"eval_count":2}`,
			ReasonBadAnswer, "raw.jsonl (the answer to p): Ollama `/api/generate`, `/api/chat` line: the last event of a stream: its text is in the events before it"},
		{`{"custom_id":"p","result":{"type":"succeeded","message":{"content":[{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":3,"output_tokens":5}}}}`,
			ReasonBadAnswer, "raw.jsonl (the answer to p): Anthropic Message Batches results line: no text where the shape keeps it (result.message.content)"},
		{`{"id":"p","object":"chat.completion.chunk","created":1,"choices":[{"index":0,"delta":{"content":"He"},"finish_reason":null}]}`,
			ReasonBadAnswer, "OpenAI stream chunks (`chat.completion.chunk`) line: an OpenAI stream chunk"},
		{`{"id":"p","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`, "", "AB"},
	}
	for _, tt := range tests {
		d, err := c.DecideLine(t.Context(), "p", []byte(tt.line), "raw.jsonl", prompt, "prompts.jsonl", 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reason != tt.reason || !strings.Contains(string(d.Line), tt.detail) {
			t.Errorf("%s: reason %q, line %s; want %q with %q", tt.line, d.Reason, d.Line, tt.reason, tt.detail)
		}
		if d, _ := c.DecideLine(t.Context(), "p", []byte(tt.line), "raw.jsonl", nil, "", 0); d.Left == "" {
			t.Errorf("%s without its prompt: %+v; want it left", tt.line, d)
		}
	}
}
