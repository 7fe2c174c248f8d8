package sim

import (
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// probe sends POST path with the body {}, as gen does to check a route.
func probe(t *testing.T, url, path string) (int, []byte) {
	t.Helper()
	resp, b := post(t, url+path, `{}`)
	return resp.StatusCode, b
}

// TestFlavorProbes: per flavor, {} on each route it serves answers as the
// real server does (a 400-class validation error, or llama.cpp's 200 on
// /tokenize and /detokenize), generates nothing, and {} on a route it
// lacks answers its own 404.
func TestFlavorProbes(t *testing.T) {
	for _, tc := range []struct {
		flavor  string
		served  map[string]string // path -> the status and a piece of the body
		missing []string
		miss    string // the 404 body
	}{
		{FlavorSGLang, map[string]string{
			"/generate":            "400 Either text, input_ids or input_embeds should be provided.",
			"/v1/chat/completions": "400 Field required",
			"/v1/completions":      "400 Field required",
			"/v1/tokenize":         "400 Exactly one of 'prompt' or 'messages' must be provided.",
		}, []string{"/tokenize", "/completion", "/inference/v1/generate"}, `{"detail":"Not Found"}`},
		{FlavorVLLM, map[string]string{
			"/v1/chat/completions":   `400 "type":"Bad Request"`,
			"/v1/completions":        "400 Either prompt or prompt_embeds must be provided and non-empty.",
			"/tokenize":              `400 "type":"Bad Request"`,
			"/detokenize":            `400 "type":"Bad Request"`,
			"/inference/v1/generate": "400 'token_ids'), 'msg': 'Field required'",
		}, []string{"/generate", "/v1/tokenize", "/completion", "/apply-template"}, `{"detail":"Not Found"}`},
		{FlavorLlamaCpp, map[string]string{
			"/v1/chat/completions": `400 {"error":{"code":400,"message":"'messages' is required","type":"invalid_request_error"}}`,
			"/apply-template":      `400 {"error":{"code":400,"message":"'messages' is required","type":"invalid_request_error"}}`,
			"/v1/completions":      "400 key 'prompt' not found",
			"/completion":          "400 key 'prompt' not found",
			"/tokenize":            `200 {"tokens":[]}`,
			"/detokenize":          `200 {"content":""}`,
		}, []string{"/generate", "/v1/tokenize", "/inference/v1/generate"},
			`{"error":{"message":"File Not Found","type":"not_found_error","code":404}}`},
	} {
		t.Run(tc.flavor, func(t *testing.T) {
			s, url := testServer(t, Config{Flavor: tc.flavor, ErrorRate: 1})
			for path, want := range tc.served {
				code, b := probe(t, url, path)
				status, piece, _ := strings.Cut(want, " ")
				if strconv.Itoa(code) != status || !strings.Contains(string(b), piece) {
					t.Errorf("POST %s {}: %d %s; want %s", path, code, b, want)
				}
			}
			for _, path := range tc.missing {
				if code, b := probe(t, url, path); code != 404 || string(b) != tc.miss {
					t.Errorf("POST %s {}: %d %s; want 404 %s", path, code, b, tc.miss)
				}
			}
			if st := s.Stats(); st.GeneratedTokens != 0 || st.Completed != 0 {
				t.Errorf("probes generated: %+v", st)
			}
		})
	}
}

// TestFlavorModels: /v1/models per flavor, each card marked as the
// simulator's; LoRA cards have max_model_len null and their parent, before
// the base card in SGLang, after it in vLLM.
func TestFlavorModels(t *testing.T) {
	get := func(t *testing.T, cfg Config) []any {
		_, url := testServer(t, cfg)
		resp, b := do(t, http.MethodGet, url+"/v1/models", "", "")
		if resp.StatusCode != 200 {
			t.Fatalf("/v1/models: %d %s", resp.StatusCode, b)
		}
		return arr(t, obj(t, decode(t, b))["data"])
	}
	t.Run("sglang", func(t *testing.T) {
		data := get(t, Config{LoRAAdapters: []string{"ad1"}})
		lora, base := obj(t, data[0]), obj(t, data[1])
		if lora["id"] != "ad1" || lora["max_model_len"] != nil || lora["parent"] != "sim-model" || lora["gendex_simulator"] != true {
			t.Errorf("LoRA card %v", lora)
		}
		if base["id"] != "sim-model" || num(t, base["max_model_len"]) != DefaultContextLength || base["owned_by"] != "sglang" {
			t.Errorf("base card %v", base)
		}
	})
	t.Run("vllm", func(t *testing.T) {
		data := get(t, Config{Flavor: FlavorVLLM, ContextLength: 2048, LoRAAdapters: []string{"ad1"}})
		base, lora := obj(t, data[0]), obj(t, data[1])
		if base["owned_by"] != "vllm" || num(t, base["max_model_len"]) != 2048 || base["root"] != "sim-model" ||
			base["parent"] != nil || base["gendex_simulator"] != true {
			t.Errorf("base card %v", base)
		}
		if lora["max_model_len"] != nil || lora["parent"] != "sim-model" {
			t.Errorf("LoRA card %v", lora)
		}
	})
	t.Run("llamacpp", func(t *testing.T) {
		data := get(t, Config{Flavor: FlavorLlamaCpp, ContextLength: 512, LoRAAdapters: []string{"ignored"}})
		if len(data) != 1 {
			t.Fatalf("%d cards", len(data))
		}
		c := obj(t, data[0])
		meta := obj(t, c["meta"])
		if c["id"] != "sim-model.gguf" || c["owned_by"] != "llamacpp" || c["gendex_simulator"] != true ||
			num(t, meta["n_ctx"]) != 512 || num(t, meta["n_ctx_train"]) != 4096 || num(t, meta["n_vocab"]) != VocabSize {
			t.Errorf("card %v", c)
		}
		if _, ok := c["max_model_len"]; ok {
			t.Errorf("llama.cpp card has max_model_len: %v", c)
		}
	})
	t.Run("unmarked", func(t *testing.T) {
		for _, f := range Flavors {
			for _, c := range get(t, Config{Flavor: f, Unmarked: true, LoRAAdapters: []string{"a"}}) {
				if _, ok := obj(t, c)["gendex_simulator"]; ok {
					t.Errorf("%s: unmarked card %v", f, c)
				}
			}
		}
	})
}

// TestFlavorTokenIDPrompt: every flavor answers a token-id prompt on
// /v1/completions, counting exactly those ids.
func TestFlavorTokenIDPrompt(t *testing.T) {
	for _, f := range Flavors {
		_, url := testServer(t, Config{Flavor: f})
		r := obj(t, postOK(t, url+"/v1/completions", `{"model":"`+modelOf(f)+`","prompt":[300,301,302,303],"max_tokens":8}`))
		if got := num(t, obj(t, r["usage"])["prompt_tokens"]); got != 4 {
			t.Errorf("%s: prompt_tokens %d, want 4", f, got)
		}
	}
}

// modelOf is the default served model of a flavor.
func modelOf(flavor string) string {
	if flavor == FlavorLlamaCpp {
		return "sim-model.gguf"
	}
	return "sim-model"
}

// TestFlavorChatIgnoresInputIDs: under vLLM and llama.cpp, chat answers
// the messages as given, SGLang's input_ids unread: an empty user message
// costs only the template's tokens. SGLang reads them.
func TestFlavorChatIgnoresInputIDs(t *testing.T) {
	body := `{"messages":[{"role":"user","content":""}],"input_ids":[300,301,302,303,304,305,306,307,308,309],"max_tokens":4}`
	template := len(applyChatTemplate([]chatMessage{{role: "user"}}, chatTemplate{addGenerationPrompt: true}))
	for f, want := range map[string]int{FlavorSGLang: 10, FlavorVLLM: template, FlavorLlamaCpp: template} {
		_, url := testServer(t, Config{Flavor: f})
		r := obj(t, postOK(t, url+"/v1/chat/completions", body))
		if got := num(t, obj(t, r["usage"])["prompt_tokens"]); got != want {
			t.Errorf("%s: prompt_tokens %d, want %d", f, got, want)
		}
	}
}

// TestVLLMTokenIDs: return_token_ids adds the output and prompt ids on
// completions and chat; /inference/v1/generate takes and returns ids; the
// ids are the ones /detokenize reads back as the text.
func TestVLLMTokenIDs(t *testing.T) {
	_, url := testServer(t, Config{Flavor: FlavorVLLM})
	c := obj(t, postOK(t, url+"/v1/completions", `{"prompt":[300,301],"max_tokens":20,"return_token_ids":true}`))
	ch := obj(t, arr(t, c["choices"])[0])
	out := ints(t, ch["token_ids"])
	if !reflect.DeepEqual(ints(t, ch["prompt_token_ids"]), []int{300, 301}) || len(out) != num(t, obj(t, c["usage"])["completion_tokens"]) {
		t.Errorf("completion choice %v", ch)
	}
	det := obj(t, postOK(t, url+"/detokenize", fmt.Sprintf(`{"tokens":%s}`, marshal(out))))
	if want := Decode(out, false); det["prompt"] != want || !strings.HasPrefix(want, str(t, ch["text"])) {
		t.Errorf("detokenize %v, text %q", det, ch["text"])
	}
	g := obj(t, postOK(t, url+"/inference/v1/generate", `{"token_ids":[300,301],"sampling_params":{"max_tokens":20}}`))
	gc := obj(t, arr(t, g["choices"])[0])
	if !reflect.DeepEqual(ints(t, gc["token_ids"]), out) {
		t.Errorf("generate ids %v, completions ids %v", gc["token_ids"], out)
	}
	if _, ok := g["usage"]; ok {
		t.Errorf("generate answer has usage: %v", g)
	}
	r := obj(t, postOK(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"return_token_ids":true}`))
	tok := obj(t, postOK(t, url+"/tokenize", `{"messages":[{"role":"user","content":"hi"}]}`))
	if !reflect.DeepEqual(ints(t, r["prompt_token_ids"]), ints(t, tok["tokens"])) || num(t, tok["count"]) != num(t, obj(t, r["usage"])["prompt_tokens"]) {
		t.Errorf("chat prompt ids %v, tokenize %v", r["prompt_token_ids"], tok)
	}
	if len(ints(t, obj(t, arr(t, r["choices"])[0])["token_ids"])) != num(t, obj(t, r["usage"])["completion_tokens"]) {
		t.Errorf("chat token_ids %v", r)
	}
	// Without return_token_ids, none.
	c = obj(t, postOK(t, url+"/v1/completions", `{"prompt":"hi"}`))
	if ch := obj(t, arr(t, c["choices"])[0]); ch["token_ids"] != nil || num(t, obj(t, c["usage"])["completion_tokens"]) > 16 {
		t.Errorf("plain completion %v", c)
	}
}

// TestVLLMErrors: an unknown model is a 404 NotFoundError with param
// model; an over-long prompt a 400 naming the context length; /metrics is
// always on; the API key guards /v1 only.
func TestVLLMErrors(t *testing.T) {
	_, url := testServer(t, Config{Flavor: FlavorVLLM, ContextLength: 100, APIKey: "k"})
	auth := func(method, path, body string) (*http.Response, []byte) {
		req, _ := http.NewRequestWithContext(t.Context(), method, url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer k")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := resp.Body.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		return resp, []byte(b.String())
	}
	if resp, b := post(t, url+"/v1/completions", `{"prompt":"x"}`); resp.StatusCode != 401 || string(b) != `{"error":"Unauthorized"}` {
		t.Errorf("no key: %d %s", resp.StatusCode, b)
	}
	if resp, _ := post(t, url+"/tokenize", `{"prompt":"x"}`); resp.StatusCode != 200 {
		t.Errorf("/tokenize without a key: %d", resp.StatusCode)
	}
	resp, b := auth(http.MethodPost, "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`)
	if want := `{"error":{"message":"The model ` + "`nope`" + ` does not exist.","type":"NotFoundError","param":"model","code":404}}`; resp.StatusCode != 404 || string(b) != want {
		t.Errorf("unknown model: %d %s", resp.StatusCode, b)
	}
	resp, b = auth(http.MethodPost, "/v1/completions", fmt.Sprintf(`{"prompt":%q}`, strings.Repeat("a", 120)))
	if resp.StatusCode != 400 || !strings.Contains(string(b), "This model's maximum context length is 100 tokens. However, your request has 121 input tokens.") {
		t.Errorf("over-long prompt: %d %s", resp.StatusCode, b)
	}
	resp, b = auth(http.MethodPost, "/v1/completions", `{"prompt":"abc","max_tokens":99}`)
	if resp.StatusCode != 400 || !strings.Contains(string(b), `'max_tokens' or 'max_completion_tokens' is too large: 99`) {
		t.Errorf("max_tokens over the context: %d %s", resp.StatusCode, b)
	}
	if resp, b := do(t, http.MethodGet, url+"/generate", "", ""); resp.StatusCode != 404 || string(b) != `{"detail":"Not Found"}` {
		t.Errorf("GET /generate: %d %s", resp.StatusCode, b)
	}
	if resp, _ := do(t, http.MethodGet, url+"/metrics", "", ""); resp.StatusCode != 200 {
		t.Errorf("/metrics: %d", resp.StatusCode)
	}
}

// TestFlavorIgnoredFields: a field the flavor ignores leaves the answer as
// it was; one it reads changes it.
func TestFlavorIgnoredFields(t *testing.T) {
	for _, tc := range []struct {
		flavor, path, base    string
		ignored, read, greedy []string
	}{
		{FlavorLlamaCpp, "/v1/completions", `"prompt":"Once upon","max_tokens":40`,
			[]string{`"repetition_penalty":1.3`, `"min_tokens":30`, `"stop_token_ids":[2]`, `"skip_special_tokens":false`, `"no_stop_trim":true`, `"rid":"x"`},
			[]string{`"repeat_penalty":1.3`, `"temperature":0.5`, `"top_k":5`, `"min_p":0.2`}, nil},
		{FlavorVLLM, "/v1/completions", `"prompt":"Once upon","max_tokens":40`,
			[]string{`"repeat_penalty":1.3`, `"no_stop_trim":true`, `"rid":"x"`},
			[]string{`"repetition_penalty":1.3`, `"temperature":0.5`, `"top_k":5`, `"min_p":0.2`}, nil},
	} {
		_, url := testServer(t, Config{Flavor: tc.flavor})
		answer := func(extra string) string {
			body := "{" + tc.base
			if extra != "" {
				body += "," + extra
			}
			r := obj(t, postOK(t, url+tc.path, body+"}"))
			return str(t, obj(t, arr(t, r["choices"])[0])["text"]) + "|" + strconv.Itoa(num(t, obj(t, r["usage"])["completion_tokens"]))
		}
		base := answer("")
		for _, f := range tc.ignored {
			if got := answer(f); got != base {
				t.Errorf("%s: ignored %s changed the answer:\n%s\n%s", tc.flavor, f, base, got)
			}
		}
		for _, f := range tc.read {
			if got := answer(f); got == base {
				t.Errorf("%s: read %s left the answer as it was", tc.flavor, f)
			}
		}
	}
}

// TestVLLMCompletionsDefaultMaxTokens: /v1/completions without max_tokens
// stops at 16 tokens; chat without it runs to its natural end.
func TestVLLMCompletionsDefaultMaxTokens(t *testing.T) {
	_, url := testServer(t, Config{Flavor: FlavorVLLM})
	lengths := 0
	for i := range 20 {
		r := obj(t, postOK(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":"p%d","ignore_eos":true}`, i)))
		if n := num(t, obj(t, r["usage"])["completion_tokens"]); n != 16 {
			t.Errorf("completion_tokens %d, want 16", n)
		}
		if obj(t, arr(t, r["choices"])[0])["finish_reason"] == "length" {
			lengths++
		}
	}
	if lengths != 20 {
		t.Errorf("%d of 20 finished by length", lengths)
	}
}

// TestLlamaCppRoutes: /completion returns output ids as "tokens" with
// return_tokens, tokens_predicted and tokens_evaluated; /tokenize and
// /apply-template round-trip what chat reads; the OpenAI endpoints return
// no ids; the request's model is not checked.
func TestLlamaCppRoutes(t *testing.T) {
	_, url := testServer(t, Config{Flavor: FlavorLlamaCpp, ContextLength: 512})
	c := obj(t, postOK(t, url+"/completion", `{"prompt":[1,300,301],"n_predict":12,"return_tokens":true}`))
	toks := ints(t, c["tokens"])
	if num(t, c["tokens_evaluated"]) != 3 || num(t, c["tokens_predicted"]) != len(toks) || len(toks) == 0 || len(toks) > 12 {
		t.Errorf("/completion %v", c)
	}
	if c := obj(t, postOK(t, url+"/completion", `{"prompt":"hi","n_predict":5}`)); len(arr(t, c["tokens"])) != 0 {
		t.Errorf("/completion without return_tokens: tokens %v", c["tokens"])
	}
	msgs := `[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]`
	tmpl := obj(t, postOK(t, url+"/apply-template", `{"messages":`+msgs+`}`))
	tok := obj(t, postOK(t, url+"/tokenize", fmt.Sprintf(`{"content":%s}`, marshal(tmpl["prompt"]))))
	chat := obj(t, postOK(t, url+"/v1/chat/completions", `{"model":"whatever","messages":`+msgs+`,"max_tokens":8}`))
	if got, want := len(arr(t, tok["tokens"])), num(t, obj(t, chat["usage"])["prompt_tokens"]); got != want {
		t.Errorf("/tokenize of /apply-template: %d tokens, chat read %d", got, want)
	}
	if chat["model"] != "sim-model.gguf" {
		t.Errorf("chat model %v", chat["model"])
	}
	ch := obj(t, arr(t, chat["choices"])[0])
	if _, ok := ch["token_ids"]; ok {
		t.Errorf("chat returned ids: %v", ch)
	}
	wp := obj(t, postOK(t, url+"/tokenize", `{"content":"ab","add_special":true,"with_pieces":true}`))
	if got := fmt.Sprint(wp["tokens"]); got != "[map[id:1 piece:<|bos|>] map[id:353 piece:a] map[id:354 piece:b]]" {
		t.Errorf("with_pieces: %s", got)
	}
	if resp, b := do(t, http.MethodGet, url+"/health", "", ""); resp.StatusCode != 200 || string(b) != `{"status":"ok"}` {
		t.Errorf("/health: %d %s", resp.StatusCode, b)
	}
	if resp, b := do(t, http.MethodGet, url+"/v1/completions", "", ""); resp.StatusCode != 404 || !strings.Contains(string(b), "File Not Found") {
		t.Errorf("GET /v1/completions: %d %s", resp.StatusCode, b)
	}
}

// TestLlamaCppErrors: the over-context 400 with n_ctx per slot, the 501
// of /metrics without --metrics, the loading 503, the injected parse 500.
func TestLlamaCppErrors(t *testing.T) {
	_, url := testServer(t, Config{Flavor: FlavorLlamaCpp, ContextLength: 16})
	ids := func(n int) string { return strings.TrimSuffix(strings.Repeat("300,", n), ",") }
	resp, b := post(t, url+"/v1/completions", `{"prompt":[`+ids(16)+`]}`)
	want := `{"error":{"code":400,"message":"request (16 tokens) exceeds the available context size (16 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":16,"n_ctx":16}}`
	if resp.StatusCode != 400 || string(b) != want {
		t.Errorf("over-context: %d %s", resp.StatusCode, b)
	}
	r := obj(t, postOK(t, url+"/v1/completions", `{"prompt":[`+ids(15)+`],"max_tokens":10,"ignore_eos":true}`))
	if num(t, obj(t, r["usage"])["completion_tokens"]) != 1 || obj(t, arr(t, r["choices"])[0])["finish_reason"] != "length" {
		t.Errorf("n_ctx-1 prompt: %v", r)
	}
	resp, b = do(t, http.MethodGet, url+"/metrics", "", "")
	if want := "{\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. Start it with `--metrics`\",\"type\":\"not_supported_error\"}}"; resp.StatusCode != 501 || string(b) != want {
		t.Errorf("/metrics: %d %s", resp.StatusCode, b)
	}

	_, wurl := testServer(t, Config{Flavor: FlavorLlamaCpp, Warmup: time.Hour})
	for _, path := range []string{"/health", "/v1/models", "/nope"} {
		resp, b := do(t, http.MethodGet, wurl+path, "", "")
		if resp.StatusCode != 503 || string(b) != `{"error":{"message":"Loading model","type":"unavailable_error","code":503}}` {
			t.Errorf("%s while loading: %d %s", path, resp.StatusCode, b)
		}
	}

	s, purl := testServer(t, Config{Flavor: FlavorLlamaCpp, ParseErrorRate: 1})
	if code, _ := probe(t, purl, "/v1/chat/completions"); code != 400 {
		t.Errorf("probe under ParseErrorRate: %d", code)
	}
	resp, b = post(t, purl+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 500 || string(b) != `{"error":{"code":500,"message":"Failed to parse input at pos 0","type":"server_error"}}` {
		t.Errorf("parse fault: %d %s", resp.StatusCode, b)
	}
	if st := s.Stats(); st.Errors != 2 || st.GeneratedTokens != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestFlavorMetrics: per flavor, /metrics names and labels, and counters
// equal to what the answers said; llama.cpp's start time in its header.
func TestFlavorMetrics(t *testing.T) {
	for _, f := range Flavors {
		t.Run(f, func(t *testing.T) {
			_, url := testServer(t, Config{Flavor: f, EnableMetrics: true, SpecDraftTokens: 4})
			var prompt, completion int
			for i := range 3 {
				r := obj(t, postOK(t, url+"/v1/completions", fmt.Sprintf(`{"model":%q,"prompt":"q%d","max_tokens":30}`, modelOf(f), i)))
				u := obj(t, r["usage"])
				prompt += num(t, u["prompt_tokens"])
				completion += num(t, u["completion_tokens"])
			}
			resp, b := do(t, http.MethodGet, url+"/metrics", "", "")
			if resp.StatusCode != 200 {
				t.Fatalf("/metrics %d", resp.StatusCode)
			}
			text := string(b)
			var want []string
			switch f {
			case FlavorSGLang:
				want = []string{
					fmt.Sprintf(`sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="sim-model"} %d.0`, prompt),
					fmt.Sprintf(`sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="sim-model"} %d.0`, completion),
					`sglang:num_requests_total{engine_type="unified",is_streaming="false",model_name="sim-model"} 3.0`,
					`sglang:cached_tokens_total{cache_source="device",engine_type="unified",model_name="sim-model"} 0.0`,
					`sglang:cached_tokens_total{cache_source="host",engine_type="unified",model_name="sim-model"} 0.0`,
					`sglang:cached_tokens_total{cache_source="total",engine_type="unified",model_name="sim-model"} 0.0`,
					`sglang:time_to_first_token_seconds_count{engine_type="unified",is_streaming="false",model_name="sim-model"} 3.0`,
					`sglang:e2e_request_latency_seconds_bucket{engine_type="unified",is_streaming="false",model_name="sim-model",le="+Inf"} 3.0`,
				}
			case FlavorVLLM:
				want = []string{
					`vllm:num_requests_running{engine="0",model_name="sim-model"} 0.0`,
					`vllm:num_requests_waiting{engine="0",model_name="sim-model"} 0.0`,
					`vllm:kv_cache_usage_perc{engine="0",model_name="sim-model"} 0.0`,
					fmt.Sprintf(`vllm:prefix_cache_queries_total{engine="0",model_name="sim-model"} %d.0`, prompt),
					`vllm:prefix_cache_hits_total{engine="0",model_name="sim-model"} 0.0`,
					fmt.Sprintf(`vllm:prompt_tokens_total{engine="0",model_name="sim-model"} %d.0`, prompt),
					fmt.Sprintf(`vllm:generation_tokens_total{engine="0",model_name="sim-model"} %d.0`, completion),
					`vllm:spec_decode_num_drafts_total{engine="0",model_name="sim-model"}`,
					`vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="sim-model"}`,
					`vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="sim-model"}`,
				}
				if resp.Header.Get("Process-Start-Time-Unix") != "" {
					t.Errorf("vLLM sent Process-Start-Time-Unix")
				}
			case FlavorLlamaCpp:
				want = []string{
					"# TYPE llamacpp:prompt_tokens_total counter\n",
					fmt.Sprintf("\nllamacpp:prompt_tokens_total %d\n", prompt),
					fmt.Sprintf("\nllamacpp:tokens_predicted_total %d\n", completion),
					"\nllamacpp:requests_processing 0\n",
					"\nllamacpp:requests_deferred 0\n",
					"\nllamacpp:n_decode_total ",
					"\nllamacpp:predicted_tokens_seconds ",
					"\nllamacpp:spec_decode_num_drafts_total ",
				}
				start, err := strconv.ParseInt(resp.Header.Get("Process-Start-Time-Unix"), 10, 64)
				if err != nil || time.Since(time.Unix(start, 0)) > time.Minute {
					t.Errorf("Process-Start-Time-Unix %q", resp.Header.Get("Process-Start-Time-Unix"))
				}
				if resp, _ := do(t, http.MethodGet, url+"/health", "", ""); resp.Header.Get("Process-Start-Time-Unix") != "" {
					t.Errorf("/health carries Process-Start-Time-Unix")
				}
			}
			for _, w := range want {
				if !strings.Contains(text, w) {
					t.Errorf("/metrics lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

// TestSGLangSpecNewNames: meta_info carries the renamed speculative
// counts and their old aliases, equal.
func TestSGLangSpecNewNames(t *testing.T) {
	_, url := testServer(t, Config{SpecDraftTokens: 4})
	mi := obj(t, obj(t, postOK(t, url+"/generate", `{"text":"spec","sampling_params":{"max_new_tokens":40,"ignore_eos":true}}`))["meta_info"])
	if num(t, mi["spec_num_correct_drafts"]) != num(t, mi["spec_accepted_drafts"]) ||
		num(t, mi["spec_num_proposed_drafts"]) != num(t, mi["spec_proposed_drafts"]) ||
		!reflect.DeepEqual(ints(t, mi["spec_correct_drafts_histogram"]), ints(t, mi["spec_accept_histogram"])) {
		t.Errorf("meta_info %v", mi)
	}
}

// TestSGLangDefaultUnchanged: with no flavor, the answers are the same as
// under "sglang" and carry no flavor salt.
func TestSGLangDefaultUnchanged(t *testing.T) {
	_, a := testServer(t, Config{})
	_, b := testServer(t, Config{Flavor: FlavorSGLang})
	body := `{"text":"same","sampling_params":{"max_new_tokens":30,"repetition_penalty":1.3,"temperature":0.5}}`
	ra, rb := obj(t, postOK(t, a+"/generate", body)), obj(t, postOK(t, b+"/generate", body))
	if ra["text"] != rb["text"] || !reflect.DeepEqual(ra["output_ids"], rb["output_ids"]) {
		t.Errorf("default %v, sglang %v", ra, rb)
	}
	plain := obj(t, postOK(t, a+"/generate", `{"text":"same","sampling_params":{"max_new_tokens":30}}`))
	if plain["text"] != ra["text"] {
		t.Errorf("SGLang's output moved with repetition_penalty/temperature")
	}
}
