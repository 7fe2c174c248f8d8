package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gendex/store/prom/promtest"
)

func float(t *testing.T, v any) float64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("not a number: %#v", v)
	}
	f, err := n.Float64()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// checkSpecMeta checks one meta_info's spec fields against each other, as
// SGLang computes them with n draft tokens, and returns verify_ct.
func checkSpecMeta(t *testing.T, mi map[string]any, n int) int {
	t.Helper()
	c := num(t, mi["completion_tokens"])
	v, acc, prop := num(t, mi["spec_verify_ct"]), num(t, mi["spec_accepted_drafts"]), num(t, mi["spec_proposed_drafts"])
	hist := ints(t, mi["spec_accept_histogram"])
	if v <= 0 || prop != v*(n-1) || c != 1+v+acc {
		t.Errorf("completion %d, verify %d, accepted %d, proposed %d (want proposed = verify×%d, completion = 1+verify+accepted)", c, v, acc, prop, n-1)
	}
	if got, want := float(t, mi["spec_accept_length"]), float64(c)/float64(v); got != want {
		t.Errorf("spec_accept_length %v, want completion/verify = %v", got, want)
	}
	if got, want := float(t, mi["spec_accept_rate"]), float64(acc)/float64(prop); got != want {
		t.Errorf("spec_accept_rate %v, want accepted/proposed = %v", got, want)
	}
	steps, drafts := 0, 0
	for j, h := range hist {
		steps += h
		drafts += j * h
	}
	if len(hist) != n || steps != v || drafts != acc {
		t.Errorf("histogram %v: %d steps accepting %d drafts, want %d buckets, %d steps, %d drafts", hist, steps, drafts, n, v, acc)
	}
	return v
}

// TestSpecFields: with SpecDraftTokens, every answer of two or more tokens
// carries SGLang's spec fields, consistent with each other (accept length
// = completion / verify, rate = accepted / (verify × (N-1)), the histogram
// sums to verify steps and accepted drafts), the same for the same prompt;
// a one-token answer (no verify step) has none; chat has them under
// return_meta_info; without the setting no answer has them.
func TestSpecFields(t *testing.T) {
	const n = 4
	_, url := testServer(t, Config{SpecDraftTokens: n})
	lengths := map[float64]bool{}
	for i := range 20 {
		body := fmt.Sprintf(`{"text":"prompt %d","sampling_params":{"max_new_tokens":200}}`, i)
		mi := obj(t, obj(t, postOK(t, url+"/generate", body))["meta_info"])
		checkSpecMeta(t, mi, n)
		lengths[float(t, mi["spec_accept_length"])] = true
		again := obj(t, obj(t, postOK(t, url+"/generate", body))["meta_info"])
		for _, k := range []string{"spec_verify_ct", "spec_accepted_drafts", "spec_accept_length"} {
			if mi[k] != again[k] {
				t.Errorf("prompt %d asked twice: %s %v then %v", i, k, mi[k], again[k])
			}
		}
	}
	if len(lengths) < 10 {
		t.Errorf("20 prompts gave only %d distinct accept lengths", len(lengths))
	}
	mi := obj(t, obj(t, postOK(t, url+"/generate", `{"text":"x","sampling_params":{"max_new_tokens":1}}`))["meta_info"])
	for k := range mi {
		if strings.HasPrefix(k, "spec_") {
			t.Errorf("a one-token answer has %s", k)
		}
	}
	ch := obj(t, postOK(t, url+"/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":50,"return_meta_info":true}`))
	choice := obj(t, arr(t, ch["choices"])[0])
	cmi := obj(t, choice["meta_info"])
	checkSpecMeta(t, cmi, n)
	if num(t, obj(t, ch["usage"])["completion_tokens"]) != num(t, cmi["completion_tokens"]) {
		t.Errorf("chat usage and meta_info disagree: %v", ch)
	}

	_, plain := testServer(t, Config{})
	mi = obj(t, obj(t, postOK(t, plain+"/generate", `{"text":"x","sampling_params":{"max_new_tokens":50}}`))["meta_info"])
	for k := range mi {
		if strings.HasPrefix(k, "spec_") {
			t.Errorf("without SpecDraftTokens an answer has %s", k)
		}
	}
}

var (
	sampleRE = regexp.MustCompile(`(?m)^(sglang:[a-z_]+)\{([^}]*)\} (\S+)$`)
	familyRE = regexp.MustCompile(`(?m)^# TYPE (sglang:[a-z0-9_]+) `)
)

// metricValues reads /metrics into name -> value, checking every sample's
// labels: the scheduler's gauges (and its retractions counter) carry
// SGLang's scheduler labels, the tokenizer's counters model_name and
// engine_type.
func metricValues(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, b := do(t, http.MethodGet, url+"/metrics", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	out := map[string]float64{}
	names := map[string]bool{} // every family, for promtool's naming lint
	for _, m := range sampleRE.FindAllStringSubmatch(string(b), -1) {
		want := `engine_type="unified",model_name="sim-model",moe_ep_rank="0",pp_rank="0",tp_rank="0"`
		switch {
		case strings.HasSuffix(m[1], "_seconds_bucket"), strings.HasSuffix(m[1], "_seconds_count"), strings.HasSuffix(m[1], "_seconds_sum"):
			continue // the latency histograms (TestSGLangStreamingLabels)
		case m[1] == "sglang:cached_tokens_total":
			continue // one series per cache_source (TestSGLangStreamingLabels)
		case m[1] == "sglang:prompt_tokens_total", m[1] == "sglang:generation_tokens_total", m[1] == "sglang:num_requests_total":
			want = `engine_type="unified",is_streaming="false",model_name="sim-model"`
		case m[1] == "sglang:num_retracted_requests_total":
			// the scheduler's counter: its labels
		case strings.HasSuffix(m[1], "_total"):
			want = `engine_type="unified",model_name="sim-model"`
		}
		if m[2] != want {
			t.Errorf("%s labels {%s}, want {%s}", m[1], m[2], want)
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatal(err)
		}
		out[m[1]] = v
	}
	for _, m := range familyRE.FindAllStringSubmatch(string(b), -1) {
		names[m[1]] = true
	}
	var allowed []string
	for name := range names {
		allowed = append(allowed, name+" metric names should not contain ':'")
	}
	promtest.Check(t, b, allowed...)
	return out
}

// TestSchedulerGauges: token_usage is the running items' KV tokens over the
// pool, num_running_reqs and num_queue_reqs follow the slots, and once the
// answers are in, gen_throughput is their tokens over the window and
// spec_accept_length and spec_accept_rate are the sums of their answer
// lines' fields, divided (not a mean of ratios).
func TestSchedulerGauges(t *testing.T) {
	const n = 5
	_, url := testServer(t, Config{EnableMetrics: true, SpecDraftTokens: n, Slots: 2, DecodeTokensPerSec: 100, MaxTotalTokens: 1000})
	m := metricValues(t, url)
	for _, k := range []string{"sglang:token_usage", "sglang:gen_throughput", "sglang:cache_hit_rate", "sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:num_running_reqs"} {
		if v, ok := m[k]; !ok || v != 0 {
			t.Errorf("idle: %s = %v (present %v), want 0", k, v, ok)
		}
	}
	if m["sglang:max_total_num_tokens"] != 1000 {
		t.Errorf("max_total_num_tokens %v", m["sglang:max_total_num_tokens"])
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var metas []map[string]any
	for i := range 3 {
		wg.Go(func() {
			body := fmt.Sprintf(`{"input_ids":[%d,%d,%d],"sampling_params":{"max_new_tokens":60,"ignore_eos":true}}`, 300+i, 301+i, 302+i)
			mi := obj(t, obj(t, postOK(t, url+"/generate", body))["meta_info"])
			mu.Lock()
			metas = append(metas, mi)
			mu.Unlock()
		})
	}
	// Once all three have arrived and decoding has begun: two decoding
	// (0.6 s each), one queued.
	waitFor(t, func() bool {
		m = metricValues(t, url)
		return m["sglang:num_running_reqs"]+m["sglang:num_queue_reqs"] == 3 && m["sglang:num_used_tokens"] > 2*3
	})
	if m["sglang:num_running_reqs"] != 2 || m["sglang:num_queue_reqs"] != 1 {
		t.Errorf("running %v, queued %v; want 2 and 1", m["sglang:num_running_reqs"], m["sglang:num_queue_reqs"])
	}
	// Two items of 3 prompt tokens and up to 60 tokens decoded each.
	if used := m["sglang:num_used_tokens"]; used > 2*3+2*60 || m["sglang:token_usage"] != used/1000 {
		t.Errorf("num_used_tokens %v, token_usage %v", used, m["sglang:token_usage"])
	}
	wg.Wait()
	// Into the next second, so that every answer's second has completed.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	m = metricValues(t, url)
	var completion, verify, acc, prop int
	for _, mi := range metas {
		verify += checkSpecMeta(t, mi, n)
		completion += num(t, mi["completion_tokens"])
		acc += num(t, mi["spec_accepted_drafts"])
		prop += num(t, mi["spec_proposed_drafts"])
	}
	if got, want := m["sglang:spec_accept_length"], float64(completion)/float64(verify); got != want {
		t.Errorf("spec_accept_length %v, want Σ completion / Σ verify = %v", got, want)
	}
	if got, want := m["sglang:spec_accept_rate"], float64(acc)/float64(prop); got != want {
		t.Errorf("spec_accept_rate %v, want Σ accepted / Σ proposed = %v", got, want)
	}
	if got := m["sglang:gen_throughput"]; got != float64(completion)/loadWindow {
		t.Errorf("gen_throughput %v, want %d tokens over %d s", got, completion, loadWindow)
	}
	if m["sglang:num_used_tokens"] != 0 || m["sglang:token_usage"] != 0 || m["sglang:num_running_reqs"] != 0 {
		t.Errorf("after the answers: used %v, usage %v, running %v", m["sglang:num_used_tokens"], m["sglang:token_usage"], m["sglang:num_running_reqs"])
	}
}
