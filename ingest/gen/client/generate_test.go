package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// sglangExample is the /generate answer of sglang-api.md §1.5.
const sglangExample = `{"text":"The capital of France is Paris.",
 "output_ids":[791,6864,315,9822,374,12366,13,128009],
 "meta_info":{"id":"job42-000017",
   "finish_reason":{"type":"stop","matched":128009},
   "prompt_tokens":17,"weight_version":"default","num_retractions":0,
   "reasoning_tokens":0,"completion_tokens":8,"cached_tokens":0,"dp_rank":null,
   "e2e_latency":0.183,"response_sent_to_client_ts":1784592000.123}}`

func TestGenerateRequestBody(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, sglangExample))
	c := f.client(Options{APIKey: "sk-test", RIDPrefix: "job42"})
	p := SamplingParams{
		MaxNewTokens:      new(256),
		Temperature:       new(0.7),
		TopP:              new(0.95),
		TopK:              new(50),
		MinP:              new(0.0), // set to zero: still sent
		StopTokenIDs:      []int{128009},
		SkipSpecialTokens: new(true),
	}
	ids := []int{128000, 128006, 882, 128007, 271}
	if _, err := c.Generate(t.Context(), GenerateRequest{InputIDs: ids, Sampling: p}); err != nil {
		t.Fatal(err)
	}
	r := f.last(t)
	if r.Method != http.MethodPost || r.Path != "/generate" {
		t.Errorf("request = %s %s", r.Method, r.Path)
	}
	if got := r.Header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
	if got := r.Header.Get("Authorization"); got != "Bearer sk-test" {
		t.Errorf("Authorization = %q", got)
	}
	body := object(t, r.Body)
	if got := keys(body); got != "input_ids,rid,sampling_params,stream" {
		t.Errorf("keys = %s", got)
	}
	if body["stream"] != false {
		t.Errorf("stream = %v", body["stream"])
	}
	if !regexp.MustCompile(`^job42-\d+-[0-9a-f]{8}$`).MatchString(body["rid"].(string)) {
		t.Errorf("rid = %q", body["rid"])
	}
	// Exact wire form: key order rid, input_ids, sampling_params, stream,
	// and only the sampling keys that are set, under SGLang's names.
	want := `{"rid":"` + body["rid"].(string) + `","input_ids":[128000,128006,882,128007,271],` +
		`"sampling_params":{"max_new_tokens":256,"temperature":0.7,"top_p":0.95,"top_k":50,"min_p":0,` +
		`"stop_token_ids":[128009],"skip_special_tokens":true},"stream":false}`
	if got := strings.TrimSpace(string(r.Body)); got != want {
		t.Errorf("body\n got %s\nwant %s", got, want)
	}
}

func TestGenerateTextAndEmptySampling(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, sglangExample))
	c := f.client(Options{})
	if _, err := c.Generate(t.Context(), GenerateRequest{Text: "Write a haiku about <queues> & stacks."}); err != nil {
		t.Fatal(err)
	}
	body := object(t, f.last(t).Body)
	if got := keys(body); got != "rid,sampling_params,stream,text" {
		t.Errorf("keys = %s", got)
	}
	if body["text"] != "Write a haiku about <queues> & stacks." {
		t.Errorf("text = %q", body["text"])
	}
	if sp := body["sampling_params"].(map[string]any); len(sp) != 0 {
		t.Errorf("sampling_params = %v; want {} when nothing is set", sp)
	}
}

func TestGenerateRejectsBadPrompt(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, sglangExample))
	c := f.client(Options{})
	for _, req := range []GenerateRequest{{}, {InputIDs: []int{}}, {InputIDs: []int{1}, Text: "x"}} {
		_, err := c.Generate(t.Context(), req)
		if e := asError(t, err); e.Kind != Permanent || e.Status != 0 {
			t.Errorf("Generate(%+v) = %v; want a Permanent client-side error", req, err)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("%d requests sent; want none", n)
	}
}

func TestGenerateFreshRIDPerAttempt(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, sglangExample))
	c := f.client(Options{})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			// The same prompt sent again, as a retry would.
			if _, err := c.Generate(t.Context(), GenerateRequest{InputIDs: []int{1, 2, 3}}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, r := range f.requests() {
		rid := object(t, r.Body)["rid"].(string)
		if seen[rid] {
			t.Errorf("rid %q sent twice", rid)
		}
		seen[rid] = true
	}
	if len(seen) != 20 {
		t.Errorf("%d distinct rids; want 20", len(seen))
	}
}

func TestGenerateResponses(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want string // AppendJSONL output without finished_at and server
	}{
		{"eos stop (§1.5)", sglangExample,
			`{"id":"p","output_ids":[791,6864,315,9822,374,12366,13,128009],"text":"The capital of France is Paris.","prompt_tokens":17,"completion_tokens":8,"cached_tokens":0,"reasoning_tokens":0,"finish_reason":"stop","matched_stop":128009,"e2e_latency":0.183}`},
		{"length",
			`{"text":"Partial","output_ids":[791,4320],"meta_info":{"id":"x","finish_reason":{"type":"length","length":2},"prompt_tokens":640,"weight_version":"default","num_retractions":0,"reasoning_tokens":0,"completion_tokens":2,"cached_tokens":512,"dp_rank":null,"e2e_latency":12.5}}`,
			`{"id":"p","output_ids":[791,4320],"text":"Partial","prompt_tokens":640,"completion_tokens":2,"cached_tokens":512,"reasoning_tokens":0,"finish_reason":"length","matched_stop":null,"e2e_latency":12.5}`},
		{"stop string",
			`{"text":"a","output_ids":[64,2],"meta_info":{"finish_reason":{"type":"stop","matched":"</answer>"},"prompt_tokens":3,"completion_tokens":2,"cached_tokens":0,"reasoning_tokens":1,"e2e_latency":0.5}}`,
			`{"id":"p","output_ids":[64,2],"text":"a","prompt_tokens":3,"completion_tokens":2,"cached_tokens":0,"reasoning_tokens":1,"finish_reason":"stop","matched_stop":"</answer>","e2e_latency":0.5}`},
		{"skip-tokenizer-init: no text",
			`{"output_ids":[5,6,2],"meta_info":{"finish_reason":{"type":"stop","matched":2},"prompt_tokens":3,"completion_tokens":3,"cached_tokens":0,"e2e_latency":0.25}}`,
			`{"id":"p","output_ids":[5,6,2],"prompt_tokens":3,"completion_tokens":3,"cached_tokens":0,"finish_reason":"stop","matched_stop":2,"e2e_latency":0.25}`},
		{"before v0.5.0: no output_ids, no reasoning_tokens",
			`{"text":"old","meta_info":{"id":"x","finish_reason":{"type":"stop","matched":2},"prompt_tokens":3,"completion_tokens":1,"cached_tokens":0,"e2e_latency":0.1}}`,
			`{"id":"p","text":"old","prompt_tokens":3,"completion_tokens":1,"cached_tokens":0,"finish_reason":"stop","matched_stop":2,"e2e_latency":0.1}`},
		{"empty output",
			`{"text":"","output_ids":[],"meta_info":{"finish_reason":{"type":"length","length":0},"prompt_tokens":3,"completion_tokens":0,"cached_tokens":0,"e2e_latency":0.01}}`,
			`{"id":"p","output_ids":[],"text":"","prompt_tokens":3,"completion_tokens":0,"cached_tokens":0,"finish_reason":"length","matched_stop":null,"e2e_latency":0.01}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, reply(http.StatusOK, tc.body))
			res, err := f.client(Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
			if err != nil {
				t.Fatal(err)
			}
			if res.API != APIGenerate || res.Server != f.URL || res.FinishedAt.IsZero() || res.FinishedAt.Location().String() != "UTC" {
				t.Errorf("API %q server %q finished_at %v", res.API, res.Server, res.FinishedAt)
			}
			got := string(withoutFinishedAt(res))
			if got != tc.want+"\n" {
				t.Errorf("line\n got %s want %s", got, tc.want)
			}
		})
	}
}

// withoutFinishedAt renders r as a JSONL line without finished_at and
// server, which vary per run.
func withoutFinishedAt(r *Result) []byte {
	c := *r
	c.FinishedAt, c.Server = time.Time{}, ""
	return c.AppendJSONL(nil, "p")
}

func TestGenerateMeasuresLatencyWhenAbsent(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, `{"text":"x","output_ids":[1],"meta_info":{"finish_reason":{"type":"stop","matched":1}}}`))
	res, err := f.client(Options{}).Generate(t.Context(), GenerateRequest{Text: "q"})
	if err != nil {
		t.Fatal(err)
	}
	if res.E2ELatency <= 0 || res.E2ELatency > 5 {
		t.Errorf("measured e2e_latency = %v", res.E2ELatency)
	}
	if res.PromptTokens != nil || res.CompletionTokens != nil || res.CachedTokens != nil || res.ReasoningTokens != nil {
		t.Errorf("absent counts must stay nil: %+v", res)
	}
	line := string(res.AppendJSONL(nil, "q"))
	if strings.Contains(line, "_tokens") {
		t.Errorf("line %s writes counts the server did not send", line)
	}
}

func TestGenerateAbort(t *testing.T) {
	for _, tc := range []struct {
		name, finish string
		kind         Kind
		msg          string
	}{
		{"abort_request", `{"type":"abort","message":"Abort request rid-1"}`, Transient, "request aborted: Abort request rid-1"},
		{"status 503", `{"type":"abort","message":"queue full","status_code":503,"err_type":null}`, Transient, "request aborted (status 503): queue full"},
		{"status 400", `{"type":"abort","message":"Input length (9000 tokens) exceeds the maximum allowed length (8192 tokens).","status_code":400,"err_type":"BadRequest"}`, Permanent, "request aborted (status 400): Input length (9000 tokens)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, reply(http.StatusOK, `{"text":"par","output_ids":[1],"meta_info":{"id":"r","finish_reason":`+tc.finish+`,"prompt_tokens":3,"completion_tokens":1,"cached_tokens":0,"e2e_latency":0.2}}`))
			res, err := f.client(Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
			if res != nil {
				t.Errorf("an abort returned a Result: %+v", res)
			}
			e := asError(t, err)
			if e.Kind != tc.kind || e.Status != http.StatusOK || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("got kind %v status %d message %q; want %v 200 %q", e.Kind, e.Status, e.Message, tc.kind, tc.msg)
			}
		})
	}
}

func TestChatRequestBody(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Done.","reasoning_content":"step by step","tool_calls":null},"logprobs":null,"finish_reason":"stop","matched_stop":163586}],"usage":{"prompt_tokens":301,"total_tokens":322,"completion_tokens":21,"prompt_tokens_details":null,"reasoning_tokens":12}}`))
	c := f.client(Options{APIKey: "sk-chat", Model: "kimi-k2.5", ChatTemplateKwargs: map[string]any{"enable_thinking": true}})
	req := ChatRequest{
		Messages: []Message{{Role: "user", Content: "hi"}},
		Sampling: SamplingParams{
			MaxNewTokens: new(1024), MinNewTokens: new(2), Temperature: new(0.6), TopK: new(20), MinP: new(0.05),
			StopTokenIDs: []int{163586}, IgnoreEOS: new(false), SamplingSeed: new(int64(7)), Stop: Strings{"</s>"},
		},
		Extra: map[string]any{"reasoning_effort": "high", "stream": true, "rid": "mine", "messages": "no"},
	}
	res, err := c.Chat(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	r := f.last(t)
	if r.Path != "/v1/chat/completions" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("Authorization") != "Bearer sk-chat" {
		t.Errorf("request %s content-type %q auth %q", r.Path, r.Header.Get("Content-Type"), r.Header.Get("Authorization"))
	}
	body := object(t, r.Body)
	want := "chat_template_kwargs,ignore_eos,max_tokens,messages,min_p,min_tokens,model,reasoning_effort,rid,seed,stop,stop_token_ids,stream,temperature,top_k"
	if got := keys(body); got != want {
		t.Errorf("keys\n got %s\nwant %s", got, want)
	}
	if body["max_tokens"] != json.Number("1024") || body["min_tokens"] != json.Number("2") || body["seed"] != json.Number("7") {
		t.Errorf("mapped fields: max_tokens %v min_tokens %v seed %v", body["max_tokens"], body["min_tokens"], body["seed"])
	}
	if body["stream"] != false || body["rid"] == "mine" || body["model"] != "kimi-k2.5" {
		t.Errorf("Extra overrode client fields: stream %v rid %v model %v", body["stream"], body["rid"], body["model"])
	}
	if got := fmt.Sprint(body["messages"]); got != "[map[content:hi role:user]]" {
		t.Errorf("messages = %s", got)
	}
	if got := fmt.Sprint(body["chat_template_kwargs"]); got != "map[enable_thinking:true]" {
		t.Errorf("chat_template_kwargs = %s", got)
	}

	// Response: reasoning separate, flat reasoning_tokens, null details.
	if res.API != APIChat || *res.Text != "Done." || *res.ReasoningContent != "step by step" {
		t.Errorf("text %q reasoning %q", deref(res.Text), deref(res.ReasoningContent))
	}
	if *res.PromptTokens != 301 || *res.CompletionTokens != 21 || *res.ReasoningTokens != 12 || res.CachedTokens != nil {
		t.Errorf("counts %v %v %v %v", res.PromptTokens, res.CompletionTokens, res.ReasoningTokens, res.CachedTokens)
	}
	if res.FinishReason != "stop" || res.MatchedStop != 163586 || res.OutputIDs != nil {
		t.Errorf("finish %q matched %v ids %v", res.FinishReason, res.MatchedStop, res.OutputIDs)
	}
	if res.RID != body["rid"] {
		t.Errorf("Result.RID %q != sent rid %v", res.RID, body["rid"])
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

func TestChatResponses(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
	}{
		{"reasoning left in content, cache report",
			`{"id":"B1","object":"chat.completion","created":1796064752,"model":"kimi-k2.5","choices":[{"index":0,"message":{"role":"assistant","content":"<think>\nstep by step\n</think>\n\nDone.","reasoning_content":null,"tool_calls":null},"logprobs":null,"finish_reason":"stop","matched_stop":163586}],"usage":{"prompt_tokens":301,"total_tokens":322,"completion_tokens":21,"prompt_tokens_details":{"cached_tokens":256},"reasoning_tokens":0}}`,
			`{"id":"p","text":"<think>\nstep by step\n</think>\n\nDone.","reasoning_content":null,"prompt_tokens":301,"completion_tokens":21,"cached_tokens":256,"reasoning_tokens":0,"finish_reason":"stop","matched_stop":163586`},
		{"length, matched null, no details key",
			`{"choices":[{"index":0,"message":{"role":"assistant","content":"abc","reasoning_content":"r"},"finish_reason":"length","matched_stop":null}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`,
			`{"id":"p","text":"abc","reasoning_content":"r","prompt_tokens":5,"completion_tokens":3,"finish_reason":"length","matched_stop":null`},
		{"tool calls, null content, string stop",
			`{"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\": 1"}}]},"finish_reason":"tool_calls","matched_stop":"<|end|>"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"prompt_tokens_details":null,"reasoning_tokens":0}}`,
			`{"id":"p","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\": 1"}}],"reasoning_content":null,"prompt_tokens":5,"completion_tokens":3,"reasoning_tokens":0,"finish_reason":"tool_calls","matched_stop":"<|end|>"`},
		{"vLLM nested reasoning tokens, no usage details",
			`{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"completion_tokens_details":{"reasoning_tokens":1}}}`,
			`{"id":"p","text":"ok","reasoning_content":null,"prompt_tokens":5,"completion_tokens":2,"reasoning_tokens":1,"finish_reason":"stop","matched_stop":null`},
		{"no usage",
			`{"choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`,
			`{"id":"p","text":"ok","reasoning_content":null,"finish_reason":"stop","matched_stop":null`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake(t, reply(http.StatusOK, tc.body))
			res, err := f.client(Options{}).Chat(t.Context(), ChatRequest{Messages: []Message{{Role: "user", Content: "q"}}})
			if err != nil {
				t.Fatal(err)
			}
			got := string(withoutFinishedAt(res))
			if !strings.HasPrefix(got, tc.want+`,"e2e_latency":`) {
				t.Errorf("line\n got %s\nwant %s,\"e2e_latency\":...", got, tc.want)
			}
		})
	}
}

func TestChatAbortAndEmpty(t *testing.T) {
	f := newFake(t, reply(http.StatusOK, `{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"abort","matched_stop":null}]}`))
	_, err := f.client(Options{}).Chat(t.Context(), ChatRequest{Messages: []Message{{Role: "user", Content: "q"}}})
	if e := asError(t, err); e.Kind != Transient || !strings.Contains(e.Message, "aborted") {
		t.Errorf("abort: %v (%v)", err, e.Kind)
	}
	f = newFake(t, reply(http.StatusOK, `{"choices":[]}`))
	_, err = f.client(Options{}).Chat(t.Context(), ChatRequest{Messages: []Message{{Role: "user", Content: "q"}}})
	if KindOf(err) != Permanent {
		t.Errorf("no choices: %v", err)
	}
	_, err = f.client(Options{}).Chat(t.Context(), ChatRequest{})
	if KindOf(err) != Permanent || len(f.requests()) != 1 {
		t.Errorf("no messages: %v, %d requests", err, len(f.requests()))
	}
}

func TestComplete(t *testing.T) {
	const answer = `{"id":"c","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" Paris.","logprobs":null,"finish_reason":"stop","matched_stop":"."}],"usage":{"prompt_tokens":7,"total_tokens":9,"completion_tokens":2,"prompt_tokens_details":null,"reasoning_tokens":0},"metadata":{"weight_version":"default"}}`
	f := newFake(t, reply(http.StatusOK, answer))
	c := f.client(Options{})
	res, err := c.Complete(t.Context(), CompletionRequest{Prompt: "The capital of France is", Sampling: SamplingParams{MaxNewTokens: new(8)}})
	if err != nil {
		t.Fatal(err)
	}
	body := object(t, f.last(t).Body)
	if f.last(t).Path != "/v1/completions" || keys(body) != "max_tokens,prompt,rid,stream" || body["prompt"] != "The capital of France is" {
		t.Errorf("request %s body %v", f.last(t).Path, body)
	}
	if res.API != APICompletions || *res.Text != " Paris." || res.MatchedStop != "." || *res.CompletionTokens != 2 {
		t.Errorf("result %+v", res)
	}
	if strings.Contains(string(res.AppendJSONL(nil, "x")), "reasoning_content") {
		t.Error("completions lines must not carry reasoning_content")
	}

	if _, err := c.Complete(t.Context(), CompletionRequest{PromptIDs: []int{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(object(t, f.last(t).Body)["prompt"]); got != "[1 2 3]" {
		t.Errorf("token prompt = %s", got)
	}
	for _, req := range []CompletionRequest{{}, {Prompt: "a", PromptIDs: []int{1}}} {
		if _, err := c.Complete(t.Context(), req); KindOf(err) != Permanent {
			t.Errorf("Complete(%+v) = %v; want Permanent", req, err)
		}
	}
}

func TestGenerateUnexpectedShape(t *testing.T) {
	// A batch answer (an array) cannot come from a single prompt; it must
	// not be read as an empty success.
	f := newFake(t, reply(http.StatusOK, `[{"text":"a","meta_info":{}}]`))
	_, err := f.client(Options{}).Generate(t.Context(), GenerateRequest{InputIDs: []int{1}})
	if e := asError(t, err); e.Kind != Permanent || !strings.Contains(e.Message, "invalid response body") {
		t.Errorf("array answer: %v", err)
	}
	if errors.Is(err, ErrTokenizeUnsupported) {
		t.Error("unrelated sentinel")
	}
}
