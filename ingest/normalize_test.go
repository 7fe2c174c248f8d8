package ingest

import (
	"bufio"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"strings"
	"testing"
	"time"

	"gendex/store"
)

const U = store.Unknown

func ms(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixMilli()
}

// TestNormalizeShapes checks one line of every shape in README.md's table
// ("Formats it reads").
func TestNormalizeShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		line       string
		stage      store.Stage
		wantStage  store.Stage
		id         string
		shape      store.Shape
		prompt     int64
		completion int64
		cached     int64
		reasoning  int64
		finish     string
		time       int64
	}{
		{"flat", `{"id":"a","output_ids":[1,2,3],"text":"x","prompt_tokens":812,"completion_tokens":10,"cached_tokens":256,"reasoning_tokens":0,"finish_reason":"stop","finished_at":"2026-11-28T09:14:03.512Z"}`,
			store.Raw, store.Raw, "a", store.ShapeFlat, 812, 10, 256, 0, "stop", ms("2026-11-28T09:14:03.512Z")},
		{"sglang generate", `{"id":"b","text":"t","output_ids":[791,4320],"meta_info":{"id":"9f1c","finish_reason":{"type":"length","length":5},"prompt_tokens":640,"completion_tokens":5,"cached_tokens":0,"reasoning_tokens":0,"e2e_latency":12.5,"response_sent_to_client_ts":1796064752.115}}`,
			store.Raw, store.Raw, "b", store.ShapeSGLang, 640, 5, 0, 0, "length", 1796064752115},
		{"openai chat", `{"id":"c","object":"chat.completion","created":1796064752,"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop","matched_stop":163586}],"usage":{"prompt_tokens":301,"total_tokens":322,"completion_tokens":21,"prompt_tokens_details":null,"reasoning_tokens":0}}`,
			store.Raw, store.Raw, "c", store.ShapeOpenAI, 301, 21, U, 0, "stop", 1796064752000},
		{"openai details", `{"id":"c2","usage":{"prompt_tokens":3,"completion_tokens":4,"prompt_tokens_details":{"cached_tokens":2},"completion_tokens_details":{"reasoning_tokens":1}}}`,
			store.Raw, store.Raw, "c2", store.ShapeOpenAI, 3, 4, 2, 1, "", 0},
		{"batch", `{"id":"batch_req_6a1f","custom_id":"B3-42","response":{"status_code":200,"request_id":"req_77","body":{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":55,"completion_tokens":2,"total_tokens":57}}},"error":null}`,
			store.Raw, store.Raw, "B3-42", store.ShapeBatch, 55, 2, U, U, "stop", 0},
		{"batch error", `{"id":"batch_req_6a20","custom_id":"B3-43","response":null,"error":{"code":"context_length_exceeded","message":"too long"}}`,
			store.Raw, store.Errors, "B3-43", store.ShapeError, U, U, U, U, "context_length_exceeded", 0},
		{"batch http error", `{"custom_id":"B3-44","response":{"status_code":429,"body":{"error":{"message":"slow down"}}},"error":null}`,
			store.Raw, store.Errors, "B3-44", store.ShapeError, U, U, U, U, "http 429", 0},
		{"ids only", `{"id":"d","output_ids":[17,29,31,2]}`,
			store.Raw, store.Raw, "d", store.ShapeIDsOnly, U, 4, U, U, "", 0},
		{"no counts", `{"id":"e","text":"hello"}`,
			store.Raw, store.Raw, "e", store.ShapeUnknown, U, U, U, U, "", 0},
		{"turn", `{"id":"c#1","turn":2,"output_ids":[5,6],"text":"x","prompt_tokens":40,"completion_tokens":2,"finish_reason":"stop","finished_at":"2026-11-28T09:14:03.512Z"}`,
			store.Turns, store.Turns, "c#1#2", store.ShapeFlat, 40, 2, U, U, "stop", ms("2026-11-28T09:14:03.512Z")},
		{"conversation", `{"id":"c","turns":[{"output_ids":[1],"prompt_tokens":10,"completion_tokens":1},{"output_ids":[2,3],"prompt_tokens":20,"completion_tokens":2}],"prompt_tokens":30,"completion_tokens":3,"finish_reason":"stop"}`,
			store.Raw, store.Raw, "c", store.ShapeFlat, 30, 3, U, U, "stop", 0},
		{"excluded", `{"id":"x","reason":"length","detail":"truncated at max_new_tokens","excluded_at":"2026-11-28T09:14:03.512Z"}`,
			store.Excluded, store.Excluded, "x", store.ShapeExcluded, U, U, U, U, "length", ms("2026-11-28T09:14:03.512Z")}, // excluded_at: its own time (store tells one made before its answer)
		{"null counts", `{"id":"f","completion_tokens":null,"prompt_tokens":"12"}`,
			store.Raw, store.Raw, "f", store.ShapeUnknown, U, U, U, U, "", 0},
		{"flat wins over nested", `{"id":"g","completion_tokens":9,"usage":{"completion_tokens":1}}`,
			store.Raw, store.Raw, "g", store.ShapeFlat, U, 9, U, U, "", 0},
		{"zero is a count", `{"id":"h","completion_tokens":0}`,
			store.Raw, store.Raw, "h", store.ShapeFlat, U, 0, U, U, "", 0},
		{"numeric id", `{"id":17,"completion_tokens":1.0}`,
			store.Raw, store.Raw, "17", store.ShapeFlat, U, 1, U, U, "", 0},
		{"escaped id", `{"id":"a\"b\u00e9","completion_tokens":1}`,
			store.Raw, store.Raw, "a\"bé", store.ShapeFlat, U, 1, U, U, "", 0},
		{"last duplicate key wins", `{"id":"x","id":"y","completion_tokens":1}`,
			store.Raw, store.Raw, "y", store.ShapeFlat, U, 1, U, U, "", 0},
		{"gendex error line", `{"id":"i","status":400,"error":"The input (40000 tokens) is longer than the model's context length (32768 tokens).","server":"http://h"}`,
			store.Errors, store.Errors, "i", store.ShapeError, U, U, U, U, "http 400", 0},
		{"prompt ids", `{"id":"p","input_ids":[1,2,3],"max_new_tokens":10}`,
			store.Prompts, store.Prompts, "p", store.ShapePrompt, 3, U, U, U, "", 0},
		{"prompt messages", `{"id":"q","messages":[{"role":"user","content":"hi"}]}`,
			store.Prompts, store.Prompts, "q", store.ShapePrompt, U, U, U, U, "", 0},
		{"tokenized", `{"id":"t","input_ids":[1,2,3,4],"loss_mask":[0,0,1,1]}`,
			store.Tokenized, store.Tokenized, "t", store.ShapeTokenized, 4, U, U, U, "", 0},
		{"spaces everywhere", " { \"id\" : \"s\" , \"output_ids\" : [ 1 , 2 ] } ",
			store.Raw, store.Raw, "s", store.ShapeIDsOnly, U, 2, U, U, "", 0},
		// Shapes other tools write (modelled on ../shared/realworld).
		{"old vllm run-batch: response is the completion", `{"id":"vllm-7a1","custom_id":"req-9","response":{"id":"cmpl-3b","object":"chat.completion","created":1715000000,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":{"prompt_tokens":17,"total_tokens":29,"completion_tokens":12}},"error":null}`,
			store.Raw, store.Raw, "req-9", store.ShapeBatch, 17, 12, U, U, "length", 1715000000000},
		{"dashscope native: request_id, input/output tokens", `{"status_code":200,"request_id":"5c0e-77","code":"","message":"","output":{"text":null,"finish_reason":"stop","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]},"usage":{"input_tokens":40,"output_tokens":7,"total_tokens":47}}`,
			store.Raw, store.Raw, "5c0e-77", store.ShapeOpenAI, 40, 7, U, U, "stop", 0},
		{"dashscope text output", `{"status_code":200,"request_id":"5c0e-78","output":{"text":"ok","finish_reason":"length"},"usage":{"input_tokens":4,"output_tokens":30}}`,
			store.Raw, store.Raw, "5c0e-78", store.ShapeOpenAI, 4, 30, U, U, "length", 0},
		{"anthropic message", `{"id":"msg_01X","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":25,"output_tokens":9}}`,
			store.Raw, store.Raw, "msg_01X", store.ShapeOpenAI, 25, 9, U, U, "stop", 0}, // end_turn is a stop,
		{"openai names win over input/output", `{"id":"u","usage":{"output_tokens":1,"completion_tokens":2,"input_tokens":3,"prompt_tokens":4}}`,
			store.Raw, store.Raw, "u", store.ShapeOpenAI, 4, 2, U, U, "", 0},
		{"sglang native: only the server's meta_info.id", `{"text":" Paris.","output_ids":[12,13],"meta_info":{"id":"4d2f0a","finish_reason":{"type":"stop","matched":2},"prompt_tokens":6,"completion_tokens":2,"cached_tokens":0}}`,
			store.Raw, store.Raw, "4d2f0a", store.ShapeSGLang, 6, 2, 0, U, "stop", 0},
		{"stream chunk with usage", `{"id":"chatcmpl-s1","choices":[],"created":1762500000,"model":"m","object":"chat.completion.chunk","usage":{"completion_tokens":9,"prompt_tokens":56,"total_tokens":65,"prompt_tokens_details":null}}`,
			store.Raw, store.Raw, "chatcmpl-s1", store.ShapeOpenAI, 56, 9, U, U, "", 1762500000000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r store.Record
			st, err := Normalize([]byte(tt.line), tt.stage, &r)
			if err != nil {
				t.Fatalf("Normalize: %v", err)
			}
			if st != tt.wantStage || r.ID != tt.id || r.Shape != tt.shape {
				t.Errorf("stage, id, shape = %v, %q, %v; want %v, %q, %v", st, r.ID, r.Shape, tt.wantStage, tt.id, tt.shape)
			}
			got := [4]int64{r.PromptTokens, r.CompletionTokens, r.CachedTokens, r.ReasoningTokens}
			want := [4]int64{tt.prompt, tt.completion, tt.cached, tt.reasoning}
			if got != want {
				t.Errorf("prompt, completion, cached, reasoning = %v; want %v", got, want)
			}
			if r.Finish != tt.finish {
				t.Errorf("finish = %q; want %q", r.Finish, tt.finish)
			}
			if r.Time != tt.time || r.OwnTime != (tt.time != 0) {
				t.Errorf("time = %d (own %v); want %d", r.Time, r.OwnTime, tt.time)
			}
		})
	}
}

func TestNormalizeErrorMessage(t *testing.T) {
	t.Parallel()
	var r store.Record
	st, err := Normalize([]byte(`{"id":"i","status":400,"error":"bad prompt"}`), store.Errors, &r)
	if err != nil || st != store.Errors || r.Message != "bad prompt" || r.Finish != "http 400" {
		t.Fatalf("got %v %v %+v", st, err, r)
	}
}

func TestNormalizeRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		want error // nil means "a syntax error"
	}{
		{`{"id":"a",`, nil},
		{`{"id":"a"} x`, nil},
		{`{"id":"a\x01"}`, nil},
		{`{"id":"a\q"}`, nil},
		{`{"id":01}`, nil},
		{`{"id":-}`, nil},
		{`{"id":1.}`, nil},
		{`{"id":tru}`, nil},
		{`{'id':1}`, nil},
		{``, nil},
		{`[1,2]`, ErrNotObject},
		{`"id"`, ErrNotObject},
		{`{"text":"x"}`, ErrNoID},
		{`{"id":""}`, ErrNoID},
		{`{"id":null}`, ErrNoID},
		{`{"id":{"a":1}}`, ErrNoID},
	}
	for _, tt := range tests {
		var r store.Record
		_, err := Normalize([]byte(tt.line), store.Raw, &r)
		if err == nil {
			t.Errorf("Normalize(%q) = nil error", tt.line)
			continue
		}
		var se *syntaxError
		if tt.want == nil && !errors.As(err, &se) {
			t.Errorf("Normalize(%q) = %v; want a syntax error", tt.line, err)
		}
		if tt.want != nil && !errors.Is(err, tt.want) {
			t.Errorf("Normalize(%q) = %v; want %v", tt.line, err, tt.want)
		}
	}
}

// reference is what Normalize must find in a line, read with encoding/json.
// Where the normalizer deliberately differs from decoding into Go integers,
// its rule is stated here on encoding/json's exact value of the number:
//
//   - A count is a JSON number whose value is a whole number in [0, 2^53],
//     however it is written: 12.0, 1.2e1 and -0 count. (encoding/json into
//     an int64 rejects 12.0 and 1.2e1; into a uint64 it also rejects -0.)
//   - An id is a non-empty string or a number, as written (json.Number's
//     text: 17, 1e2), from "custom_id" when it has one, else from "id",
//     else from a server's request id: "meta_info.id", then "request_id".
//
// completion is U when completion_tokens is absent or not a count, and
// countKnown is false when big.Rat cannot say (an exponent past 10^6) or
// is not asked: a number past 1000 bytes, as big.Rat's cost grows with the
// square of its length (TestDecodeCount has long numbers).
func reference(line []byte) (r refResult, ok bool) {
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(string(line)))
	d.UseNumber()
	if d.Decode(&m) != nil || m == nil {
		return r, false
	}
	r.completion, r.countKnown = U, true
	if n, isNum := m["completion_tokens"].(json.Number); isNum {
		v, exact := new(big.Rat), false
		if len(n) <= 1000 {
			_, exact = v.SetString(n.String())
		}
		switch {
		case !exact:
			r.countKnown = false
		case v.IsInt() && v.Sign() >= 0 && v.Num().Cmp(big.NewInt(1<<53)) <= 0:
			r.completion = v.Num().Int64()
		}
	}
	idOf := func(v any) string {
		switch v := v.(type) {
		case string:
			return v
		case json.Number:
			return v.String()
		}
		return ""
	}
	if r.id = idOf(m["custom_id"]); r.id == "" {
		r.id = idOf(m["id"])
	}
	if mi, isObj := m["meta_info"].(map[string]any); isObj && r.id == "" {
		r.id = idOf(mi["id"])
	}
	if r.id == "" {
		r.id = idOf(m["request_id"])
	}
	for _, k := range []string{"meta_info", "usage", "response", "output_ids", "choices"} { // choices: a choice's usage
		if _, has := m[k]; has {
			r.otherCounts = true
		}
	}
	// A count by its name, or an answer nested in an object, at any of
	// a repeated key's values (byname.go).
	if strings.Count(string(line), "{") > 1 || strings.Contains(strings.ToLower(string(line)), "token") {
		r.otherCounts = true
	}
	return r, true
}

type refResult struct {
	id          string
	completion  int64
	countKnown  bool
	otherCounts bool // the line has other places a count may come from (a name, a nested object)
}

func FuzzNormalize(f *testing.F) {
	for _, path := range []string{"../testdata/shapes/demo/raw_responses.jsonl", "../testdata/shapes/demo/prompts.jsonl", "../testdata/broken/bad/raw_responses.jsonl"} {
		fh, err := os.Open(path)
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			f.Add(append([]byte(nil), sc.Bytes()...))
		}
		fh.Close()
	}
	f.Add([]byte(`{"id":"a","completion_tokens":12,"output_ids":[1,-2,3.5e3,{"x":[]}]}`))
	f.Add([]byte(`{"id":"\ud800","completion_tokens":1e2}`))
	// Regressions: a negative zero count is 0; a numeric custom_id is an id.
	f.Add([]byte(`{"id":"a","completion_tokens":-0}`))
	f.Add([]byte(`{"custom_id":5,"completion_tokens":1}`))
	f.Add([]byte(`{"id":"a","custom_id":5}`))
	// An answer whose id is "" has none: known by its line, ErrNoID here.
	f.Add([]byte(`{"id":"","usage":{}}`))
	// Answers read by rule: no id, a failure in the body's own status, a
	// choice's usage.
	f.Add([]byte(`{"choices":[{"message":{"content":"x"}}],"usage":{"completion_tokens":2}}`))
	f.Add([]byte(`{"id":"a","choices":null,"base_resp":{"status_code":1008,"status_msg":"no"}}`))
	f.Add([]byte(`{"id":"a","choices":[{"delta":{},"usage":{"completion_tokens":3}}],"usage":null}`))
	// Read by name: an answer nested in the line, with an id of its own;
	// counts named by their family; an error in the answer's place.
	f.Add([]byte(`{"log":"x","raw":{"id":"r","text":"a","usage":{"completion_tokens":2}}}`))
	f.Add([]byte(`{"id":"a","generated_text":"x","num_generated_tokens":3,"stats":{"output_tokens":4}}`))
	f.Add([]byte(`{"custom_id":"a","response":{"error":{"message":"no","code":"x"}}}`))
	f.Add([]byte(`{"id":"a","status":"canceled","output":["x"]}`))
	// The edges of a count: 2^53 is one, 2^53+1 and fractions are not.
	f.Add([]byte(`{"id":"a","completion_tokens":9007199254740992}`))
	f.Add([]byte(`{"id":"a","completion_tokens":9007199254740993}`))
	f.Add([]byte(`{"id":"a","completion_tokens":900719925474099.2e1}`))
	f.Add([]byte(`{"id":"a","completion_tokens":1.0000000000000000001}`))
	f.Add([]byte(`{"id":"a","completion_tokens":0.05e2}`))
	f.Add([]byte(`{"id":"a","completion_tokens":-0.0e-99999999999}`))
	// The integer-array fast path: zeros, a leading zero, spaces, a trailing comma.
	f.Add([]byte(`{"id":"a","output_ids":[0,0,1,0]}`))
	f.Add([]byte(`{"id":"a","output_ids":[0,01]}`))
	f.Add([]byte(`{"id":"a","output_ids":[7, 0 ,12 ]}`))
	f.Add([]byte(`{"id":"a","output_ids":[1,]}`))
	f.Add([]byte(`{"id":"a","output_ids":[1,2`))
	// Speculative decoding counts, flat, in meta_info, in a chat choice and
	// in a conversation's turns.
	f.Add([]byte(`{"id":"a","completion_tokens":9,"spec_verify_ct":4,"spec_accept_length":2.25,"spec_accepted_drafts":4,"spec_proposed_drafts":12}`))
	f.Add([]byte(`{"id":"a","meta_info":{"completion_tokens":9,"spec_verify_ct":4,"spec_accept_token_num":4,"spec_draft_token_num":12}}`))
	f.Add([]byte(`{"id":"c","choices":[{"meta_info":{"spec_verify_ct":4,"spec_num_correct_drafts":1,"spec_num_proposed_drafts":3}}],"sglext":{"spec_verify_ct":[]}}`))
	f.Add([]byte(`{"id":"c","turns":[{"spec_verify_ct":2,"meta_info":{"spec_accepted_drafts":1,"spec_proposed_drafts":3}},7,{"spec_verify_ct":1e0}]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var r store.Record
		_, err := Normalize(line, store.Raw, &r)
		valid := json.Valid(line)
		var se *syntaxError
		if errors.As(err, &se) == valid {
			t.Fatalf("json.Valid = %v but Normalize error = %v for %q", valid, err, line)
		}
		ref, isObject := reference(line)
		if !valid || !isObject {
			return
		}
		if ref.id == "" {
			// An answer nested in the line may have an id of its own.
			var nr store.Record
			_, info, nerr := normalize(line, store.Raw, nil, &nr)
			nested := nerr == nil && !info.lineID && strings.Contains(info.serverID, ".")
			if !errors.Is(err, ErrNoID) && !nested {
				t.Fatalf("no id in %q but Normalize = %v, %+v", line, err, r)
			}
			return
		}
		if err != nil {
			t.Fatalf("Normalize(%q) = %v", line, err)
		}
		if r.ID != ref.id {
			t.Fatalf("id = %q; encoding/json says %q (line %q)", r.ID, ref.id, line)
		}
		if r.Shape == store.ShapeError || !ref.countKnown {
			return
		}
		switch {
		case ref.completion >= 0 && r.CompletionTokens != ref.completion:
			t.Fatalf("completion = %d; encoding/json says %d (line %q)", r.CompletionTokens, ref.completion, line)
		case ref.completion < 0 && !ref.otherCounts && r.CompletionTokens != U:
			t.Fatalf("completion = %d; encoding/json says no count (line %q)", r.CompletionTokens, line)
		}
	})
}

func BenchmarkNormalize(b *testing.B) {
	long := `{"id":"B2-0000017","output_ids":[` + strings.Repeat("163606,2675,374,264,", 450) + `1],"text":"` + strings.Repeat("token ", 300) +
		`","prompt_tokens":812,"completion_tokens":1801,"cached_tokens":256,"reasoning_tokens":0,"finish_reason":"stop","matched_stop":163586,"e2e_latency":41.207,"finished_at":"2026-11-28T09:14:03.512Z","server":"http://127.0.0.1:30000"}`
	short := `{"id":"B2-0000017","text":"The answer is 42.","prompt_tokens":812,"completion_tokens":10,"finish_reason":"stop","finished_at":"2026-11-28T09:14:03.512Z"}`
	sglang := `{"id":"B2-0000017","text":"` + strings.Repeat("token ", 300) + `","output_ids":[` + strings.Repeat("163606,2675,374,264,", 450) + `1],` +
		`"meta_info":{"id":"5f0c2a9e3b1d4c6e8a7f9b0c1d2e3f40","finish_reason":{"type":"stop","matched":163586},"prompt_tokens":812,"weight_version":"default",` +
		`"num_retractions":0,"reasoning_tokens":0,"completion_tokens":1801,"cached_tokens":256,"dp_rank":null,"e2e_latency":41.207,"response_sent_to_client_ts":1796471696.841}}`
	for _, c := range []struct{ name, line string }{{"10KB", long}, {"200B", short}, {"sglang10KB", sglang}} {
		b.Run(c.name, func(b *testing.B) {
			line := []byte(c.line)
			b.SetBytes(int64(len(line)))
			var r store.Record
			for b.Loop() {
				if _, err := Normalize(line, store.Raw, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestDecodeCount pins the count rule that reference states: a whole number
// in [0, 2^53], however the JSON number is written.
func TestDecodeCount(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want int64 // U: not a count
	}{
		{"0", 0}, {"-0", 0}, {"-0.0", 0}, {"0e5", 0}, {"0.000e-7", 0},
		{"12", 12}, {"12.0", 12}, {"1.2e1", 12}, {"120e-1", 12}, {"0.05e2", 5},
		{"1E2", 100}, {"1e+2", 100}, {"100000000000000000000e-20", 1},
		{"9007199254740992", 1 << 53}, {"9007199254740993", U}, {"1e16", U},
		{"999999999999999", 999999999999999}, {"1e300", U}, {"1e99999999999999999999", U},
		{"-1", U}, {"-0.5", U}, {"1.5", U}, {"12.5e-1", U}, {"1.0000000000000000001", U},
		{"1." + strings.Repeat("0", 5000), 1}, {"0." + strings.Repeat("0", 5000), 0},
		{"0." + strings.Repeat("0", 5000) + "1e5001", 1}, {"0." + strings.Repeat("0", 5000) + "1e5000", U},
		{"1" + strings.Repeat("0", 5000) + "e-4999", 10}, {"1" + strings.Repeat("0", 5000) + "1e-4999", U},
		{"null", U}, {`"12"`, U}, {"true", U}, {"[1]", U}, {"", U},
	}
	for _, tt := range tests {
		got, ok := decodeCount([]byte(tt.in))
		if !ok {
			got = U
		}
		if got != tt.want {
			t.Errorf("decodeCount(%s) = %d; want %d", tt.in, got, tt.want)
		}
	}
}

// TestNormalizeIDPath reads ids from a dotted path, with the rule of the
// default places for the value: a non-empty string, or a number as written.
func TestNormalizeIDPath(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path, line string
		stage      store.Stage
		id         string // "": ErrNoID
	}{
		{"question_id", `{"question_id":101,"answer_id":"TF","choices":[{"index":0,"turns":["a"]}]}`, store.Raw, "101"},
		{"question_id", `{"question_id":-3.5e1,"id":"x"}`, store.Raw, "-3.5e1"},
		{"meta.uid", `{"id":"not-this","meta":{"src":"a","uid":"u-7"},"completion_tokens":3}`, store.Raw, "u-7"},
		{"meta.uid", `{"meta":{"uid":"first"},"meta":{"uid":"last"}}`, store.Raw, "last"},
		{`a\u0062`, `{"a\u0062":"escaped-key"}`, store.Raw, ""}, // the path names the key as decoded: "ab"
		{"ab", `{"a\u0062":"escaped-key"}`, store.Raw, "escaped-key"},
		{"meta.uid", `{"meta":{"uid":""}}`, store.Raw, ""},
		{"meta.uid", `{"meta":["uid"],"id":"x"}`, store.Raw, ""},
		{"meta.uid", `{"meta":null,"custom_id":"x"}`, store.Raw, ""},
		{"question_id", `{"id":"x","meta_info":{"id":"rid"}}`, store.Raw, ""}, // no fallback to id or the server's
		{"question_id", `{"question_id":81,"turns":["q"]}`, store.Prompts, "81"},
		{"question_id", `{"question_id":{"n":1}}`, store.Errors, ""},
	}
	for _, tt := range tests {
		p, err := ParseIDPath(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		var r store.Record
		_, _, err = normalize([]byte(tt.line), tt.stage, p, &r)
		if tt.id == "" {
			if !errors.Is(err, ErrNoID) || !strings.Contains(err.Error(), tt.path) {
				t.Errorf("%s in %s: err = %v; want ErrNoID naming the path", tt.path, tt.line, err)
			}
			continue
		}
		if err != nil || r.ID != tt.id {
			t.Errorf("%s in %s: id %q, err %v; want %q", tt.path, tt.line, r.ID, err, tt.id)
		}
	}
	for _, bad := range []string{".", "a.", ".a", "a..b"} {
		if _, err := ParseIDPath(bad); err == nil {
			t.Errorf("ParseIDPath(%q) = nil error", bad)
		}
	}
}

// TestNormalizeServerID: the server's request id is the id of a response
// line with no other, and says so; it is never a prompt's id, and never
// wins over "id" or "custom_id".
func TestNormalizeServerID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line   string
		stage  store.Stage
		id     string // "": ErrNoID
		server string
	}{
		{`{"text":"x","meta_info":{"id":"rid-1","completion_tokens":1}}`, store.Raw, "rid-1", "meta_info.id"},
		{`{"id":"mine","meta_info":{"id":"rid-1","completion_tokens":1}}`, store.Raw, "mine", ""},
		{`{"custom_id":"mine","request_id":"rid-2"}`, store.Raw, "mine", ""},
		{`{"request_id":"rid-2","usage":{"output_tokens":3}}`, store.Raw, "rid-2", "request_id"},
		{`{"request_id":"rid-3","status_code":400,"code":"InvalidParameter","message":"bad"}`, store.Errors, "rid-3", "request_id"},
		{`{"meta_info":{"id":""},"request_id":"rid-4"}`, store.Raw, "rid-4", "request_id"},
		{`{"completion_tokens":54181,"benchmark":"mtbench"}`, store.Raw, "", ""},
	}
	for _, tt := range tests {
		var r store.Record
		_, info, err := normalize([]byte(tt.line), tt.stage, nil, &r)
		if tt.id == "" {
			if !errors.Is(err, ErrNoID) {
				t.Errorf("%s: err = %v; want ErrNoID", tt.line, err)
			}
			continue
		}
		if err != nil || r.ID != tt.id || info.serverID != tt.server {
			t.Errorf("%s: id %q from server %q, err %v; want %q from %q", tt.line, r.ID, info.serverID, err, tt.id, tt.server)
		}
	}
	var r store.Record
	if _, err := Normalize([]byte(`{"meta_info":{"id":"rid"},"text":"a prompt"}`), store.Prompts, &r); !errors.Is(err, ErrNoID) {
		t.Errorf("a prompt took the server's id: %q, %v", r.ID, err)
	}
}

// TestNormalizeStageRules: a turn line needs its turn number and an
// excluded line its reason; the error says which field.
func TestNormalizeStageRules(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line  string
		stage store.Stage
		want  string
	}{
		{`{"id":"c","text":"x","completion_tokens":1}`, store.Turns, `"turn"`},
		{`{"id":"c","turn":0,"completion_tokens":1}`, store.Turns, `"turn"`},
		{`{"id":"c","turn":"2","completion_tokens":1}`, store.Turns, `"turn"`},
		{`{"id":"x","detail":"no reason"}`, store.Excluded, `"reason"`},
	} {
		var rec store.Record
		_, err := Normalize([]byte(tc.line), tc.stage, &rec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s as %s: error %v; want one naming %s", tc.line, tc.stage, err, tc.want)
		}
	}
}
