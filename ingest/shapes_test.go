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
	unknown      int // records without a completion count (each reported)
	lineIDs      bool
}{
	// 14+9 and 20+1024+2048 prompt tokens; 9+64 = 73 completion tokens.
	{dir: "anthropic_batch", recs: []rec{
		{store.Raw, "q-001", 14, 9, 0, U, "end_turn"},
		{store.Raw, "q-002", 3092, 64, 2048, U, "max_tokens"},
		{store.Errors, "q-003", U, U, U, U, "invalid_request_error"},
		{store.Errors, "q-004", U, U, U, U, "overloaded_error"},
		{store.Errors, "q-005", U, U, U, U, "canceled"},
		{store.Errors, "q-006", U, U, U, U, "expired"},
	}},
	// Claude 12+4, Titan 7+2, Llama 5+4, Converse 9+1; one error.
	{dir: "bedrock", recs: []rec{
		{store.Raw, "REC0000001", 12, 4, U, U, "end_turn"},
		{store.Raw, "REC0000002", 7, 2, U, U, "FINISH"},
		{store.Raw, "REC0000003", 5, 4, U, U, "stop"},
		{store.Raw, "REC0000004", 9, 1, U, U, "end_turn"},
		{store.Errors, "REC0000005", U, U, U, U, "http 400"},
	}},
	// 6 candidates; 12 candidates + 40 thoughts = 52.
	{dir: "vertex", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", 4, 6, U, U, "STOP"},
		{store.Raw, "raw_responses.jsonl:2", 6, 52, 0, 40, "MAX_TOKENS"},
		{store.Errors, "raw_responses.jsonl:3", U, U, U, U, "error"},
	}},
	{dir: "gemini_batch", recs: []rec{
		{store.Raw, "request-1", 8, 11, U, U, "STOP"},
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
		{store.Raw, "raw_responses.jsonl:1", 13, 3, U, U, "eos"},
		{store.Raw, "raw_responses.jsonl:4", 5, 2, 3, U, "limit"},
	}},
	// Line 2 asked for no details: no count. Lines 3, 4: stream events.
	{dir: "tgi", lineIDs: true, unknown: 1, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", U, 11, U, U, "eos_token"},
		{store.Raw, "raw_responses.jsonl:2", U, U, U, U, ""},
		{store.Raw, "raw_responses.jsonl:5", U, 3, U, U, "eos_token"},
	}},
	{dir: "mindie", lineIDs: true, recs: []rec{
		{store.Raw, "raw_responses.jsonl:1", U, 20, U, U, "length"},
		{store.Raw, "raw_responses.jsonl:4", U, 2, U, U, "length"},
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
			if len(k[NoTokens]) != fx.unknown {
				t.Errorf("%d lines reported without a count; want %d: %v", len(k[NoTokens]), fx.unknown, c.problems)
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
	want := []string{"s1 p=-1 c=2 eos_token", "s2 p=9 c=7 stop", "s3 p=4 c=5 word"}
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
		{dir: "mapped", line: 1, shape: "any other", text: "Forty-two.", mapping: shapeFixtures[len(shapeFixtures)-1].mapping},
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
