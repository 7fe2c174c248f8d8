package sim

import (
	"net/http"
	"strings"
	"sync"
	"testing"
)

func TestHealthAndInfo(t *testing.T) {
	_, url := testServer(t, Config{Model: "qwen-sim", ContextLength: 4096, Slots: 7})
	for _, p := range []string{"/health", "/health_generate"} {
		if resp, b := do(t, http.MethodGet, url+p, "", ""); resp.StatusCode != 200 || len(b) != 0 {
			t.Errorf("%s: %d %q", p, resp.StatusCode, b)
		}
	}
	_, b := do(t, http.MethodGet, url+"/v1/models", "", "")
	wantKeys(t, b, []string{"object", "data"})
	models := obj(t, decode(t, b))
	card := obj(t, arr(t, models["data"])[0])
	if models["object"] != "list" || card["id"] != "qwen-sim" || num(t, card["max_model_len"]) != 4096 || card["owned_by"] != "sglang" || card["parent"] != nil {
		t.Errorf("/v1/models %s", b)
	}
	if resp, b := do(t, http.MethodGet, url+"/v1/models/qwen-sim", "", ""); resp.StatusCode != 200 || num(t, obj(t, decode(t, b))["max_model_len"]) != 4096 {
		t.Errorf("/v1/models/qwen-sim: %d %s", resp.StatusCode, b)
	}
	if resp, _ := do(t, http.MethodGet, url+"/v1/models/other", "", ""); resp.StatusCode != 404 {
		t.Errorf("/v1/models/other: %d", resp.StatusCode)
	}
	for _, p := range []string{"/model_info", "/get_model_info"} {
		_, b := do(t, http.MethodGet, url+p, "", "")
		wantKeys(t, b, []string{"model_path", "tokenizer_path", "is_generation", "preferred_sampling_params", "weight_version",
			"has_image_understanding", "has_audio_understanding", "model_type", "architectures"})
	}
	for _, p := range []string{"/server_info", "/get_server_info"} {
		_, b := do(t, http.MethodGet, url+p, "", "")
		m := obj(t, decode(t, b))
		if m["status"] != "ready" || m["version"] != "sim" || m["context_length"] != nil ||
			num(t, m["max_running_requests"]) != 7 || num(t, m["max_req_input_len"]) != 4096-6 {
			t.Errorf("%s: %s", p, b)
		}
		obj(t, arr(t, m["internal_states"])[0])
	}
	if resp, b := do(t, http.MethodGet, url+"/nope", "", ""); resp.StatusCode != 404 || errDetail(t, b) != "Not Found" {
		t.Errorf("unknown path: %d %s", resp.StatusCode, b)
	}
	if resp, _ := do(t, http.MethodGet, url+"/metrics", "", ""); resp.StatusCode != 404 {
		t.Errorf("/metrics without EnableMetrics: %d", resp.StatusCode)
	}
}

func TestMetrics(t *testing.T) {
	_, url := testServer(t, Config{EnableMetrics: true})
	postOK(t, url+"/generate", `{"text":"x","sampling_params":{"max_new_tokens":5,"ignore_eos":true}}`)
	resp, b := do(t, http.MethodGet, url+"/metrics", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, want := range []string{"sglang:num_running_reqs{", "sglang:num_queue_reqs{", "sglang:num_requests_total{",
		`sglang:generation_tokens_total{engine_type="unified",model_name="sim-model",pp_rank="0",tp_rank="0"} 5.0`,
		`sglang:prompt_tokens_total{engine_type="unified",model_name="sim-model",pp_rank="0",tp_rank="0"} 2.0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}

func TestAuth(t *testing.T) {
	_, url := testServer(t, Config{APIKey: "sekret", EnableMetrics: true})
	for _, p := range []string{"/health", "/health_generate", "/metrics"} {
		if resp, _ := do(t, http.MethodGet, url+p, "", ""); resp.StatusCode != 200 {
			t.Errorf("%s without key: %d", p, resp.StatusCode)
		}
	}
	for _, h := range []string{"", "Bearer wrong", "Basic sekret", "Bearersekret"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/v1/models", nil)
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Errorf("Authorization %q: %d", h, resp.StatusCode)
		}
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url+"/generate", strings.NewReader(`{"text":"x"}`))
	req.Header.Set("Authorization", "bearer sekret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("with key: %d", resp.StatusCode)
	}
	_, b := post(t, url+"/generate", `{"text":"x"}`)
	if string(b) != `{"error":"Unauthorized"}` {
		t.Errorf("401 body %s", b)
	}
}

func TestFlushCache(t *testing.T) {
	s, url := testServer(t, Config{DecodeTokensPerSec: 100})
	resp, b := do(t, http.MethodPost, url+"/flush_cache", "", "")
	if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "Cache flushed.\n") {
		t.Errorf("idle flush: %d %q", resp.StatusCode, b)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		post(t, url+"/generate", `{"text":"x","sampling_params":{"max_new_tokens":20,"ignore_eos":true}}`)
	})
	waitFor(t, func() bool { return s.Stats().Running == 1 })
	if resp, b := do(t, http.MethodGet, url+"/flush_cache", "", ""); resp.StatusCode != 400 || string(b) != "Flush cache failed.\n" {
		t.Errorf("busy flush: %d %q", resp.StatusCode, b)
	}
	if resp, _ := do(t, http.MethodGet, url+"/flush_cache?timeout=5", "", ""); resp.StatusCode != 200 {
		t.Errorf("flush with timeout: %d", resp.StatusCode)
	}
	wg.Wait()
}

func TestAbortRequest(t *testing.T) {
	s, url := testServer(t, Config{DecodeTokensPerSec: 50, Slots: 2})
	type result struct {
		rid string
		m   map[string]any
	}
	results := make(chan result, 4)
	var wg sync.WaitGroup
	for _, rid := range []string{"job1", "job10", "job2"} {
		wg.Go(func() {
			results <- result{rid, obj(t, postOK(t, url+"/generate", `{"rid":"`+rid+`","text":"x","sampling_params":{"max_new_tokens":100,"ignore_eos":true}}`))}
		})
	}
	// job2 may be queued behind the two running ones; abort it too via
	// prefix "job2" exactly.
	waitFor(t, func() bool { st := s.Stats(); return st.Running == 2 && st.Queued == 1 })
	// A prefix that is not itself in flight aborts nothing (one tokenizer
	// worker), an in-flight rid aborts every rid it prefixes.
	if resp, b := post(t, url+"/abort_request", `{"rid":"job"}`); resp.StatusCode != 200 || len(b) != 0 {
		t.Fatalf("abort: %d %q", resp.StatusCode, b)
	}
	post(t, url+"/abort_request", `{"rid":"job1"}`)
	post(t, url+"/abort_request", `{"rid":"job2"}`)
	wg.Wait()
	close(results)
	for r := range results {
		meta := obj(t, r.m["meta_info"])
		fr := obj(t, meta["finish_reason"])
		if fr["type"] != "abort" {
			t.Errorf("%s: finish %v", r.rid, fr)
			continue
		}
		switch fr["message"] {
		case "Abort in waiting queue":
			if _, ok := meta["prompt_tokens"]; ok || len(ints(t, r.m["output_ids"])) != 0 {
				t.Errorf("%s: queued abort meta %v", r.rid, meta)
			}
		case "Aborted":
			if n := len(ints(t, r.m["output_ids"])); n >= 100 || n != num(t, meta["completion_tokens"]) {
				t.Errorf("%s: running abort with %d ids, meta %v", r.rid, n, meta)
			}
		default:
			t.Errorf("%s: abort message %v", r.rid, fr["message"])
		}
	}
	if st := s.Stats(); st.Aborts != 3 || st.Completed != 3 || st.Running != 0 {
		t.Errorf("stats after aborts %+v", st)
	}
}
