package ingest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gendex/store"
)

// shapesDir holds a fixture per shape of a batch API or a local server
// (testdata/shapes/<shape>/raw_responses.jsonl): lines written after the
// providers' documentation and SDK test fixtures (see its SOURCES.md),
// each checked by hand below.
const shapesDir = "../testdata/shapes"

// rec is one expected record: stage, id, counts (U: unknown), finish.
type rec struct {
	stage                                 store.Stage
	id                                    string
	prompt, completion, cached, reasoning int64
	finish                                string
}

// shapeFixtures are the fixtures and their hand-checked records (the
// counts added up by hand in the comments).
var shapeFixtures = []struct {
	dir, mapping string
	recs         []rec
	unknown      int // records without a completion count (each reported, but those off)
	lineIDs      bool
	off          []int64 // the line warned of counts that add up to no total they state (once a file)
	offLines     int     // lines whose counts add up to no total (unknown, and no warning of their own)
}{
	// 14+9 and 20+1024+2048 prompt tokens; 9+64 = 73 completion tokens.
	{dir: "anthropic_batch", recs: []rec{
		{store.Raw, "q-001", 14, 9, 0, U, "stop"},
		{store.Raw, "q-002", 3092, 64, 2048, U, "length"},
		{store.Errors, "q-003", U, U, U, U, "invalid_request_error"},
		{store.Errors, "q-004", U, U, U, U, "overloaded_error"},
		{store.Errors, "q-005", U, U, U, U, "canceled"},
		{store.Errors, "q-006", U, U, U, U, "expired"},
	}},
	// Claude 12+4, Titan 7+2, Llama 5+4, Converse 9+1; one error.
	{dir: "bedrock", recs: []rec{
		{store.Raw, "REC0000001", 12, 4, U, U, "stop"},
		{store.Raw, "REC0000002", 7, 2, U, U, "stop"},
		{store.Raw, "REC0000003", 5, 4, U, U, "stop"},
		{store.Raw, "REC0000004", 9, 1, U, U, "stop"},
		{store.Errors, "REC0000005", U, U, U, U, "http 400"},
	}},
	// 6 candidates; 12 candidates + 40 thoughts = 52.
	{dir: "vertex", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", 4, 6, U, U, "stop"},
		{store.Raw, "raw_responses.jsonl:2", 6, 52, 0, 40, "length"},
		{store.Errors, "raw_responses.jsonl:3", U, U, U, U, "error"},
	}},
	{dir: "gemini_batch", recs: []rec{
		{store.Raw, "request-1", 8, 11, U, U, "stop"},
		{store.Errors, "request-2", U, U, U, U, "INVALID_ARGUMENT"},
	}},
	// Lines 3 and 4 are a stream's events before its last (line 5);
	// line 6's prompt came from the cache (no prompt_eval_count).
	{dir: "ollama", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", 26, 12, U, U, "stop"},
		{store.Raw, "raw_responses.jsonl:2", 11, 30, U, U, "stop"},
		{store.Raw, "raw_responses.jsonl:5", 9, 2, U, U, "length"},
		{store.Raw, "raw_responses.jsonl:6", U, 4, U, U, "stop"},
	}},
	// Lines 2 and 3 are events of the stream whose last is line 4.
	{dir: "llamacpp", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", 13, 3, U, U, "stop"},
		{store.Raw, "raw_responses.jsonl:4", 5, 2, 3, U, "length"},
	}},
	// Line 2 asked for no details: no count. Lines 3, 4: stream events.
	{dir: "tgi", lineIDs: true, unknown: 1, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", U, 11, U, U, "stop"},
		{store.Raw, "raw_responses.jsonl:2", U, U, U, U, ""},
		{store.Raw, "raw_responses.jsonl:5", U, 3, U, U, "stop"},
	}},
	{dir: "mindie", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", U, 20, U, U, "length"},
		{store.Raw, "raw_responses.jsonl:4", U, 2, U, U, "length"},
	}},
	// The Responses API: reasoning inside output_tokens (31+212 = 243);
	// a cut one (status incomplete, max_output_tokens) alone and in a
	// Batch line; a failed one is an error; a filtered one keeps its
	// reason.
	{dir: "responses", recs: []rec{
		{store.Raw, "resp_0a1b2c3d4e5f60718293a4b5c6d7e8f9", 31, 212, 0, 180, "stop"},
		{store.Raw, "resp_1b2c3d4e5f60718293a4b5c6d7e8f90a", 18, 64, 0, 64, "length"},
		{store.Errors, "resp_2c3d4e5f60718293a4b5c6d7e8f90a1b", U, U, U, U, "server_error"},
		{store.Raw, "task-1", 22, 8, 0, 0, "stop"},
		{store.Raw, "task-2", 25, 12, 0, 0, "length"},
		{store.Raw, "resp_5f607182", 40, 2, 32, 0, "content_filter"},
	}},
	// Cohere v2: usage.tokens (the tokens the model read and wrote), else
	// usage.billed_units; COMPLETE and MAX_TOKENS.
	{dir: "cohere", recs: []rec{
		{store.Raw, "5a3e1b0c-7d2f-4e8a-9b61-0c4d2e7f8a90", 215, 6, U, U, "stop"},
		{store.Raw, "6b4f2c1d-8e3a-4f9b-8c72-1d5e3f8a9b01", 230, 20, U, U, "length"},
		{store.Raw, "7c5a3d2e-9f4b-4a0c-9d83-2e6f4a9b0c12", 4, 2, U, U, "stop"},
	}},
	// 20+50+204 = 274: the reasoning is beside the completion, which is
	// 254; 15+120 = 135: inside; 10+30(+5) is not 99 and 7+9 is not 50:
	// unknown, one warning; 12+32 cached+8 = 52: the cached tokens are
	// beside the prompt, which is 44.
	{dir: "reasoning_total", unknown: 2, off: []int64{3}, offLines: 2, recs: []rec{
		{store.Raw, "chatcmpl-r1", 20, 254, U, 204, "stop"},
		{store.Raw, "chatcmpl-r2", 15, 120, U, 100, "stop"},
		{store.Raw, "chatcmpl-r3", U, U, U, U, "stop"},
		{store.Raw, "chatcmpl-r4", U, U, U, U, "stop"},
		{store.Raw, "chatcmpl-r5", 44, 8, 32, U, "stop"},
	}},
	// "id": "" and "id": null are no id: each answer is known by its line.
	{dir: "tgi_messages", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", 42, 7, U, U, "stop"},
		{store.Raw, "raw_responses.jsonl:2", 40, 16, U, U, "length"},
		{store.Raw, "raw_responses.jsonl:3", 30, 5, U, U, "stop"},
	}},
	// Older llama.cpp: stopped_eos, stopped_limit, stopped_word.
	{dir: "llamacpp_old", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", 9, 3, U, U, "stop"},
		{store.Raw, "raw_responses.jsonl:2", 6, 32, U, U, "length"},
		{store.Raw, "raw_responses.jsonl:3", 7, 5, U, U, "stop"},
	}},
	// Ollama streams whose last object has no message (or response).
	{dir: "ollama_chat", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:3", 14, 3, U, U, "stop"},
		{store.Raw, "raw_responses.jsonl:5", 9, 16, U, U, "length"},
	}},
	// Gemini generateContent: 9+6+48 = 63, the thoughts beside the
	// candidates (54); 5+40 = 45, inside; line 2 has no responseId.
	{dir: "gemini", lineIDs: true, recs: []rec{
		{store.Raw, "aBcDeF12345", 9, 54, U, 48, "stop"},
		{store.Raw, "raw_responses.jsonl:2", 11, 16, U, U, "length"},
		{store.Raw, "gHiJkL67890", 5, 40, U, 30, "stop"},
	}},
	// Answers with no id at any known place, of shapes no row names: an
	// OpenAI chat answer without "id", a flat answer, a generation with
	// its text and finish reason, its counts read where their names say
	// (meta.billed_units.input_tokens, output_tokens). Each is known by
	// its line.
	{dir: "noid_answers", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", 21, 12, U, U, "stop"},
		{store.Raw, "raw_responses.jsonl:2", 14, 10, U, U, "stop"},
		{store.Raw, "raw_responses.jsonl:3", 9, 16, U, U, "length"},
	}},
	// Bodies that came with HTTP 200 and report a failure in their own
	// status fields (a code neither 0 nor 2xx, a message, no reply): each
	// is an error, one without an id known by its line; line 1's status 0
	// is a success.
	{dir: "status_errors", recs: []rec{
		{store.Raw, "04a7c2e19b3f4d6a8c5e1f2b3a4d5c6e", 27, 4, U, U, "stop"},
		{store.Errors, "04a7c2f03e6b4a1c9d2e8f7a6b5c4d3e", U, U, U, U, "code 1008"},
		{store.Errors, "04a7c3118d2c4f5e9a0b1c2d3e4f5a6b", U, U, U, U, "code 1002"},
		{store.Errors, "raw_responses.jsonl:4", U, U, U, U, "code 336003"},
		{store.Errors, "as-x7k2m9p4q1", U, U, U, U, "http 500"},
	}},
	// Streams whose last chunk carries its usage inside its choice, and a
	// whole answer that does the same: 19+3, 40+8 (32 cached), 12+2.
	{dir: "choice_usage", recs: []rec{
		{store.Raw, "chatcmpl-67b4e0a9c1d2e3f4a5b6c7d8", 19, 3, U, U, "stop"},
		{store.Raw, "chatcmpl-67b4e1d5f6a7b8c9d0e1f2a3", 40, 8, 32, U, "length"},
		{store.Raw, "chatcmpl-67b4e2aa0b1c2d3e4f5a6b7c", 12, 2, U, U, "stop"},
	}},
	// Issue 54's classes, each by rule. A server's own body with no id
	// (Triton's generate: text_output) is an answer known by its line,
	// its counts unknown; its error body an error.
	{dir: "triton_generate", lineIDs: true, unknown: 3, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", U, U, U, U, ""},
		{store.Raw, "raw_responses.jsonl:2", U, U, U, U, ""},
		{store.Errors, "raw_responses.jsonl:3", U, U, U, U, "error"},
		{store.Raw, "raw_responses.jsonl:4", U, U, U, U, ""},
	}},
	// curator: no id; response_message is the answer (a string or an
	// object), token_usage.{input,output} its counts (nearer than the
	// raw response's usage); response_errors beside a null message is an
	// error.
	{dir: "curator", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", 19, 15, U, U, "stop"},
		{store.Errors, "raw_responses.jsonl:2", U, U, U, U, "error"},
		{store.Raw, "raw_responses.jsonl:3", 31, 17, U, U, "length"},
	}},
	// Replicate predictions: metrics.input_token_count and
	// output_token_count; "succeeded" is a lifecycle, no finish reason;
	// "failed" (with its error) and "canceled" (with part of an answer)
	// are errors with that reason; line 4 states no counts.
	{dir: "replicate", unknown: 1, recs: []rec{
		{store.Raw, "q8x2mzk1h5rm80cmj4bbtv7yg4", 24, 11, U, U, ""},
		{store.Errors, "r7k1nq2v9hrm80cmj4cc3bz0ta", U, U, U, U, "failed"},
		{store.Errors, "s3m9xw0t2drm80cmj4dd5gh8qc", U, U, U, U, "canceled"},
		{store.Raw, "t5p0vr6e1srm80cmj4ee7kd2wm", U, U, U, U, ""},
	}},
	// Ray Data LLM rows: num_input_tokens and num_generated_tokens, under
	// its request_id (a server's id: one warning).
	{dir: "ray_data", lineIDs: true, recs: []rec{
		{store.Raw, "0", 18, 9, U, U, ""},
		{store.Raw, "1", 15, 3, U, U, ""},
	}},
	// datatrove documents: the top-level text is the input; the answer is
	// the only one in metadata.inference_results; an error there is an
	// error; two answers there are none (unknown: which is not said).
	{dir: "datatrove", unknown: 1, recs: []rec{
		{store.Raw, "doc-000", 48, 11, U, U, "stop"},
		{store.Errors, "doc-001", U, U, U, U, "error"},
		{store.Raw, "doc-002", U, U, U, U, ""},
		{store.Raw, "doc-003", 39, 64, U, U, "length"},
	}},
	// An error object in the answer's place (a batch line's response or
	// result, a gateway body's errors beside a null result); a result
	// object that is an answer is read as one.
	{dir: "error_in_answer", lineIDs: true, recs: []rec{
		{store.Raw, "req-1", 12, 2, U, U, "stop"},
		{store.Errors, "req-2", U, U, U, U, "model_not_found"},
		{store.Errors, "req-3", U, U, U, U, "rate_limit_exceeded"},
		{store.Raw, "raw_responses.jsonl:4", 9, 2, U, U, ""},
		{store.Errors, "raw_responses.jsonl:5", U, U, U, U, "error"},
	}},
	// Bodies that are a list of one object (the Hugging Face Inference
	// API's): that object is the line's, an answer known by its line.
	{dir: "hf_inference", lineIDs: true, unknown: 1, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", U, U, U, U, ""},
		{store.Raw, "raw_responses.jsonl:2", U, 8, U, U, "length"},
		{store.Errors, "raw_responses.jsonl:3", U, U, U, U, "error"},
	}},
	{dir: "mapped", mapping: "id=uid,prompt_tokens=stats.in,completion_tokens=stats.out,finish_reason=end,text=answer.body,error=failure", recs: []rec{
		{store.Raw, "m-1", 30, 12, U, U, "stop"},
		{store.Raw, "m-2", 8, 64, U, U, "length"},
		{store.Errors, "m-3", U, U, U, U, "error"},
	}},
}

// TestShapes indexes each fixture and checks every record, the counters,
// and the warnings: answers without an id are known by their file and
// line, said once per file; a stream's events before its last are no
// records of their own.
func TestShapes(t *testing.T) {
	t.Parallel()
	for _, fx := range shapeFixtures {
		t.Run(fx.dir, func(t *testing.T) {
			path, err := filepath.Abs(filepath.Join(shapesDir, fx.dir, "raw_responses.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			db := openDB(t)
			var c collector
			res := index(t, &Indexer{DB: db, Report: c.report}, Source{Path: path, Dataset: "s", Stage: store.Raw, IDPath: fx.mapping})
			var got []string
			for st := store.Prompts; st <= store.Errors; st++ {
				err := db.View(func(v *store.View) error {
					return v.Each("s", st, func(r *store.Record) error {
						got = append(got, fmt.Sprintf("%s %s p=%d c=%d cached=%d r=%d finish=%q", st, r.ID, r.PromptTokens, r.CompletionTokens, r.CachedTokens, r.ReasoningTokens, r.Finish))
						return nil
					})
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			var want []string
			var tokens, prompt uint64
			for _, r := range fx.recs {
				want = append(want, fmt.Sprintf("%s %s p=%d c=%d cached=%d r=%d finish=%q", r.stage, r.id, r.prompt, r.completion, r.cached, r.reasoning, r.finish))
				if r.stage == store.Raw {
					tokens += uint64(max(r.completion, 0))
					prompt += uint64(max(r.prompt, 0))
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("records:\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
			}
			s := summary(t, db, "s").Stage(store.Raw)
			if s.CompletionTokens != tokens || s.PromptTokens != prompt || s.UnknownCompletion != uint64(fx.unknown) {
				t.Errorf("raw: %d completion, %d prompt, %d unknown; want %d, %d, %d", s.CompletionTokens, s.PromptTokens, s.UnknownCompletion, tokens, prompt, fx.unknown)
			}
			k := c.kinds()
			if res.Skipped != 0 || len(k[NoID]) != 0 || len(k[Invalid]) != 0 {
				t.Errorf("%d lines skipped: %v", res.Skipped, c.problems)
			}
			if len(k[NoTokens]) != fx.unknown-fx.offLines {
				t.Errorf("%d lines reported without a count; want %d: %v", len(k[NoTokens]), fx.unknown-fx.offLines, c.problems)
			}
			if !slices.Equal(k[BadCount], fx.off) {
				t.Errorf("counts that add up to no total warned of at lines %v; want %v: %v", k[BadCount], fx.off, c.problems)
			}
			if n := len(k[ServerID]); fx.lineIDs != (n == 1) || n > 1 {
				t.Errorf("%d warnings of ids no prompt carries; want one when the answers have no id: %v", n, c.problems)
			}
		})
	}
}

// TestShapesNoIDSaysWhy: the warning for answers without an id names
// their line id, says they cannot be matched to prompts, and how to give
// an id.
func TestShapesNoIDSaysWhy(t *testing.T) {
	t.Parallel()
	path, _ := filepath.Abs(filepath.Join(shapesDir, "vertex", "raw_responses.jsonl"))
	var c collector
	index(t, &Indexer{DB: openDB(t), Report: c.report}, Source{Path: path, Dataset: "s", Stage: store.Raw})
	var msg string
	for _, p := range c.problems {
		if p.Kind == ServerID {
			msg = p.Msg
		}
	}
	for _, want := range []string{`"raw_responses.jsonl:1"`, "cannot be matched to prompts", "--id request.labels.KEY"} {
		if !strings.Contains(msg, want) {
			t.Errorf("warning %q does not say %q", msg, want)
		}
	}
}

// TestShapesStreamWithID: a stream whose events carry an id (here given
// with --id) is one record with the counts and finish reason of its last
// event, whichever shape it is.
func TestShapesStreamWithID(t *testing.T) {
	t.Parallel()
	lines := `{"req":"s1","index":1,"token":{"id":5,"text":" a","logprob":-0.1,"special":false},"generated_text":null,"details":null}
{"req":"s2","model":"mistral","created_at":"2025-03-01T10:00:10.1Z","response":"Hi","done":false}
{"req":"s1","index":2,"token":{"id":2,"text":"</s>","logprob":-0.2,"special":true},"generated_text":" a","details":{"finish_reason":"eos_token","generated_tokens":2,"seed":null}}
{"req":"s2","model":"mistral","created_at":"2025-03-01T10:00:10.3Z","response":"","done":true,"done_reason":"stop","prompt_eval_count":9,"eval_count":7}
{"req":"s3","index":0,"content":"x","tokens":[],"stop":false,"id_slot":-1,"tokens_predicted":1,"tokens_evaluated":4}
{"req":"s3","index":0,"content":"","tokens":[],"stop":true,"tokens_predicted":5,"tokens_evaluated":4,"stop_type":"word","timings":{"prompt_n":4}}
`
	path := filepath.Join(t.TempDir(), "raw_responses.jsonl")
	os.WriteFile(path, []byte(lines), 0o644)
	db := openDB(t)
	var c collector
	index(t, &Indexer{DB: db, Report: c.report}, Source{Path: path, Dataset: "s", Stage: store.Raw, IDPath: "req"})
	var got []string
	db.View(func(v *store.View) error {
		return v.Each("s", store.Raw, func(r *store.Record) error {
			got = append(got, fmt.Sprintf("%s p=%d c=%d %s", r.ID, r.PromptTokens, r.CompletionTokens, r.Finish))
			return nil
		})
	})
	want := []string{"s1 p=-1 c=2 stop", "s2 p=9 c=7 stop", "s3 p=4 c=5 stop"} // eos_token and word are stops
	if !slices.Equal(got, want) {
		t.Errorf("records %q; want %q", got, want)
	}
	if s := summary(t, db, "s").Stage(store.Raw); s.Records != 3 || s.Duplicates != 0 || s.UnknownCompletion != 0 || s.CompletionTokens != 14 {
		t.Errorf("summary %+v; want 3 records, 14 tokens, no duplicate, none unknown", s)
	}
	if len(c.problems) != 0 {
		t.Errorf("problems: %v", c.problems)
	}
}

// TestReadAnswerShapes: export's reading of every fixture line that is
// an answer finds its text (and reasoning) where its shape keeps it, or
// says why it has none.
func TestReadAnswerShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		dir     string
		line    int
		shape   string
		text    string // "": none
		reason  string
		noText  string // part of NoText
		mapping string
	}{
		{dir: "anthropic_batch", line: 1, shape: "Anthropic Message Batches results", text: "Paris is the capital of France."},
		{dir: "anthropic_batch", line: 2, shape: "Anthropic Message Batches results", text: "There are three.", reason: "Count the r letters one by one."},
		{dir: "bedrock", line: 1, shape: "AWS Bedrock", text: "Seven."},
		{dir: "bedrock", line: 2, shape: "AWS Bedrock", text: "blue.\n"},
		{dir: "bedrock", line: 3, shape: "AWS Bedrock", text: " Hi there!"},
		{dir: "bedrock", line: 4, shape: "AWS Bedrock", text: "4"},
		{dir: "vertex", line: 1, shape: "Vertex AI", text: "Red, green and blue."},
		{dir: "vertex", line: 2, shape: "Vertex AI", text: "No, 91 is 7 times 13.", reason: "91 = 7 x 13."},
		{dir: "gemini_batch", line: 1, shape: "Vertex AI", text: "Photosynthesis turns light, water and CO2 into sugar."},
		{dir: "ollama", line: 1, shape: "Ollama", text: "The sky is blue because of Rayleigh scattering."},
		{dir: "ollama", line: 2, shape: "Ollama", text: "Hello!", reason: "The user greets me."},
		{dir: "ollama", line: 5, shape: "Ollama", noText: "the last event of a stream"},
		{dir: "llamacpp", line: 1, shape: "llama.cpp", text: " Paris."},
		{dir: "llamacpp", line: 4, shape: "llama.cpp", noText: "its text is in the events before it"},
		{dir: "tgi", line: 1, shape: "TGI", text: " Deep learning is a subset of machine learning."},
		{dir: "tgi", line: 5, shape: "TGI", text: " Deep Learning"},
		{dir: "mindie", line: 4, shape: "MindIE", text: "am a"},
		{dir: "responses", line: 1, shape: "Responses API", text: "17 + 25 = 42.", reason: "Add the two numbers."},
		{dir: "responses", line: 4, shape: "Responses API", text: "Lisbon is the capital of Portugal."},
		{dir: "cohere", line: 2, shape: "Cohere", text: "1. Apples\n2. Pears\n3.", reason: "The user wants a list of fruit."},
		{dir: "tgi_messages", line: 1, shape: "OpenAI chat", text: "Deep learning stacks many layers."},
		{dir: "gemini", line: 1, shape: "Gemini API", text: "91 is not prime.", reason: "Think: 91 = 7 x 13."},
		{dir: "ollama_chat", line: 3, shape: "Ollama", noText: "the last event of a stream"},
		{dir: "mapped", line: 1, shape: "any other", text: "Forty-two.", mapping: shapeFixtures[len(shapeFixtures)-1].mapping},
		// A field named as the answer, or the answer nested in the line:
		// never a top-level text that is the input.
		{dir: "triton_generate", line: 1, shape: "gendex", text: "A prime number has exactly two divisors: 1 and itself."},
		{dir: "curator", line: 1, shape: "gendex", text: "Volcanoes form where magma reaches the surface through cracks in the crust."},
		{dir: "replicate", line: 1, shape: "gendex", text: "The sky looks blue because air scatters blue light most."},
		{dir: "ray_data", line: 1, shape: "TGI", text: "7 times 8 is 56."},
		{dir: "datatrove", line: 1, shape: "OpenAI chat", text: "The committee approved funding for a new library wing."},
		{dir: "datatrove", line: 3, shape: "gendex", noText: "several answers are nested in the line (the first at metadata.inference_results.0)"},
		{dir: "error_in_answer", line: 4, shape: "OpenAI chat", text: "Four."},
		{dir: "hf_inference", line: 1, shape: "TGI", text: "Gravity pulls objects toward one another in proportion to their mass."},
	}
	for _, tt := range tests {
		data, err := os.ReadFile(filepath.Join(shapesDir, tt.dir, "raw_responses.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		line := []byte(strings.Split(string(data), "\n")[tt.line-1])
		m, err := ParseIDPath(tt.mapping)
		if err != nil {
			t.Fatal(err)
		}
		a, err := ReadAnswer(line, m)
		if err != nil {
			t.Errorf("%s:%d: %v", tt.dir, tt.line, err)
			continue
		}
		text := ""
		if a.TextRaw != nil {
			text, _ = DecodeString(a.TextRaw)
		} else if a.Text != nil {
			text = *a.Text
		}
		if !strings.HasPrefix(a.Shape, tt.shape) || text != tt.text || a.Reasoning != tt.reason || !strings.Contains(a.NoText, tt.noText) || (tt.text == "") == (a.NoText == "") {
			t.Errorf("%s:%d: shape %q, text %q, reasoning %q, no text %q; want %q, %q, %q, %q", tt.dir, tt.line, a.Shape, text, a.Reasoning, a.NoText, tt.shape, tt.text, tt.reason, tt.noText)
		}
	}
}

// TestFormatsTable: README's "Formats it reads" table is FormatsTable,
// the table the code reads by.
func TestFormatsTable(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Skip(err)
	}
	s := string(b)
	at := strings.Index(s, "## Formats it reads")
	if at < 0 {
		t.Fatal(`README has no "## Formats it reads" section`)
	}
	s = s[at:]
	start := strings.Index(s, "\n| shape |")
	if start < 0 {
		t.Fatal(`README's "Formats it reads" has no table starting "| shape |"`)
	}
	s = s[start+1:]
	end := strings.Index(s, "\n\n")
	if end >= 0 {
		s = s[:end+1]
	}
	if want := FormatsTable(); s != want {
		t.Errorf("README's table of shapes is not FormatsTable(); paste this into README's \"Formats it reads\":\n%s", want)
	}
}

// TestMappingText: a mapping's text form, read back, is the same text;
// --id alone keeps the form earlier versions stored.
func TestMappingText(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ id, pairs, want string }{
		{"meta.uid", "", "meta.uid"},
		{"", "", ""},
		{"uid", "completion_tokens=stats.out,prompt_tokens=stats.in", "id=uid,prompt_tokens=stats.in,completion_tokens=stats.out"},
		{"", "text=a.b,id=x", "id=x,text=a.b"},
	} {
		got, err := JoinMapping(c.id, c.pairs)
		if err != nil || got != c.want {
			t.Errorf("JoinMapping(%q, %q) = %q, %v; want %q", c.id, c.pairs, got, err, c.want)
			continue
		}
		m, err := ParseIDPath(got)
		if err != nil || m.String() != got {
			t.Errorf("ParseIDPath(%q).String() = %q, %v", got, m.String(), err)
		}
	}
	for _, bad := range [][2]string{{"", "tokens=x"}, {"a", "id=b"}, {"", "text=a..b"}, {"", "text=a,text=b"}, {"", "stats.out"}} {
		if _, err := JoinMapping(bad[0], bad[1]); err == nil {
			t.Errorf("JoinMapping(%q, %q): no error", bad[0], bad[1])
		}
	}
}
