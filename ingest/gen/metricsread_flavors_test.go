package gen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gendex/ingest/gen/sim"
	"gendex/query"
	"gendex/store"
)

// vllmExposition is /metrics as vLLM's v1 engine writes it (Python
// prometheus_client: a counter NAME is written NAME_total, with a
// NAME_created beside it) for a server run with --data-parallel-size 2
// (label engine) and a speculative config. It is a copy from the time both
// names of the renamed metrics were written (kv_cache_usage_perc and the
// deprecated gpu_cache_usage_perc, prefix_cache_* and gpu_prefix_cache_*),
// the old ones with other values here, so that reading them instead shows.
// No process_start_time_seconds (multiprocess mode has none).
const vllmExposition = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 40.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 38.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 5.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-8B"} 2.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.11
vllm:gpu_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-8B"} 0.11
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-8B"} 0.7
# HELP vllm:gpu_prefix_cache_queries GPU prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:gpu_prefix_cache_queries counter
vllm:gpu_prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 1.0
vllm:gpu_prefix_cache_queries_total{engine="1",model_name="Qwen/Qwen3-8B"} 1.0
# HELP vllm:gpu_prefix_cache_hits GPU prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:gpu_prefix_cache_hits counter
vllm:gpu_prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 1.0
vllm:gpu_prefix_cache_hits_total{engine="1",model_name="Qwen/Qwen3-8B"} 0.0
# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 6000.0
vllm:prefix_cache_queries_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7845920001234e+09
vllm:prefix_cache_queries_total{engine="1",model_name="Qwen/Qwen3-8B"} 4000.0
vllm:prefix_cache_queries_created{engine="1",model_name="Qwen/Qwen3-8B"} 1.7845920001234e+09
# HELP vllm:prefix_cache_hits Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 3000.0
vllm:prefix_cache_hits_total{engine="1",model_name="Qwen/Qwen3-8B"} 1000.0
# HELP vllm:prompt_tokens Number of prefill tokens processed.
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 6000.0
vllm:prompt_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 4000.0
# HELP vllm:generation_tokens Number of generation tokens processed.
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 70000.0
vllm:generation_tokens_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7845920001234e+09
vllm:generation_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 50000.0
# HELP vllm:request_success Count of successfully processed requests.
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="Qwen/Qwen3-8B"} 90.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="Qwen/Qwen3-8B"} 10.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="Qwen/Qwen3-8B"} 0.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="Qwen/Qwen3-8B"} 50.0
# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen3-8B"} 1000.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="Qwen/Qwen3-8B"} 1000.0
# HELP vllm:spec_decode_num_draft_tokens Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 4000.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 4000.0
# HELP vllm:spec_decode_num_accepted_tokens Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 2500.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 1500.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-8B",position="0"} 900.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="Qwen/Qwen3-8B"} 0.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="Qwen/Qwen3-8B"} 100.0
`

// llamacppExposition is /metrics as llama-server (ggml-org/llama.cpp,
// tools/server: server-context.cpp's handler, the names of
// server-task.cpp) writes it with --metrics: no labels, values through
// C++'s ostream (6 significant digits, so big counters in exponent form),
// n_busy_slots_per_decode typed a counter though it is a mean. No KV use,
// no cached prompt tokens, no speculative counters: current builds have
// none of them.
const llamacppExposition = `# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 3.21457e+06
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 235.743
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 96000
# HELP llamacpp:tokens_predicted_seconds_total Predict process time
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 812.5
# HELP llamacpp:n_decode_total Total number of llama_decode() calls
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 23381
# HELP llamacpp:n_tokens_max Largest observed n_tokens.
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 511
# HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call
# TYPE llamacpp:n_busy_slots_per_decode counter
llamacpp:n_busy_slots_per_decode 7.25
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s.
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 424.925
# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s.
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 118.154
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 8
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 24
`

// llamacppNewer is what builds with a prompt cache count and speculative
// counters add; llamacppOlder the KV gauge of older builds.
const llamacppNewer = `llamacpp:prompt_tokens_cached_total 1000
llamacpp:spec_decode_num_draft_tokens_total 4000
llamacpp:spec_decode_num_accepted_tokens_total 3000
llamacpp:spec_decode_num_drafts_total 1000
llamacpp:spec_decode_num_accepted_tokens_per_pos_total{position="0"} 900
`

const llamacppOlder = `# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.25
# HELP llamacpp:kv_cache_tokens KV-cache tokens.
# TYPE llamacpp:kv_cache_tokens gauge
llamacpp:kv_cache_tokens 1024
`

// sglangNewCounters are the tokenizer's counters as newer SGLang writes
// them (../shared/sglang-api.md §14): prompt, generation and request
// counts split by is_streaming (their sum is the whole), cached tokens by
// cache_source, where "total" is the sum of the others (device 300 + host
// 100 + storage 100 = 500) and must not be added to them.
const sglangNewCounters = `# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{engine_type="unified",is_streaming="false",model_name="m"} 800.0
sglang:prompt_tokens_total{engine_type="unified",is_streaming="true",model_name="m"} 200.0
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{engine_type="unified",is_streaming="false",model_name="m"} 3000.0
sglang:generation_tokens_total{engine_type="unified",is_streaming="true",model_name="m"} 1000.0
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{engine_type="unified",is_streaming="false",model_name="m"} 30.0
sglang:num_requests_total{engine_type="unified",is_streaming="true",model_name="m"} 10.0
# TYPE sglang:cached_tokens_total counter
sglang:cached_tokens_total{cache_source="device",engine_type="unified",model_name="m"} 300.0
sglang:cached_tokens_total{cache_source="host",engine_type="unified",model_name="m"} 100.0
sglang:cached_tokens_total{cache_source="storage_mooncake",engine_type="unified",model_name="m"} 100.0
sglang:cached_tokens_total{cache_source="total",engine_type="unified",model_name="m"} 500.0
`

// sglangNewGauges: the scheduler's gauges, one dp rank, without a
// cache_hit_rate gauge (so the hit rate comes from the counters).
const sglangNewGauges = `sglang:num_running_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 12.0
sglang:num_queue_reqs{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 4.0
sglang:token_usage{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.4
sglang:gen_throughput{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 900.0
`

// readFixture reads an exposition as fetchMetrics does (only the names
// some flavor reads), then fills a sample (prev: the reading before).
func readFixture(t *testing.T, text string, prev *reading) (*reading, store.ServerSample) {
	t.Helper()
	samples, bad := parseProm([]byte(text), func(name string) bool { return readNames[name] })
	if bad != 0 {
		t.Fatalf("%d lines did not parse", bad)
	}
	r := readExposition(samples)
	var s store.ServerSample
	r.fill(prev, &s)
	return r, s
}

type want struct {
	m store.Metric
	v float64
}

// checkSample: the metrics of wants are known with those values, every
// other metric is unknown (never 0).
func checkSample(t *testing.T, what string, s store.ServerSample, wants ...want) {
	t.Helper()
	known := map[store.Metric]float64{}
	for _, w := range wants {
		known[w.m] = w.v
	}
	for m := range store.NumMetrics {
		got, ok := s.Get(m)
		w, wantOK := known[m]
		switch {
		case ok != wantOK:
			t.Errorf("%s: metric %d known %v (%v), want known %v", what, m, ok, got, wantOK)
		case ok && math.Abs(got-w) > 1e-9*max(1, math.Abs(w)):
			t.Errorf("%s: metric %d = %v, want %v", what, m, got, w)
		}
	}
}

// TestReadVLLMMetrics: every column from vLLM's own names, combined over
// its engines (dp ranks) as SGLang's ranks are; the current name read
// where a copy writes the deprecated one too; the hit rate and accept
// length from counters: since the server started on a first reading, over
// the interval since the reading before afterwards, and again since the
// start when the interval saw no prompt or draft. What vLLM does not
// expose (a decode-throughput gauge, a start time) stays unknown.
func TestReadVLLMMetrics(t *testing.T) {
	r, s := readFixture(t, vllmExposition, nil)
	if r.flavor != store.FlavorVLLM || s.Flavor != store.FlavorVLLM {
		t.Fatalf("flavor %v %v", r.flavor, s.Flavor)
	}
	checkSample(t, "first reading", s,
		want{store.MetricRunning, 78}, want{store.MetricQueued, 7},
		want{store.MetricTokenUsage, 0.6},   // the mean of the engines' kv_cache_usage_perc, not gpu_cache_usage_perc
		want{store.MetricCacheHitRate, 0.4}, // 4000 hit of 10000 queried tokens
		want{store.MetricAcceptLength, 3},   // 1 + 4000 accepted / 2000 drafts
		want{store.MetricGenTokens, 120000}, // _created left out
		want{store.MetricPromptTokens, 10000},
		want{store.MetricRequests, 150},                                          // summed over finished_reason and engines
		want{store.MetricSpecDrafts, 2000}, want{store.MetricSpecAccepted, 4000}) // kept for a window's accept length
	if r.names[keyQueries] != "vllm:prefix_cache_queries_total" || r.names[keyKV] != "vllm:kv_cache_usage_perc" {
		t.Errorf("read from %v", r.names)
	}

	// 5 s later: 2000 more queried tokens, 1800 of them hit; 500 drafts,
	// 500 accepted tokens.
	later := strings.NewReplacer(
		`prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 6000.0`, `prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 8000.0`,
		`prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 3000.0`, `prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 4800.0`,
		`spec_decode_num_drafts_total{engine="1",model_name="Qwen/Qwen3-8B"} 1000.0`, `spec_decode_num_drafts_total{engine="1",model_name="Qwen/Qwen3-8B"} 1500.0`,
		`spec_decode_num_accepted_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 1500.0`, `spec_decode_num_accepted_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 2000.0`,
	).Replace(vllmExposition)
	r2, s2 := readFixture(t, later, r)
	if v, _ := s2.Get(store.MetricCacheHitRate); math.Abs(v-0.9) > 1e-9 {
		t.Errorf("hit rate over the interval %v, want 0.9 (1800 of 2000)", v)
	}
	if v, _ := s2.Get(store.MetricAcceptLength); math.Abs(v-2) > 1e-9 {
		t.Errorf("accept length over the interval %v, want 2 (1 + 500/500)", v)
	}
	// Nothing new since: the ratios since the server started.
	_, s3 := readFixture(t, later, r2)
	if v, _ := s3.Get(store.MetricCacheHitRate); math.Abs(v-5800.0/12000) > 1e-9 {
		t.Errorf("idle hit rate %v, want 5800/12000", v)
	}
	if v, _ := s3.Get(store.MetricAcceptLength); math.Abs(v-(1+4500.0/2500)) > 1e-9 {
		t.Errorf("idle accept length %v", v)
	}

	// Without speculative decoding vLLM writes no spec_decode_* at all, and
	// before its first prompt its prefix-cache queries are 0: both unknown.
	var plain []string
	for _, line := range strings.Split(vllmExposition, "\n") {
		if !strings.Contains(line, "spec_decode") && !strings.Contains(line, "prefix_cache") {
			plain = append(plain, line)
		}
	}
	plain = append(plain, `vllm:prefix_cache_queries_total{engine="0",model_name="m"} 0.0`, `vllm:prefix_cache_hits_total{engine="0",model_name="m"} 0.0`)
	_, s4 := readFixture(t, strings.Join(plain, "\n"), nil)
	if _, ok := s4.Get(store.MetricAcceptLength); ok {
		t.Error("accept length known without speculative decoding")
	}
	if _, ok := s4.Get(store.MetricCacheHitRate); ok {
		t.Error("hit rate known with no query")
	}
	// An older copy that writes only the deprecated names is read through them.
	old := strings.NewReplacer("vllm:kv_cache_usage_perc", "vllm:other_gauge", "vllm:prefix_cache_", "vllm:other_").Replace(vllmExposition)
	r5, s5 := readFixture(t, old, nil)
	if v, _ := s5.Get(store.MetricTokenUsage); v != 0.11 || r5.names[keyKV] != "vllm:gpu_cache_usage_perc" {
		t.Errorf("deprecated KV gauge: %v from %q", v, r5.names[keyKV])
	}
	if v, ok := s5.Get(store.MetricCacheHitRate); !ok || v != 0.5 || r5.names[keyQueries] != "vllm:gpu_prefix_cache_queries_total" {
		t.Errorf("deprecated prefix cache counters: %v from %q", v, r5.names[keyQueries])
	}
}

// TestReadLlamaCppMetrics: llama-server's names onto the same columns;
// what current builds do not expose (KV use, cache hit rate, accept length,
// a request counter) stays unknown; the gauges and counters of newer and
// older builds are read when there. Its prompt_tokens_total leaves out the
// cached tokens, so its hit rate is cached / (cached + prompt).
func TestReadLlamaCppMetrics(t *testing.T) {
	r, s := readFixture(t, llamacppExposition, nil)
	if r.flavor != store.FlavorLlamaCpp || s.Flavor != store.FlavorLlamaCpp {
		t.Fatalf("flavor %v", r.flavor)
	}
	checkSample(t, "current build", s,
		want{store.MetricRunning, 8}, want{store.MetricQueued, 24},
		want{store.MetricGenThroughput, 118.154}, want{store.MetricGenTokens, 96000},
		want{store.MetricPromptTokens, 3.21457e6})
	if v, ok := r.get(keyDecodes); !ok || v != 23381 {
		t.Errorf("n_decode_total %v %v (a restart's sign)", v, ok)
	}

	_, s = readFixture(t, llamacppExposition+llamacppNewer, nil)
	checkSample(t, "newer build", s,
		want{store.MetricRunning, 8}, want{store.MetricQueued, 24},
		want{store.MetricGenThroughput, 118.154}, want{store.MetricGenTokens, 96000},
		want{store.MetricPromptTokens, 3.21457e6},
		want{store.MetricCacheHitRate, 1000 / (1000 + 3.21457e6)},
		want{store.MetricAcceptLength, 4}, // 1 + 3000 accepted / 1000 drafts
		want{store.MetricSpecDrafts, 1000}, want{store.MetricSpecAccepted, 3000})

	_, s = readFixture(t, llamacppExposition+llamacppOlder, nil)
	checkSample(t, "older build", s,
		want{store.MetricRunning, 8}, want{store.MetricQueued, 24}, want{store.MetricTokenUsage, 0.25},
		want{store.MetricGenThroughput, 118.154}, want{store.MetricGenTokens, 96000},
		want{store.MetricPromptTokens, 3.21457e6})
}

// TestReadSGLangNewLabels: newer SGLang's is_streaming label is summed
// over (each value counts its own requests), cached_tokens_total's
// cache_source parts are summed without their "total" (which is read only
// when it stands alone, as is an unlabelled one), and without a
// cache_hit_rate gauge the hit rate is cached / prompt tokens; with the
// gauge, the gauge.
func TestReadSGLangNewLabels(t *testing.T) {
	r, s := readFixture(t, sglangNewGauges+sglangNewCounters, nil)
	checkSample(t, "newer SGLang", s,
		want{store.MetricRunning, 12}, want{store.MetricQueued, 4}, want{store.MetricTokenUsage, 0.4},
		want{store.MetricGenThroughput, 900},
		want{store.MetricGenTokens, 4000}, want{store.MetricPromptTokens, 1000}, want{store.MetricRequests, 40},
		want{store.MetricCacheHitRate, 0.5}) // 500 cached (300+100+100, not +500) of 1000
	if v, _ := r.get(keyCached); v != 500 {
		t.Errorf("cached tokens %v, want 500", v)
	}
	// Over an interval: 1000 more prompt tokens, 900 from the cache.
	later := strings.NewReplacer(
		`is_streaming="true",model_name="m"} 200.0`, `is_streaming="true",model_name="m"} 1200.0`,
		`cache_source="device",engine_type="unified",model_name="m"} 300.0`, `cache_source="device",engine_type="unified",model_name="m"} 1200.0`,
		`cache_source="total",engine_type="unified",model_name="m"} 500.0`, `cache_source="total",engine_type="unified",model_name="m"} 1400.0`,
	).Replace(sglangNewCounters)
	_, s2 := readFixture(t, sglangNewGauges+later, r)
	if v, _ := s2.Get(store.MetricCacheHitRate); math.Abs(v-0.9) > 1e-9 {
		t.Errorf("hit rate over the interval %v, want 0.9", v)
	}
	// Only the total (or an older SGLang's unlabelled counter): that one.
	for _, c := range []string{
		`sglang:cached_tokens_total{cache_source="total",model_name="m"} 250.0`,
		`sglang:cached_tokens_total{model_name="m"} 250.0`,
	} {
		_, s := readFixture(t, sglangNewGauges+`sglang:prompt_tokens_total{model_name="m"} 1000.0`+"\n"+c+"\n", nil)
		if v, _ := s.Get(store.MetricCacheHitRate); v != 0.25 {
			t.Errorf("%s: hit rate %v, want 0.25", c, v)
		}
	}
	// The scheduler's gauge, when there, is the hit rate.
	_, s3 := readFixture(t, sglangNewGauges+sglangNewCounters+`sglang:cache_hit_rate{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.8`+"\n", nil)
	if v, _ := s3.Get(store.MetricCacheHitRate); v != 0.8 {
		t.Errorf("hit rate %v, want the gauge's 0.8", v)
	}
}

// TestReadOtherMetrics: a /metrics with none of the three flavors' names
// (another server) is recognised as such, and every column stays unknown.
func TestReadOtherMetrics(t *testing.T) {
	r, s := readFixture(t, "# TYPE tgi_queue_size gauge\ntgi_queue_size 3\ntgi_request_count 12\nollama_running 1\n", nil)
	if r.flavor != store.FlavorOther || s.Flavor != store.FlavorOther {
		t.Errorf("flavor %v", r.flavor)
	}
	checkSample(t, "another server", s)
}

// TestFetchMetrics501: llama-server without --metrics answers 501
// not_supported_error: no /metrics, as SGLang's 404, told as llama.cpp with
// its own hint; another server's 501 is no /metrics without that hint. The
// Process-Start-Time-Unix header of an answer is kept for telling restarts.
func TestFetchMetrics501(t *testing.T) {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/llama/metrics":
			w.Header().Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusNotImplemented)
			fmt.Fprint(w, "{\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. Start it with `--metrics`\",\"type\":\"not_supported_error\"}}")
		case "/other/metrics":
			http.Error(w, "not implemented", http.StatusNotImplemented)
		case "/on/metrics":
			w.Header().Set(startTimeHeader, "5021733148")
			fmt.Fprint(w, llamacppExposition)
		}
	}))
	defer hs.Close()
	_, err := fetchMetrics(context.Background(), hs.Client(), hs.URL+"/llama/metrics", "")
	var nm *noMetricsError
	if !errors.Is(err, errNoMetrics) || !errors.As(err, &nm) || nm.flavor != store.FlavorLlamaCpp || nm.hint() != "start llama-server with --metrics" {
		t.Errorf("llama.cpp's 501: %v %+v", err, nm)
	}
	_, err = fetchMetrics(context.Background(), hs.Client(), hs.URL+"/other/metrics", "")
	if !errors.Is(err, errNoMetrics) || !errors.As(err, &nm) || nm.flavor != store.FlavorUnknown || strings.Contains(nm.hint(), "--metrics") {
		t.Errorf("another 501: %v %+v", err, nm)
	}
	r, err := fetchMetrics(context.Background(), hs.Client(), hs.URL+"/on/metrics", "")
	if err != nil || r.flavor != store.FlavorLlamaCpp || r.startHeader != "5021733148" {
		t.Errorf("%+v %v", r, err)
	}
}

// TestStartHeaderRestart: llama-server's Process-Start-Time-Unix header
// (its start on a monotonic clock, not a Unix time: compared, never shown
// as a date) changing between two readings while it is up is a restart,
// even when its counters grew past their old values in between; the same
// header is none. Other names behind the URL are a restart too.
func TestStartHeaderRestart(t *testing.T) {
	var start atomic.Value
	start.Store("5021733148")
	tokens := atomic.Int64{}
	tokens.Store(96000)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(startTimeHeader, start.Load().(string))
		fmt.Fprint(w, strings.Replace(llamacppExposition, "tokens_predicted_total 96000", fmt.Sprint("tokens_predicted_total ", tokens.Load()), 1))
	}))
	defer hs.Close()
	m := &monitor{wake: make(chan struct{}, 1)} // no recorder: the events stay queued
	sc := &scraper{m: m, s: &server{name: "http://llama"}}
	read := func() {
		r, err := fetchMetrics(context.Background(), hs.Client(), hs.URL+"/metrics", "")
		if err != nil {
			t.Fatal(err)
		}
		sc.checkRestart(time.Now().UnixMilli(), r)
	}
	read()
	tokens.Store(97000)
	read() // same start: none
	start.Store("5029911410")
	tokens.Store(98000) // restarted, and already past the old count
	read()
	read()
	sc.checkRestart(time.Now().UnixMilli(), &reading{flavor: store.FlavorVLLM, values: map[string]float64{}, names: map[string]string{}})
	m.mu.Lock()
	var got []string
	for _, p := range m.queue {
		got = append(got, p.event.Name+": "+p.event.Detail)
	}
	m.mu.Unlock()
	want := []string{
		"restarted: its Process-Start-Time-Unix header changed from 5021733148 to 5029911410 (llama-server gives its start there)",
		"restarted: its /metrics now has vLLM's names (it had llama.cpp's)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("events %q\nwant %q", got, want)
	}
}

// TestCounterWentBackNamesItsFlavor: a restart by a counter going back
// names the counter as that server calls it.
func TestCounterWentBackNamesItsFlavor(t *testing.T) {
	m := &monitor{wake: make(chan struct{}, 1)}
	sc := &scraper{m: m, s: &server{name: "http://v"}}
	r1, _ := readFixture(t, vllmExposition, nil)
	r2, _ := readFixture(t, strings.ReplaceAll(vllmExposition, "generation_tokens_total{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 50000.0", "generation_tokens_total{engine=\"1\",model_name=\"Qwen/Qwen3-8B\"} 0.0"), r1)
	sc.checkRestart(1, r1)
	sc.checkRestart(2, r2)
	if len(m.queue) != 1 || m.queue[0].event.Detail != "vllm:generation_tokens_total went back from 120000 to 70000" {
		t.Errorf("events %+v", m.queue)
	}
}

// TestServerLineLlamaCpp: gen's live line of a llama-server without
// --metrics gives its own hint; of another server's /metrics, says so.
func TestServerLineLlamaCpp(t *testing.T) {
	up := &server{name: "http://a"}
	up.up.Store(true)
	now := time.Now()
	if got, want := serverState(up, liveView{sample: store.ServerSample{NoMetrics: true, Flavor: store.FlavorLlamaCpp}, taken: true}, now),
		"up, its metrics unknown (no /metrics: start llama-server with --metrics)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got, want := serverState(up, liveView{sample: store.ServerSample{Scraped: true, Flavor: store.FlavorOther}, taken: true, metrics: true}, now),
		"up, its metrics unknown (its /metrics has no sglang:, vllm: or llamacpp: names)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// flavorServer is the simulator (SGLang's API) with its /metrics replaced:
// metrics answers it (status, headers, body), and hits counts its reads.
func flavorServer(t *testing.T, metrics http.HandlerFunc) (url string, hits *atomic.Int64) {
	t.Helper()
	h := sim.New(sim.Config{Seed: 11}).Handler()
	hits = new(atomic.Int64)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			hits.Add(1)
			metrics(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, hits
}

// serverRowOf runs gen on 30 prompts against url and answers `query
// server` for it: the row by column, and gen's log.
func serverRowOf(t *testing.T, url string) (map[string]any, string) {
	t.Helper()
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "F", "ids", 30)
	dbPath := filepath.Join(out, "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, ScrapeEvery: 20 * time.Millisecond}, root)
	if err != nil || sum.Responses != 30 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, row := oneServerRow(t, db)
	// A run this short keeps one sample (one a second): its accept length
	// over a window is unknown (no pair of samples), so the reading's own
	// figure is checked, under a name of its own.
	row["sample_accept_length"] = sampleAccept(t, db)
	return row, log
}

// sampleAccept is the accept length of db's one server's last sample, as
// query shows one (nil: unknown).
func sampleAccept(t *testing.T, db *store.DB) any {
	t.Helper()
	var v any
	db.View(func(view *store.View) error {
		if s, ok, _ := view.LastServerSample(view.Servers()[0]); ok {
			if x, ok := s.Get(store.MetricAcceptLength); ok {
				v = query.Fixed{V: x, Prec: 2}
			}
		}
		return nil
	})
	return v
}

// oneServerRow answers `query server --window 1m` from db, which must
// hold one server: the answer, and its row by column.
func oneServerRow(t *testing.T, db *store.DB) (*query.Result, map[string]any) {
	t.Helper()
	q, _ := query.Parse([]string{"server", "--window", "1m"})
	res, err := query.Answer(db, q, time.Now())
	if err != nil || len(res.Rows) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	row := map[string]any{}
	for i, c := range res.Columns {
		row[c] = res.Rows[0][i]
	}
	return res, row
}

// TestQueryServerFlavors: gen against servers whose /metrics is vLLM's or
// llama.cpp's: `query server` has the same columns filled from each one's
// own names; what llama.cpp does not expose is unknown (never 0) and the
// note says why.
func TestQueryServerFlavors(t *testing.T) {
	url, _ := flavorServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, vllmExposition) })
	row, _ := serverRowOf(t, url)
	got := fmt.Sprint(row["running"], row["queued"], row["token_usage"], row["cache_hit_rate"], row["sample_accept_length"], " [", row["note"], "]")
	if want := "78 7 0.600 0.400 3.00 []"; got != want {
		t.Errorf("vLLM: %s, want %s", got, want)
	}

	url, _ = flavorServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(startTimeHeader, "5021733148")
		fmt.Fprint(w, llamacppExposition)
	})
	row, _ = serverRowOf(t, url)
	got = fmt.Sprint(row["running"], " ", row["queued"], " ", row["token_usage"], " ", row["cache_hit_rate"], " ", row["sample_accept_length"])
	if want := "8 24 <nil> <nil> <nil>"; got != want {
		t.Errorf("llama.cpp: %s, want %s", got, want)
	}
	note, _ := row["note"].(string)
	if !strings.HasPrefix(note, "llama.cpp: token_usage unknown: llama-server exposes no KV use") || !strings.Contains(note, "cache_hit_rate unknown") || strings.Contains(note, "accept_length") {
		t.Errorf("llama.cpp note %q", note)
	}
}

// TestScrapeLlamaCpp501: gen against a llama-server without --metrics: the
// 501 is said once, with llama-server's hint; /metrics is asked once in
// the run (not every few milliseconds), the live state and `query server`'s
// note give the hint, every column is unknown.
func TestScrapeLlamaCpp501(t *testing.T) {
	url, hits := flavorServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotImplemented)
		fmt.Fprint(w, "{\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. Start it with `--metrics`\",\"type\":\"not_supported_error\"}}")
	})
	row, log := serverRowOf(t, url)
	if n := strings.Count(log, "start llama-server with --metrics"); n != 1 || !strings.Contains(log, "no /metrics (501 not_supported_error: llama-server)") {
		t.Errorf("said %d times:\n%s", n, log)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("/metrics asked %d times, want once", n)
	}
	if row["note"] != "no /metrics (HTTP 501 not_supported_error): start llama-server with --metrics" {
		t.Errorf("note %q", row["note"])
	}
	for _, c := range []string{"running", "queued", "token_usage", "cache_hit_rate", "accept_length", "server_tokens_per_s"} {
		if row[c] != nil {
			t.Errorf("%s = %v, want unknown", c, row[c])
		}
	}
}
