package sim

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"

	"gendex/store/prom"
)

// The metrics part's pages (meters, metrics.go): each flavor's /metrics
// with its own names and labels, and SGLang's /server_info.

// sglangPage serves /metrics in the Prometheus text format with SGLang's
// metric names and labels (../shared/sglang-api.md §7); as SGLang's Python
// client does, a counter's family is named with its _total and labels are
// sorted by name. The scheduler's gauges carry model_name, engine_type,
// tp_rank, pp_rank and moe_ep_rank (one scheduler: every rank 0, no
// dp_rank); the tokenizer's counters carry model_name and engine_type.
//
// What the gauges report: num_running_reqs and num_queue_reqs the items
// holding and waiting for a slot; num_used_tokens the KV tokens the
// running items hold (prompt plus the tokens decoded so far), token_usage
// that over max_total_num_tokens (Config.MaxTotalTokens); gen_throughput
// the completion tokens of the items that finished in the last
// loadWindow completed seconds, per second; cache_hit_rate the share of
// their prompt tokens served from the prefix cache (the simulator has none,
// so 0, as its answers' cached_tokens); with Config.SpecDraftTokens,
// spec_accept_length (Σ completion / Σ verify steps) and spec_accept_rate
// (Σ accepted / Σ proposed drafts) of the spec answers that finished in
// those seconds, the last value kept while none finishes (0 before the
// first), as SGLang's gauges keep theirs between log intervals.
func (m *meters) sglangPage(w http.ResponseWriter, r *http.Request) {
	st := m.stats()
	ld := m.loadNow()
	var b bytes.Buffer
	p := prom.NewWriter(&b)
	scheduler := func(name string, help string, v float64) {
		p.Family(name, help, prom.Gauge)
		p.Float(v, "engine_type", "unified", "model_name", m.cfg.Model, "moe_ep_rank", "0", "pp_rank", "0", "tp_rank", "0")
	}
	tokenizer := func(name string, help string, v float64) {
		p.Family(name, help, prom.Counter)
		p.Float(v, "engine_type", "unified", "model_name", m.cfg.Model)
	}
	scheduler("sglang:num_running_reqs", "The number of running requests.", float64(st.Running))
	scheduler("sglang:num_used_tokens", "The number of used tokens.", float64(ld.usedTokens))
	scheduler("sglang:token_usage", "The token usage.", float64(ld.usedTokens)/float64(m.cfg.MaxTotalTokens))
	scheduler("sglang:gen_throughput", "The generation throughput (token/s).", ld.genThroughput)
	scheduler("sglang:num_queue_reqs", "The number of requests in the waiting queue.", float64(st.Queued))
	scheduler("sglang:cache_hit_rate", "The prefix cache hit rate.", ld.cacheHitRate)
	if m.cfg.SpecDraftTokens >= 2 {
		scheduler("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", ld.acceptLength)
		scheduler("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).", ld.acceptRate)
	}
	scheduler("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", float64(m.cfg.MaxTotalTokens))
	scheduler("sglang:context_len", "The context length.", float64(m.cfg.ContextLength))
	// SGLang's tokenizer counters carry is_streaming; the simulator never
	// streams, so every request is is_streaming="false".
	streaming := func(name string, help string, v float64) {
		p.Family(name, help, prom.Counter)
		p.Float(v, "engine_type", "unified", "is_streaming", "false", "model_name", m.cfg.Model)
	}
	streaming("sglang:prompt_tokens_total", "Number of prefill tokens processed.", float64(st.PromptTokens))
	streaming("sglang:generation_tokens_total", "Number of generation tokens processed.", float64(st.GeneratedTokens))
	p.Family("sglang:cached_tokens_total", "Number of cached prompt tokens.", prom.Counter)
	for _, src := range []string{"device", "host", "total"} {
		p.Float(0, "cache_source", src, "engine_type", "unified", "model_name", m.cfg.Model)
	}
	streaming("sglang:num_requests_total", "The number of processed requests.", float64(m.counts.items.Load()))
	tokenizer("sglang:num_aborted_requests_total", "Number of requests aborted.", float64(st.Aborts))
	// The scheduler's retractions: SGLang's admission reserves every
	// running request's max_new_tokens (batch.go), so it never retracts.
	p.Family("sglang:num_retracted_requests_total", "The number of retracted requests.", prom.Counter)
	p.Float(0, "engine_type", "unified", "model_name", m.cfg.Model, "moe_ep_rank", "0", "pp_rank", "0", "tp_rank", "0")
	f := m.fstats.snapshot()
	hl := []string{"engine_type", "unified", "is_streaming", "false", "model_name", m.cfg.Model}
	writeHistogram(&b, "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", f.ttft, hl...)
	writeHistogram(&b, "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", f.e2e, hl...)
	writeRaw(w, http.StatusOK, prom.ContentType, b.Bytes())
}

// vllmPage serves /metrics (always mounted in vLLM) with vLLM's
// names; every series carries engine and model_name.
// num_preemptions_total counts the knee scheduler's preemptions (batch.go;
// 0 without it, as vLLM's counter before its first); cache_config_info
// states the KV pool (Config.KVTokens) as num_gpu_blocks × block_size,
// only when one binds (a pool of Slots × ContextLength is no real one).
func (m *meters) vllmPage(w http.ResponseWriter, r *http.Request) {
	st := m.stats()
	f := m.fstats.snapshot()
	ld := m.loadNow()
	var b bytes.Buffer
	p := prom.NewWriter(&b)
	labels := []string{"engine", "0", "model_name", m.cfg.Model}
	gauge := func(name, help string, v float64) {
		p.Family(name, help, prom.Gauge)
		p.Float(v, labels...)
	}
	counter := func(name, help string, v float64) {
		p.Family(name, help, prom.Counter)
		p.Float(v, labels...)
	}
	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", float64(st.Running))
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", float64(st.Queued))
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", float64(ld.usedTokens)/float64(m.cfg.MaxTotalTokens))
	counter("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", float64(st.Preemptions))
	counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", float64(st.PromptTokens))
	counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", 0)
	counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", float64(st.PromptTokens))
	counter("vllm:generation_tokens_total", "Number of generation tokens processed.", float64(st.GeneratedTokens))
	if m.cfg.KVTokens > 0 {
		// vLLM states its pool (and every other CacheConfig field, here
		// only the ones a client reads and a few beside) as an info gauge
		// of value 1 (vllm/v1/metrics/loggers.py, log_metrics_info).
		blocks, size := m.cfg.KVTokens/16, 16
		if m.cfg.KVTokens%16 != 0 {
			blocks, size = m.cfg.KVTokens, 1
		}
		p.Family("vllm:cache_config_info", "Information of the LLMEngine CacheConfig", prom.Gauge)
		p.Float(1, "block_size", strconv.Itoa(size), "cache_dtype", "auto", "enable_prefix_caching", "True", "engine", "0",
			"gpu_memory_utilization", "0.9", "num_gpu_blocks", strconv.Itoa(blocks), "num_gpu_blocks_override", "None")
	}
	p.Family("vllm:request_success_total", "Count of successfully processed requests.", prom.Counter)
	for _, reason := range []string{"stop", "length", "abort"} {
		p.Float(float64(f.finishedReasons[reason]), "engine", "0", "finished_reason", reason, "model_name", m.cfg.Model)
	}
	if m.cfg.SpecDraftTokens >= 2 {
		counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", float64(f.specDrafts))
		counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", float64(f.specDraftTokens))
		counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", float64(f.specAccepted))
	}
	// One API server (the default) serves prometheus_client's global
	// registry, with its process collector; --api-server-count above 1
	// serves a multiprocess registry without it.
	p.Family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", prom.Gauge)
	p.Float(m.startedAt)
	writeRaw(w, http.StatusOK, prom.ContentType, b.Bytes())
}

// llamaNum formats a metric value as a C++ ostream prints a double.
func llamaNum(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// llamaPage serves /metrics: 501 without --metrics; else
// llama.cpp's counters and gauges, unlabelled, with the process start
// time in the Process-Start-Time-Unix header.
func (m *meters) llamaPage(w http.ResponseWriter, r *http.Request) {
	if !m.cfg.EnableMetrics {
		writeLlamaError(w, http.StatusNotImplemented, "not_supported_error",
			"This server does not support metrics endpoint. Start it with `--metrics`")
		return
	}
	st := m.stats()
	f := m.fstats.snapshot()
	m.fstats.resetScrapeWindow()
	var b bytes.Buffer
	item := func(typ, name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %s\n", name, help, name, typ, name, llamaNum(v))
	}
	rate := func(n int64, tps float64) float64 {
		if n == 0 {
			return 0
		}
		return tps
	}
	busy := 0.0
	if f.nDecode > 0 {
		busy = 1
	}
	item("counter", "prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", float64(st.PromptTokens))
	item("counter", "prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", 0)
	item("counter", "prompt_seconds_total", "Total time spent processing prompts", f.promptSeconds)
	item("counter", "tokens_predicted_total", "Number of generation tokens processed", float64(st.GeneratedTokens))
	item("counter", "tokens_predicted_seconds_total", "Total time spent generating tokens", f.predictSeconds)
	item("counter", "n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding", float64(f.nDecode))
	item("counter", "n_tokens_max", "Largest observed sequence length (prompt + generation)", float64(f.nTokensMax))
	item("counter", "spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", float64(f.specDraftTokens))
	item("counter", "spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", float64(f.specAccepted))
	item("counter", "spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", float64(f.specDrafts))
	item("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s", rate(f.promptSinceScrape, m.cfg.PrefillTokensPerSec))
	item("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s", rate(f.predictSinceScrape, m.cfg.DecodeTokensPerSec))
	item("gauge", "requests_processing", "Number of requests processing", float64(st.Running))
	item("gauge", "requests_deferred", "Number of requests deferred", float64(st.Queued))
	item("gauge", "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", busy)
	w.Header().Set("Process-Start-Time-Unix", strconv.FormatInt(m.created, 10))
	writeRaw(w, http.StatusOK, "text/plain; version=0.0.4", b.Bytes())
}

// serverInfo serves SGLang's GET /server_info (and /get_server_info):
// a few of the ServerArgs fields it flattens (sglang-api.md §5), among
// them tool_call_parser (null without --tool-call-parser) and
// reasoning_parser, so a client can see what the server parses.
func (m *meters) serverInfo(w http.ResponseWriter, r *http.Request) {
	var parser, reasoning any
	if m.cfg.ToolCallParser != "" {
		parser = m.cfg.ToolCallParser
	}
	if m.cfg.ReasoningParser {
		reasoning = "qwen3"
	}
	writeRaw(w, http.StatusOK, "application/json", orderedJSON([]kv{
		{"model_path", m.cfg.Model}, {"served_model_name", m.cfg.Model}, {"context_length", nil},
		{"max_running_requests", m.cfg.Slots}, {"tool_call_parser", parser}, {"reasoning_parser", reasoning},
		{"enable_metrics", m.cfg.EnableMetrics}, {"status", "ready"},
		{"max_total_num_tokens", m.cfg.MaxTotalTokens}, {"max_req_input_len", m.cfg.maxReqInputLen()},
		{"version", "0.0.0+gendex.sim"},
	}))
}

// writeHistogram writes one Prometheus histogram family with a single
// label set (labels as name, value pairs, sorted), in prometheus_client's
// text form.
func writeHistogram(b *bytes.Buffer, name, help string, h histogram, labels ...string) {
	b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " histogram\n")
	var ls bytes.Buffer
	for i := 0; i+1 < len(labels); i += 2 {
		ls.WriteString(labels[i] + "=" + string(quote(labels[i+1])) + ",")
	}
	var cum int64
	for i, le := range latencyBuckets {
		if h.counts != nil {
			cum += h.counts[i]
		}
		b.WriteString(name + "_bucket{" + ls.String() + `le="` + pyFloat(le) + `"} ` + pyFloat(float64(cum)) + "\n")
	}
	b.WriteString(name + "_bucket{" + ls.String() + `le="+Inf"} ` + pyFloat(float64(h.n)) + "\n")
	lbl := string(bytes.TrimSuffix(ls.Bytes(), []byte(",")))
	b.WriteString(name + "_count{" + lbl + "} " + pyFloat(float64(h.n)) + "\n")
	b.WriteString(name + "_sum{" + lbl + "} " + pyFloat(h.sum) + "\n")
}
