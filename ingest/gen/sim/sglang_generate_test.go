package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

var metaKeys = []string{"id", "finish_reason", "prompt_tokens", "weight_version", "num_retractions",
	"reasoning_tokens", "completion_tokens", "cached_tokens", "dp_rank", "e2e_latency", "response_sent_to_client_ts"}

func TestGenerateShape(t *testing.T) {
	_, url := testServer(t, Config{})
	resp, b := post(t, url+"/generate", `{"rid":"job42-000017","input_ids":[1,300,301,302],"sampling_params":{"max_new_tokens":256,"temperature":0.7,"top_p":0.95,"top_k":50,"min_p":0.0,"stop_token_ids":[4],"skip_special_tokens":true},"stream":false}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	wantKeys(t, b, []string{"text", "output_ids", "meta_info"})
	wantKeys(t, b, metaKeys, "meta_info")
	m := obj(t, decode(t, b))
	meta := obj(t, m["meta_info"])
	ids := ints(t, m["output_ids"])
	if str(t, meta["id"]) != "job42-000017" || num(t, meta["prompt_tokens"]) != 4 || str(t, meta["weight_version"]) != "default" ||
		num(t, meta["num_retractions"]) != 0 || num(t, meta["reasoning_tokens"]) != 0 || num(t, meta["cached_tokens"]) != 0 || meta["dp_rank"] != nil {
		t.Errorf("meta_info %v", meta)
	}
	if num(t, meta["completion_tokens"]) != len(ids) {
		t.Errorf("completion_tokens %v != len(output_ids) %d", meta["completion_tokens"], len(ids))
	}
	for _, k := range []string{"e2e_latency", "response_sent_to_client_ts"} {
		if _, err := meta[k].(json.Number).Float64(); err != nil {
			t.Errorf("%s is not a float: %v", k, meta[k])
		}
	}
	fr := obj(t, meta["finish_reason"])
	switch str(t, fr["type"]) {
	case "stop":
		wantKeys(t, b, []string{"type", "matched"}, "meta_info", "finish_reason")
		if num(t, fr["matched"]) != EOSID || ids[len(ids)-1] != EOSID {
			t.Errorf("stop finish %v, last id %d", fr, ids[len(ids)-1])
		}
		if text := str(t, m["text"]); text != Decode(ids[:len(ids)-1], true) || strings.Contains(text, "<|eos|>") {
			t.Errorf("text %q does not match output_ids without EOS", text)
		}
	case "length":
		if num(t, fr["length"]) != 256 || len(ids) != 256 {
			t.Errorf("length finish %v with %d ids", fr, len(ids))
		}
	default:
		t.Errorf("finish_reason %v", fr)
	}
}

func TestGenerateDeterministic(t *testing.T) {
	_, url := testServer(t, Config{Seed: 3})
	body := `{"text":"What is the capital of France?"}`
	a, b := postOK(t, url+"/generate", body), postOK(t, url+"/generate", body)
	ma, mb := obj(t, a), obj(t, b)
	if ma["text"] != mb["text"] || !reflect.DeepEqual(ma["output_ids"], mb["output_ids"]) {
		t.Errorf("same prompt, different outputs: %v vs %v", ma["text"], mb["text"])
	}
	// /generate text adds BOS, so it equals input_ids with BOS.
	c := obj(t, postOK(t, url+"/generate", fmt.Sprintf(`{"input_ids":%s}`, marshal(Encode("What is the capital of France?", true)))))
	if c["text"] != ma["text"] {
		t.Errorf("text prompt and its ids differ: %v vs %v", ma["text"], c["text"])
	}
	seeded := func(seed int) string {
		m := obj(t, postOK(t, url+"/generate", fmt.Sprintf(`{"text":"x","sampling_params":{"sampling_seed":%d,"ignore_eos":true,"max_new_tokens":30}}`, seed)))
		return str(t, m["text"])
	}
	if a, b := seeded(1), seeded(1); seeded(2) == a || a != b {
		t.Error("sampling_seed does not select a deterministic output")
	}
}

func TestGenerateFinish(t *testing.T) {
	_, url := testServer(t, Config{})
	m := obj(t, postOK(t, url+"/generate", `{"text":"long","sampling_params":{"max_new_tokens":17,"ignore_eos":true}}`))
	meta := obj(t, m["meta_info"])
	if fr := obj(t, meta["finish_reason"]); str(t, fr["type"]) != "length" || num(t, fr["length"]) != 17 {
		t.Errorf("finish %v", fr)
	}
	if ids := ints(t, m["output_ids"]); len(ids) != 17 || num(t, meta["completion_tokens"]) != 17 || len(str(t, m["text"])) != 17 {
		t.Errorf("length output %d ids, %v tokens, text %q", len(ids), meta["completion_tokens"], m["text"])
	}
	// max_new_tokens 0 is an empty "length" output.
	m = obj(t, postOK(t, url+"/generate", `{"text":"zero","sampling_params":{"max_new_tokens":0}}`))
	if fr := obj(t, obj(t, m["meta_info"])["finish_reason"]); num(t, fr["length"]) != 0 || len(ints(t, m["output_ids"])) != 0 {
		t.Errorf("max_new_tokens 0: %v", m)
	}
	// A stop string is trimmed from text and reported as matched.
	full := str(t, obj(t, postOK(t, url+"/generate", `{"text":"s","sampling_params":{"max_new_tokens":60,"ignore_eos":true}}`))["text"])
	word := strings.Fields(full)[1]
	m = obj(t, postOK(t, url+"/generate", fmt.Sprintf(`{"text":"s","sampling_params":{"max_new_tokens":60,"ignore_eos":true,"stop":[%q]}}`, word)))
	fr := obj(t, obj(t, m["meta_info"])["finish_reason"])
	if fr["matched"] != word || strings.Contains(str(t, m["text"]), word) || !strings.HasPrefix(full, str(t, m["text"])+word) {
		t.Errorf("stop %q: finish %v, text %q (full %q)", word, fr, m["text"], full)
	}
}

func TestGenerateErrors(t *testing.T) {
	_, url := testServer(t, Config{ContextLength: 100})
	long := marshal(make([]int, 100))
	for _, tc := range []struct {
		name, body string
		status     int
		msg        string
	}{
		{"too long", `{"input_ids":` + string(long) + `}`, 400, "The input (100 tokens) is longer than the model's context length (100 tokens)."},
		{"total", `{"input_ids":[1,2,3,4,5,6,7,8,9,10],"sampling_params":{"max_new_tokens":91}}`, 400,
			"Requested token count exceeds the model's maximum context length of 100 tokens. You requested a total of 101 tokens: 10 tokens from the input messages and 91 tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit."},
		{"max_req_input_len", `{"input_ids":` + string(marshal(make([]int, 95))) + `,"sampling_params":{"max_new_tokens":1}}`, 400,
			"Input length (95 tokens) exceeds the maximum allowed length (94 tokens). Use a shorter input or enable --allow-auto-truncate."},
		{"empty ids", `{"input_ids":[]}`, 400, "input_ids cannot be empty."},
		{"no input", `{"sampling_params":{}}`, 400, "Either text, input_ids or input_embeds should be provided."},
		{"top_p", `{"text":"x","sampling_params":{"top_p":0.0}}`, 400, "top_p must be in (0, 1], got 0.0."},
	} {
		resp, b := post(t, url+"/generate", tc.body)
		if resp.StatusCode != tc.status {
			t.Errorf("%s: status %d: %s", tc.name, resp.StatusCode, b)
			continue
		}
		wantKeys(t, b, []string{"error"})
		if got := errMessage(t, b); got != tc.msg {
			t.Errorf("%s: message\n got %q\nwant %q", tc.name, got, tc.msg)
		}
	}

	resp, b := post(t, url+"/generate", `{"text":"x","sampling_params":{"max_tokens":5}}`)
	if resp.StatusCode != 500 || string(b) != "Internal Server Error" {
		t.Errorf("unknown sampling key: %d %q", resp.StatusCode, b)
	}
	for _, body := range []string{`{"text":"x","rid":5}`, `{"text":"x","stream":"maybe"}`, `{"text":`, `[1,2]`} {
		resp, b := post(t, url+"/generate", body)
		if resp.StatusCode != 400 {
			t.Errorf("%s: status %d", body, resp.StatusCode)
			continue
		}
		wantKeys(t, b, []string{"object", "message", "type", "param", "code"})
		m := obj(t, decode(t, b))
		if m["type"] != "Bad Request" || num(t, m["code"]) != 400 || m["param"] != nil || m["object"] != "error" {
			t.Errorf("%s: %s", body, b)
		}
	}
	if resp, _ := do(t, http.MethodPost, url+"/generate", "text/plain", `{"text":"x"}`); resp.StatusCode != 400 {
		t.Errorf("text/plain body: status %d", resp.StatusCode)
	}
	if resp, _ := do(t, http.MethodPost, url+"/generate", "", `{"text":"x"}`); resp.StatusCode != 200 {
		t.Errorf("no content type: status %d", resp.StatusCode)
	}
	if resp, b := do(t, http.MethodGet, url+"/generate", "", ""); resp.StatusCode != 405 || errDetail(t, b) != "Method Not Allowed" {
		t.Errorf("GET /generate: %d %s", resp.StatusCode, b)
	}
}

// TestUnsimulatedShapes checks that the request shapes gen never sends, a
// batch of prompts and n > 1 samples, get a 400 naming what is not
// simulated.
func TestUnsimulatedShapes(t *testing.T) {
	_, url := testServer(t, Config{})
	const (
		batch = "sim: batch requests are not simulated (gendex sends one prompt per request)"
		n     = "sim: n > 1 is not simulated (gendex asks for one sample per request)"
	)
	chat := `"messages":[{"role":"user","content":"Hi"}]`
	for _, tc := range []struct{ path, body, msg string }{
		{"/generate", `{"text":["a","b"]}`, batch},
		{"/generate", `{"input_ids":[[1,300],[1,301]]}`, batch},
		{"/generate", `{"text":"a","sampling_params":[{"max_new_tokens":3}]}`, batch},
		{"/generate", `{"text":"a","rid":["r"]}`, batch},
		{"/generate", `{"text":"a","sampling_params":{"n":2}}`, n},
		{"/v1/completions", `{"prompt":["a","b"]}`, batch},
		{"/v1/completions", `{"prompt":[[1,300],[1,301]]}`, batch},
		{"/v1/completions", `{"prompt":"a","n":2}`, n},
		{"/v1/chat/completions", `{` + chat + `,"n":2}`, n},
	} {
		resp, b := post(t, url+tc.path, tc.body)
		if resp.StatusCode != 400 || errMessage(t, b) != tc.msg {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, resp.StatusCode, b)
		}
	}
	// One prompt, including one token-id list and an explicit n of 1, is
	// served.
	for _, tc := range []struct{ path, body string }{
		{"/generate", `{"input_ids":[1,300],"sampling_params":{"n":1}}`},
		{"/v1/completions", `{"prompt":[1,300,301],"n":1}`},
		{"/v1/chat/completions", `{` + chat + `,"n":1}`},
	} {
		postOK(t, url+tc.path, tc.body)
	}
}

// errDetail returns FastAPI's {"detail":…}.
func errDetail(t *testing.T, b []byte) string {
	t.Helper()
	return str(t, obj(t, decode(t, b))["detail"])
}

func TestGenerateDuplicateInFlight(t *testing.T) {
	s, url := testServer(t, Config{DecodeTokensPerSec: 100})
	var wg sync.WaitGroup
	wg.Go(func() {
		post(t, url+"/generate", `{"rid":"dup","text":"x","sampling_params":{"max_new_tokens":30,"ignore_eos":true}}`)
	})
	waitFor(t, func() bool { return s.Stats().Running == 1 })
	resp, b := post(t, url+"/generate", `{"rid":"dup","text":"y"}`)
	if resp.StatusCode != 400 || errMessage(t, b) != "Duplicate request ID detected: dup" {
		t.Errorf("duplicate rid: %d %s", resp.StatusCode, b)
	}
	wg.Wait()
	if resp, _ := post(t, url+"/generate", `{"rid":"dup","text":"y"}`); resp.StatusCode != 200 {
		t.Errorf("rid reuse after completion: %d", resp.StatusCode)
	}
}

// waitFor polls cond until it holds, failing the test after 30 s (a
// condition that never comes, not a measure of speed).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 30s")
		}
		time.Sleep(time.Millisecond)
	}
}
