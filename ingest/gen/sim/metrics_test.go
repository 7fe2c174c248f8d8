package sim

import (
	"net/http"
	"strings"
	"testing"

	"gendex/store/prom/promtest"
)

// TestMetricsFormat: the model name is a label value escaped as the
// exposition format asks (a quote, a backslash; a zero-width joiner as it
// is), each counter's family is named with its _total
// (as SGLang's Python client writes it), and promtool reads the whole.
func TestMetricsFormat(t *testing.T) {
	_, url := testServer(t, Config{EnableMetrics: true, Model: "org/数据\"集\\👩\u200d💻"})
	postOK(t, url+"/generate", `{"text":"x","sampling_params":{"max_new_tokens":5,"ignore_eos":true}}`)
	resp, b := do(t, http.MethodGet, url+"/metrics", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	for _, want := range []string{
		"# TYPE sglang:num_running_reqs gauge\n",
		"# TYPE sglang:generation_tokens_total counter\n",
		"sglang:generation_tokens_total{engine_type=\"unified\",is_streaming=\"false\",model_name=\"org/数据\\\"集\\\\👩\u200d💻\"} 5.0\n",
		"sglang:num_running_reqs{engine_type=\"unified\",model_name=\"org/数据\\\"集\\\\👩\u200d💻\",moe_ep_rank=\"0\",pp_rank=\"0\",tp_rank=\"0\"} 0.0\n",
	} {
		if !strings.Contains(string(b), want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
	// SGLang's names have colons, which promtool's lint frowns on.
	var allowed []string
	for _, name := range []string{"num_running_reqs", "num_queue_reqs", "context_len", "prompt_tokens_total",
		"generation_tokens_total", "num_requests_total", "num_aborted_requests_total", "num_retracted_requests_total", "num_used_tokens",
		"token_usage", "gen_throughput", "cache_hit_rate", "max_total_num_tokens", "cached_tokens_total",
		"time_to_first_token_seconds", "e2e_request_latency_seconds"} {
		allowed = append(allowed, "sglang:"+name+" metric names should not contain ':'")
	}
	promtest.Check(t, b, allowed...)
}
