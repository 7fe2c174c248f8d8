package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// TestSimKnee: `gendex sim --flavor vllm --step-base --kv-tokens` runs the
// knee scheduler: requests past the KV pool preempt running ones, counted
// by vllm:num_preemptions_total, and every request is answered. A KV pool
// without a step time, a negative step, or a pool under llama.cpp are
// usage errors.
func TestSimKnee(t *testing.T) {
	t.Parallel()
	bin := gendexBinary(t)
	url := startSimProcess(t, bin, "--flavor", "vllm", "--step-base", "1ms", "--kv-tokens", "1200")
	var wg sync.WaitGroup
	for n := range 20 {
		wg.Go(func() {
			// 20 prompts of about 150 tokens (a token a byte) and 100 new
			// tokens each: 5,000 tokens, past the pool of 1,200.
			prompt := fmt.Sprintf("question %d", n) + strings.Repeat(" with some context", 8)
			body := `{"model":"sim-model","prompt":"` + prompt + `","max_tokens":100,"ignore_eos":true}`
			resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 {
				t.Errorf("request %d: %d %s", n, resp.StatusCode, b)
			}
		})
	}
	wg.Wait()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	preempted := -1.0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "vllm:num_preemptions_total{") {
			preempted, _ = strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		}
	}
	if preempted <= 0 {
		t.Errorf("vllm:num_preemptions_total %v after 20 requests past a pool of 1200 tokens\n%s", preempted, b)
	}

	for _, args := range [][]string{
		{"sim", "--kv-tokens", "1000"},
		{"sim", "--step-base", "-1ms"},
		{"sim", "--flavor", "llamacpp", "--step-base", "1ms", "--kv-tokens", "1000"},
	} {
		if r := gendex(t, testEnv(nil), args...); r.code != 2 || !strings.Contains(r.stderr, "kv-tokens") {
			t.Errorf("%s: exit %d\n%s", strings.Join(args, " "), r.code, r.stderr)
		}
	}
}
