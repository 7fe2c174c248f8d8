package servermetrics

// Reading a server's /metrics once parsed (parse.go; fetched by fetch.go):
// the server told by its names (SGLang's sglang:*, vLLM's vllm:*,
// llama.cpp's llamacpp:*), and its per-rank samples combined into one
// store.ServerSample whose metrics mean the same for every flavor
// (flavorSources says where each comes from, combine how it is combined).

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"gendex/store"
)

// How each metric is combined over the ranks of one server. A series'
// labels other than tp_rank, pp_rank and moe_ep_rank name one scheduler
// (its dp_rank, when the server runs data-parallel; vLLM's engine) or one
// tokenizer process (or one value of a label such as SGLang's is_streaming
// or vLLM's finished_reason: a part of the whole); the ranks inside it are
// the same scheduler seen from each GPU of its tensor/pipeline/expert
// group, so they repeat one value (by default only tp_rank 0 reports;
// --enable-metrics-for-all-schedulers makes every rank report the same
// numbers). So: within such a group the lowest rank's value is taken, never
// a sum; across groups (dp ranks, engines, label values), per metric:
//   - requests running and queued, decode throughput and the token and
//     request counters are summed: each dp rank serves its own requests,
//     and each is_streaming or finished_reason value counts its own;
//   - token usage, cache hit rate and accept length are averaged: each is
//     a ratio of a dp rank's own pool or requests, and the dp ranks are
//     replicas of one size, so the mean is the server's ratio (for token
//     usage exactly; for the rates, weighted by no count /metrics gives);
//   - the process start time is the latest: any later start is a restart.
type combine uint8

const (
	combineSum combine = iota
	combineMean
	combineMax
)

// What a Reading holds, by key: each a value of one server combined over
// its ranks. The sample's metrics are these, or ratios of two counters'
// increases (see Reading.Fill).
const (
	keyRunning    = "running"
	keyQueued     = "queued"
	keyKV         = "kv"         // KV use, 0-1
	keyHitRate    = "hitrate"    // a hit-rate gauge (SGLang's)
	keyThroughput = "throughput" // decode tokens/s
	keyGen        = "gen"        // generated tokens (counter)
	keyPrompt     = "prompt"     // prompt tokens (counter)
	keyAccept     = "accept"     // an accept-length gauge (SGLang's)
	keyRequests   = "requests"   // requests (counter)
	keyCached     = "cached"     // prompt tokens from the cache (counter)
	keyHits       = "hits"       // prefix-cache hits, in tokens (counter)
	keyQueries    = "queries"    // prefix-cache queries, in tokens (counter)
	keyDrafts     = "drafts"     // speculative drafts (counter)
	keyAccepted   = "accepted"   // accepted draft tokens (counter)
	keyDecodes    = "decodes"    // decode calls (counter; only a restart's sign)
	keyPreempted  = "preempted"  // requests preempted or retracted (counter)
	keyStart      = "start"      // process start time, Unix seconds
)

// source is where a Reading's value comes from on one flavor.
type source struct {
	key     string
	names   []string // its exposition names, the current one first: the first present is read
	how     combine
	counter bool // a counter: lower than before is a restart
	// partTotal names a label whose value "total" is the sum of its other
	// values (SGLang's cache_source): the parts are read, and that series
	// only when there are none.
	partTotal string
}

// processStart is prometheus_client's process collector's start time,
// which any flavor's /metrics may carry (vLLM's has none in multiprocess
// mode).
var processStart = source{key: keyStart, names: []string{"process_start_time_seconds"}, how: combineMax}

// flavorSources: what is read of each flavor's /metrics, checked against
// each project's source (../shared/sglang-api.md sections 7 and 14, and
// vllm-api.md section 6, name the files):
//   - SGLang: python/sglang/srt/observability/metrics_collector.py (the
//     scheduler's gauges; the tokenizer's counters, whose newer copies add
//     an is_streaming label, summed over, and label cached_tokens_total
//     by cache_source: device, host, storage_<backend>, and total = their
//     sum, read only when it stands alone);
//   - vLLM: vllm/v1/metrics/loggers.py and vllm/v1/spec_decode/metrics.py
//     (labels model_name and engine; prometheus_client writes a counter
//     NAME as NAME_total; kv_cache_usage_perc was gpu_cache_usage_perc and
//     prefix_cache_* was gpu_prefix_cache_* in older copies, and the copies
//     of the rename (0.9) write both: the new name is read first);
//   - llama.cpp: tools/server/server-context.cpp (the /metrics handler:
//     501 not_supported_error without --metrics, the start in the
//     Process-Start-Time-Unix header) and server-task.cpp (the names: no
//     labels; kv_cache_usage_ratio is in older builds only,
//     prompt_tokens_cached_total and spec_decode_* in newer ones; its
//     prompt_tokens_total leaves out the cached tokens);
//   - preemptions: vLLM's num_preemptions (a counter, so
//     num_preemptions_total; the bare name in older copies), SGLang's
//     scheduler counter num_retracted_requests_total (a request retracted
//     from a decode batch for want of KV, sglang-api.md §7); llama.cpp
//     has none (each slot has its own context).
var flavorSources = map[store.Flavor][]source{
	store.FlavorSGLang: {
		{key: keyRunning, names: []string{"sglang:num_running_reqs"}, how: combineSum},
		{key: keyQueued, names: []string{"sglang:num_queue_reqs"}, how: combineSum},
		{key: keyKV, names: []string{"sglang:token_usage"}, how: combineMean},
		{key: keyHitRate, names: []string{"sglang:cache_hit_rate"}, how: combineMean},
		{key: keyThroughput, names: []string{"sglang:gen_throughput"}, how: combineSum},
		{key: keyGen, names: []string{"sglang:generation_tokens_total"}, how: combineSum, counter: true},
		{key: keyPrompt, names: []string{"sglang:prompt_tokens_total"}, how: combineSum, counter: true},
		{key: keyAccept, names: []string{"sglang:spec_accept_length"}, how: combineMean},
		{key: keyRequests, names: []string{"sglang:num_requests_total"}, how: combineSum, counter: true},
		{key: keyCached, names: []string{"sglang:cached_tokens_total"}, how: combineSum, counter: true, partTotal: "cache_source"},
		{key: keyPreempted, names: []string{"sglang:num_retracted_requests_total"}, how: combineSum, counter: true},
		processStart,
	},
	store.FlavorVLLM: {
		{key: keyRunning, names: []string{"vllm:num_requests_running"}, how: combineSum},
		{key: keyQueued, names: []string{"vllm:num_requests_waiting"}, how: combineSum},
		{key: keyKV, names: []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"}, how: combineMean},
		{key: keyGen, names: []string{"vllm:generation_tokens_total", "vllm:generation_tokens"}, how: combineSum, counter: true},
		{key: keyPrompt, names: []string{"vllm:prompt_tokens_total", "vllm:prompt_tokens"}, how: combineSum, counter: true},
		{key: keyRequests, names: []string{"vllm:request_success_total", "vllm:request_success"}, how: combineSum, counter: true},
		{key: keyHits, names: []string{"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits"}, how: combineSum, counter: true},
		{key: keyQueries, names: []string{"vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries"}, how: combineSum, counter: true},
		{key: keyDrafts, names: []string{"vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_drafts"}, how: combineSum, counter: true},
		{key: keyAccepted, names: []string{"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens"}, how: combineSum, counter: true},
		{key: keyPreempted, names: []string{"vllm:num_preemptions_total", "vllm:num_preemptions"}, how: combineSum, counter: true},
		processStart,
	},
	store.FlavorLlamaCpp: {
		{key: keyRunning, names: []string{"llamacpp:requests_processing"}, how: combineSum},
		{key: keyQueued, names: []string{"llamacpp:requests_deferred"}, how: combineSum},
		{key: keyKV, names: []string{"llamacpp:kv_cache_usage_ratio"}, how: combineMean},
		{key: keyThroughput, names: []string{"llamacpp:predicted_tokens_seconds"}, how: combineSum},
		{key: keyGen, names: []string{"llamacpp:tokens_predicted_total"}, how: combineSum, counter: true},
		{key: keyPrompt, names: []string{"llamacpp:prompt_tokens_total"}, how: combineSum, counter: true},
		{key: keyCached, names: []string{"llamacpp:prompt_tokens_cached_total"}, how: combineSum, counter: true},
		{key: keyDrafts, names: []string{"llamacpp:spec_decode_num_drafts_total"}, how: combineSum, counter: true},
		{key: keyAccepted, names: []string{"llamacpp:spec_decode_num_accepted_tokens_total"}, how: combineSum, counter: true},
		{key: keyDecodes, names: []string{"llamacpp:n_decode_total"}, how: combineSum, counter: true},
		processStart,
	},
}

// flavorPrefixes tell a flavor by its names, in this order.
var flavorPrefixes = []struct {
	prefix string
	flavor store.Flavor
}{{"sglang:", store.FlavorSGLang}, {"vllm:", store.FlavorVLLM}, {"llamacpp:", store.FlavorLlamaCpp}}

// directMetrics: the Reading's values a sample holds as they are.
var directMetrics = []struct {
	key string
	m   store.Metric
}{
	{keyRunning, store.MetricRunning}, {keyQueued, store.MetricQueued}, {keyKV, store.MetricTokenUsage},
	{keyHitRate, store.MetricCacheHitRate}, {keyThroughput, store.MetricGenThroughput}, {keyGen, store.MetricGenTokens},
	{keyPrompt, store.MetricPromptTokens}, {keyAccept, store.MetricAcceptLength}, {keyRequests, store.MetricRequests},
	{keyStart, store.MetricStartTime}, {keyDrafts, store.MetricSpecDrafts}, {keyAccepted, store.MetricSpecAccepted},
	{keyPreempted, store.MetricPreemptions},
}

// readNames is every name some flavor reads: the others are skipped by
// the parser.
var readNames = func() map[string]bool {
	names := map[string]bool{}
	for _, srcs := range flavorSources {
		for _, src := range srcs {
			for _, n := range src.names {
				names[n] = true
			}
		}
	}
	return names
}()

// rankLabels are the labels of the GPUs that one scheduler spans.
var rankLabels = []string{"tp_rank", "pp_rank", "moe_ep_rank"}

// Reading is one /metrics answer read: its flavor, and each source's value
// combined over the server's ranks, with the name it was read from. It is
// not changed once made.
type Reading struct {
	flavor store.Flavor
	values map[string]float64
	names  map[string]string
	// poolTokens is the KV pool vLLM states in vllm:cache_config_info
	// (0: not stated; see statedPool).
	poolTokens int
	// startHeader is llama.cpp's Process-Start-Time-Unix header: despite
	// its name, the server's start on a monotonic clock in µs (ggml_time_us
	// at its metrics' init), so only compared, never read as a date.
	startHeader string
}

// Flavor is the server's, as its names tell (store.FlavorOther: none of
// the three flavors').
func (r *Reading) Flavor() store.Flavor { return r.flavor }

// PoolTokens is the KV pool in tokens the server states in its /metrics
// (vLLM's vllm:cache_config_info; 0: not stated).
func (r *Reading) PoolTokens() int { return r.poolTokens }

func (r *Reading) get(key string) (float64, bool) {
	v, ok := r.values[key]
	return v, ok
}

// Read reads one /metrics answer's body (the Prometheus text format):
// the samples of the names some flavor reads, combined into a Reading; a
// line that does not parse is skipped.
func Read(body []byte) *Reading {
	samples, _ := parseProm(body, func(name string) bool { return readNames[name] || name == vllmCacheConfig })
	r := readExposition(samples)
	if r.flavor == store.FlavorVLLM {
		r.poolTokens = statedPool(samples)
	}
	return r
}

// vllmCacheConfig is vLLM's info gauge of its CacheConfig: its labels are
// the config's fields as text (vllm/v1/metrics/loggers.py,
// log_metrics_info; CacheConfig.metrics_info), one series per engine.
const vllmCacheConfig = "vllm:cache_config_info"

// statedPool is the KV pool in tokens vLLM states: num_gpu_blocks ×
// block_size of its cache_config_info (0: none, or not numbers). With
// data parallelism the front end sums num_gpu_blocks over its engines
// into the one config every engine's series is labelled from
// (core_client's startup handshake), so the largest series is the whole
// pool, never their sum.
func statedPool(samples []promSample) int {
	pool := 0
	for i := range samples {
		s := &samples[i]
		if s.name != vllmCacheConfig {
			continue
		}
		blocks, ok1 := s.label("num_gpu_blocks")
		size, ok2 := s.label("block_size")
		b, err1 := strconv.Atoi(blocks)
		z, err2 := strconv.Atoi(size)
		if ok1 && ok2 && err1 == nil && err2 == nil && b > 0 && z > 0 && b <= 1<<40/z {
			pool = max(pool, b*z)
		}
	}
	return pool
}

// flavorOf tells the server by the names of its samples (read: only the
// names some flavor reads are there).
func flavorOf(samples []promSample) store.Flavor {
	for _, fp := range flavorPrefixes {
		for i := range samples {
			if strings.HasPrefix(samples[i].name, fp.prefix) {
				return fp.flavor
			}
		}
	}
	return store.FlavorOther
}

// readExposition combines samples over the server's ranks (see combine)
// into a Reading of its flavor's sources. A source the server does not
// report, or reports only as NaN, is absent from it.
func readExposition(samples []promSample) *Reading {
	r := &Reading{flavor: flavorOf(samples), values: map[string]float64{}, names: map[string]string{}}
	srcs := flavorSources[r.flavor]
	if srcs == nil {
		srcs = []source{processStart}
	}
	byName := map[string][]*promSample{}
	for i := range samples {
		byName[samples[i].name] = append(byName[samples[i].name], &samples[i])
	}
	for _, src := range srcs {
		for _, name := range src.names {
			if ps := byName[name]; len(ps) > 0 {
				if v, ok := combineSamples(ps, src); ok {
					r.values[src.key], r.names[src.key] = v, name
				}
				break
			}
		}
	}
	return r
}

// combineSamples is one metric's value for the server: the lowest rank's
// value of each group of series, combined over the groups by src.how.
func combineSamples(ps []*promSample, src source) (float64, bool) {
	type pick struct {
		rank  [3]int64
		value float64
	}
	groups := map[string]pick{} // group -> lowest rank's value
	totals := map[string]pick{} // src.partTotal="total" groups
	for _, p := range ps {
		var key strings.Builder
		var rank [3]int64
		labels := slices.Clone(p.labels)
		slices.SortFunc(labels, func(a, b promLabel) int { return strings.Compare(a.name, b.name) })
		into := groups
		for _, l := range labels {
			if r := slices.Index(rankLabels, l.name); r >= 0 {
				n, err := strconv.ParseInt(l.value, 10, 64)
				if err != nil {
					n = math.MaxInt64
				}
				rank[r] = n
				continue
			}
			if src.partTotal != "" && l.name == src.partTotal && l.value == "total" {
				into = totals
			}
			key.WriteString(l.name)
			key.WriteByte('=')
			key.WriteString(strconv.Quote(l.value))
			key.WriteByte(',')
		}
		k := key.String()
		if old, ok := into[k]; !ok || slices.Compare(rank[:], old.rank[:]) < 0 {
			into[k] = pick{rank, p.value}
		}
	}
	if len(groups) == 0 {
		groups = totals // only the sum: it is the whole
	}
	var v float64
	n := 0
	for _, p := range groups {
		if math.IsNaN(p.value) || math.IsInf(p.value, 0) {
			continue // that scheduler has no value (NaN: nothing to measure yet)
		}
		switch src.how {
		case combineMax:
			v = max(v, p.value)
		default:
			v += p.value
		}
		n++
	}
	if n == 0 {
		return 0, false
	}
	if src.how == combineMean {
		v /= float64(n)
	}
	return v, true
}

// Fill sets s's metrics and flavor from r: its values as they are, and the
// ones a flavor gives as two counters, as the ratio of their increases
// since prev (the Reading before, nil: none) or, when prev has no increase of the
// denominator (no prompt, no draft since), since the server started:
//   - cache hit rate: vLLM's prefix_cache_hits / prefix_cache_queries;
//     llama.cpp's prompt_tokens_cached / (that + prompt_tokens), its
//     prompt tokens leaving the cached out; SGLang's cached_tokens /
//     prompt_tokens when it has no cache_hit_rate gauge;
//   - accept length: 1 + accepted draft tokens / drafts (vLLM, llama.cpp).
//
// A metric whose sources the server does not expose stays unknown. Fill
// sets nothing else of s.
func (r *Reading) Fill(prev *Reading, s *store.ServerSample) {
	s.Flavor = r.flavor
	for _, d := range directMetrics {
		if v, ok := r.get(d.key); ok {
			s.Set(d.m, v)
		}
	}
	if prev != nil && prev.flavor != r.flavor {
		prev = nil
	}
	if _, ok := s.Get(store.MetricCacheHitRate); !ok {
		var num, den func(*Reading) (float64, bool)
		switch r.flavor {
		case store.FlavorVLLM:
			num, den = getter(keyHits), getter(keyQueries)
		case store.FlavorSGLang:
			num, den = getter(keyCached), getter(keyPrompt)
		case store.FlavorLlamaCpp:
			num, den = getter(keyCached), func(x *Reading) (float64, bool) {
				c, ok1 := x.get(keyCached)
				p, ok2 := x.get(keyPrompt)
				return c + p, ok1 && ok2
			}
		}
		if num != nil {
			if v, ok := counterRatio(r, prev, num, den); ok {
				s.Set(store.MetricCacheHitRate, min(max(v, 0), 1))
			}
		}
	}
	if _, ok := s.Get(store.MetricAcceptLength); !ok {
		if v, ok := counterRatio(r, prev, getter(keyAccepted), getter(keyDrafts)); ok {
			s.Set(store.MetricAcceptLength, 1+v)
		}
	}
}

func getter(key string) func(*Reading) (float64, bool) {
	return func(r *Reading) (float64, bool) { return r.get(key) }
}

// counterRatio is num's increase over den's from prev to cur, or, when
// there is no prev, den did not grow, or a counter went back (a restart),
// num/den since the server started; not ok when den is 0 or absent.
func counterRatio(cur, prev *Reading, num, den func(*Reading) (float64, bool)) (float64, bool) {
	n, ok1 := num(cur)
	d, ok2 := den(cur)
	if !ok1 || !ok2 {
		return 0, false
	}
	if prev != nil {
		pn, ok1 := num(prev)
		pd, ok2 := den(prev)
		if ok1 && ok2 && n >= pn && d > pd {
			return (n - pn) / (d - pd), true
		}
	}
	if d > 0 {
		return n / d, true
	}
	return 0, false
}
