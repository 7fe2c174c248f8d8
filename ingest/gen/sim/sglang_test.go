package sim

import (
	"net/http"
	"strings"
	"testing"
)

func TestHealthAndInfo(t *testing.T) {
	_, url := testServer(t, Config{Model: "qwen-sim", ContextLength: 4096, Slots: 7})
	if resp, b := do(t, http.MethodGet, url+"/health", "", ""); resp.StatusCode != 200 || len(b) != 0 {
		t.Errorf("/health: %d %q", resp.StatusCode, b)
	}
	_, b := do(t, http.MethodGet, url+"/v1/models", "", "")
	wantKeys(t, b, []string{"object", "data"})
	models := obj(t, decode(t, b))
	card := obj(t, arr(t, models["data"])[0])
	if models["object"] != "list" || card["id"] != "qwen-sim" || num(t, card["max_model_len"]) != 4096 || card["owned_by"] != "sglang" || card["parent"] != nil {
		t.Errorf("/v1/models %s", b)
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
		`sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="sim-model"} 5.0`,
		`sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="sim-model"} 2.0`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}

func TestAuth(t *testing.T) {
	_, url := testServer(t, Config{APIKey: "sekret", EnableMetrics: true})
	for _, p := range []string{"/health", "/metrics"} {
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
