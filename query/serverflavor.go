package query

import (
	"strings"

	"gendex/store"
)

// The server question's columns are named the same for every flavor of
// server (gen maps SGLang's, vLLM's and llama.cpp's /metrics onto one
// sample: ingest/gen/servermetrics/read.go); what follows says why a column is
// unknown when a flavor does not expose it. accept_length is never
// explained: every flavor has it only with speculative decoding.

// noMetricsNote501 is what `server` says of a llama-server without
// --metrics (its /metrics answers 501 not_supported_error).
const noMetricsNote501 = "no /metrics (HTTP 501 not_supported_error): start llama-server with --metrics"

// noMetricsNoteOf is the note of a server whose /metrics was refused.
func noMetricsNoteOf(f store.Flavor) string {
	if f == store.FlavorLlamaCpp {
		return noMetricsNote501
	}
	return noMetricsNote
}

// flavorGaps: per flavor, why a column is unknown when its sample lacks
// it; a column not listed has the generic reason.
var flavorGaps = map[store.Flavor]map[store.Metric]string{
	store.FlavorLlamaCpp: {
		store.MetricTokenUsage:   "llama-server exposes no KV use (llamacpp:kv_cache_usage_ratio is in older builds only)",
		store.MetricCacheHitRate: "no llamacpp:prompt_tokens_cached_total (newer builds only)",
	},
	store.FlavorVLLM: {
		store.MetricCacheHitRate: "vllm:prefix_cache_queries_total is absent or 0 (prefix caching off, or no prompt yet)",
	},
	store.FlavorSGLang: {
		store.MetricCacheHitRate: "neither sglang:cache_hit_rate nor sglang:cached_tokens_total",
	},
}

// unexposedNote says why the columns of a reading (its /metrics answered)
// are unknown: a server that is none of the flavors gen reads, or the
// columns its flavor does not expose. "" when all are known, or the sample
// predates flavors.
func unexposedNote(s *store.ServerSample) string {
	switch s.Flavor {
	case store.FlavorUnknown:
		return ""
	case store.FlavorOther:
		return "its /metrics has no sglang:, vllm: or llamacpp: names (not SGLang, vLLM or llama.cpp): its columns are unknown"
	}
	var gaps []string
	for _, c := range []struct {
		col string
		m   store.Metric
	}{{"running", store.MetricRunning}, {"queued", store.MetricQueued}, {"token_usage", store.MetricTokenUsage},
		{"cache_hit_rate", store.MetricCacheHitRate}, {"server_tokens_per_s", store.MetricGenTokens}} {
		if _, ok := s.Get(c.m); ok {
			continue
		}
		why := flavorGaps[s.Flavor][c.m]
		if why == "" {
			why = "not in its /metrics"
		}
		gaps = append(gaps, c.col+" unknown: "+why)
	}
	if len(gaps) == 0 {
		return ""
	}
	return s.Flavor.String() + ": " + strings.Join(gaps, "; ")
}
