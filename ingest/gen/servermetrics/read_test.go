package servermetrics

import (
	"math"
	"strings"
	"testing"

	"gendex/ingest/gen/servermetrics/metricstest"
	"gendex/store"
)

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

// readFixture reads an exposition as Read does (only the names some
// flavor reads), then fills a sample (prev: the reading before).
func readFixture(t *testing.T, text string, prev *Reading) (*Reading, store.ServerSample) {
	t.Helper()
	samples, bad := parseProm([]byte(text), func(name string) bool { return readNames[name] })
	if bad != 0 {
		t.Fatalf("%d lines did not parse", bad)
	}
	r := readExposition(samples)
	var s store.ServerSample
	r.Fill(prev, &s)
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
	r, s := readFixture(t, metricstest.VLLM, nil)
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
	).Replace(metricstest.VLLM)
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
	for _, line := range strings.Split(metricstest.VLLM, "\n") {
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
	old := strings.NewReplacer("vllm:kv_cache_usage_perc", "vllm:other_gauge", "vllm:prefix_cache_", "vllm:other_").Replace(metricstest.VLLM)
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
	r, s := readFixture(t, metricstest.LlamaCpp, nil)
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

	_, s = readFixture(t, metricstest.LlamaCpp+llamacppNewer, nil)
	checkSample(t, "newer build", s,
		want{store.MetricRunning, 8}, want{store.MetricQueued, 24},
		want{store.MetricGenThroughput, 118.154}, want{store.MetricGenTokens, 96000},
		want{store.MetricPromptTokens, 3.21457e6},
		want{store.MetricCacheHitRate, 1000 / (1000 + 3.21457e6)},
		want{store.MetricAcceptLength, 4}, // 1 + 3000 accepted / 1000 drafts
		want{store.MetricSpecDrafts, 1000}, want{store.MetricSpecAccepted, 3000})

	_, s = readFixture(t, metricstest.LlamaCpp+llamacppOlder, nil)
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

// TestReadMetrics: per-server values from several ranks. tp ranks repeat
// one scheduler's values (never summed); dp ranks are summed for counts
// and throughput, averaged for ratios; NaN is no value; a metric the
// server lacks stays unknown.
func TestReadMetrics(t *testing.T) {
	samples, _ := parseProm([]byte(metricstest.SGLang), nil)
	var s store.ServerSample
	readMetrics(samples, &s)
	for _, tc := range []struct {
		m    store.Metric
		want float64
	}{
		{store.MetricRunning, 121}, {store.MetricQueued, 3}, {store.MetricTokenUsage, 0.7},
		{store.MetricCacheHitRate, 0.5}, // dp 1's tp 0 is NaN, and its tp 1 is not taken in its place
		{store.MetricGenThroughput, 1317}, {store.MetricAcceptLength, 3.3},
		{store.MetricGenTokens, 1234567}, {store.MetricPromptTokens, 2.5e6}, {store.MetricRequests, 9500},
	} {
		got, ok := s.Get(tc.m)
		if !ok || math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("metric %d = %v %v, want %v", tc.m, got, ok, tc.want)
		}
	}
	if _, ok := s.Get(store.MetricStartTime); ok {
		t.Error("a start time from nowhere")
	}
	// Without ranks at all (the simulator's labels minus dp_rank): taken as is.
	samples, _ = parseProm([]byte(`sglang:num_running_reqs{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"} 7`+"\n"+
		`process_start_time_seconds 1.7e9`+"\n"), nil)
	s = store.ServerSample{}
	readMetrics(samples, &s)
	if v, _ := s.Get(store.MetricRunning); v != 7 {
		t.Errorf("running %v", v)
	}
	if v, _ := s.Get(store.MetricStartTime); v != 1.7e9 {
		t.Errorf("start time %v", v)
	}
	if _, ok := s.Get(store.MetricTokenUsage); ok {
		t.Error("token usage known though not reported")
	}
}

// readMetrics fills s from one /metrics answer's samples alone (no reading
// before it: ratios of counters are since the server started).
func readMetrics(samples []promSample, s *store.ServerSample) {
	readExposition(samples).Fill(nil, s)
}
