package sim

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"time"

	"gendex/store/prom"
)

// kv is one member of an ordered JSON object.
type kv struct {
	k string
	v any
}

// orderedJSON encodes members as a JSON object in the given order.
func orderedJSON(members []kv) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(quote(m.k))
		b.WriteByte(':')
		if raw, ok := m.v.([]byte); ok {
			b.Write(raw)
		} else {
			b.Write(marshal(m.v))
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

// handleHealth serves /health: 503 with an empty body
// during warmup, else 200 with an empty body.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	status := http.StatusOK
	if s.warmingUp() {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
}

// modelCard is one entry of /v1/models.
func (s *Server) modelCard() []byte {
	card := []kv{
		{"id", s.cfg.Model}, {"object", "model"}, {"created", s.created}, {"owned_by", "sglang"},
		{"root", s.cfg.Model}, {"parent", nil}, {"max_model_len", s.cfg.ContextLength},
	}
	if !s.cfg.Unmarked {
		// Not SGLang's: it marks the simulator, so gen marks its answers
		// "simulated" and never takes them for a real model's.
		card = append(card, kv{"gendex_simulator", true})
	}
	return orderedJSON(card)
}

// loraCard is the /v1/models entry of a loaded LoRA adapter: no context
// length of its own, its parent the base model.
func (s *Server) loraCard(name string) []byte {
	card := []kv{
		{"id", name}, {"object", "model"}, {"created", s.created}, {"owned_by", "sglang"},
		{"root", "/adapters/" + name}, {"parent", s.cfg.Model}, {"max_model_len", nil},
	}
	if !s.cfg.Unmarked {
		card = append(card, kv{"gendex_simulator", true})
	}
	return orderedJSON(card)
}

// handleModels serves /v1/models: the LoRA adapters (Config.LoRAAdapters)
// first, then the served model, whose max_model_len is the context
// length.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	data := []byte{'['}
	for _, a := range s.cfg.LoRAAdapters {
		data = append(append(data, s.loraCard(a)...), ',')
	}
	data = append(append(data, s.modelCard()...), ']')
	body := orderedJSON([]kv{{"object", "list"}, {"data", data}})
	writeRaw(w, http.StatusOK, "application/json", body)
}

// handleTokenize serves /v1/tokenize.
func (s *Server) handleTokenize(w http.ResponseWriter, r *http.Request) {
	if err := checkOpenAIContentType(r); err != nil {
		writeOpenAIError(w, err)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	m, verr := decodeBody(body, "Input should be a valid dictionary or object to extract fields from")
	if verr == nil {
		verr = checkFields(m, map[string]kind{"prompt": kStrs, "add_special_tokens": kBool, "model": kStr})
	}
	if verr == nil && isNull(m["prompt"]) == isNull(m["messages"]) {
		verr = validationError(fieldError{typ: "value_error", loc: []any{"body"}, msg: "Value error, Exactly one of 'prompt' or 'messages' must be provided."})
	}
	var msgs []chatMessage
	if verr == nil && !isNull(m["messages"]) {
		msgs, verr = parseMessages(m["messages"])
		if verr == nil && len(msgs) == 0 {
			verr = httpError(http.StatusBadRequest, "BadRequestError", "Messages cannot be empty.")
		}
		if verr == nil && s.cfg.ToolCalls {
			if _, verr = readTools(m); verr == nil {
				verr = attachToolCalls(m["messages"], msgs)
			}
		}
	}
	if verr != nil {
		writeOpenAIError(w, verr)
		return
	}
	var tokens, count any
	switch {
	case msgs != nil:
		ids := s.chatPrompt(m, msgs)
		tokens, count = ids, len(ids)
	default:
		list, isList, _ := asStrings(m["prompt"])
		add := boolField(m, "add_special_tokens", true)
		if !isList {
			ids := Encode(list[0], add)
			tokens, count = ids, len(ids)
		} else {
			all, counts := make([][]int, len(list)), make([]int, len(list))
			for i, t := range list {
				all[i] = Encode(t, add)
				counts[i] = len(all[i])
			}
			tokens, count = all, counts
		}
	}
	maxLen := []byte(TokenizerMaxLength)
	if s.cfg.TokenizerMaxLength != 0 {
		maxLen = strconv.AppendInt(nil, s.cfg.TokenizerMaxLength, 10)
	}
	writeRaw(w, http.StatusOK, "application/json", orderedJSON([]kv{{"tokens", tokens}, {"count", count}, {"max_model_len", maxLen}}))
}

// handleMetrics serves /metrics in the Prometheus text format with SGLang's
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
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	st := s.Stats()
	ld := s.load.snapshot(time.Now(), s.cfg.DecodeTokensPerSec)
	var b bytes.Buffer
	p := prom.NewWriter(&b)
	scheduler := func(name string, help string, v float64) {
		p.Family(name, help, prom.Gauge)
		p.Float(v, "engine_type", "unified", "model_name", s.cfg.Model, "moe_ep_rank", "0", "pp_rank", "0", "tp_rank", "0")
	}
	tokenizer := func(name string, help string, v float64) {
		p.Family(name, help, prom.Counter)
		p.Float(v, "engine_type", "unified", "model_name", s.cfg.Model)
	}
	scheduler("sglang:num_running_reqs", "The number of running requests.", float64(st.Running))
	scheduler("sglang:num_used_tokens", "The number of used tokens.", float64(ld.usedTokens))
	scheduler("sglang:token_usage", "The token usage.", float64(ld.usedTokens)/float64(s.cfg.MaxTotalTokens))
	scheduler("sglang:gen_throughput", "The generation throughput (token/s).", ld.genThroughput)
	scheduler("sglang:num_queue_reqs", "The number of requests in the waiting queue.", float64(st.Queued))
	scheduler("sglang:cache_hit_rate", "The prefix cache hit rate.", ld.cacheHitRate)
	if s.cfg.SpecDraftTokens >= 2 {
		scheduler("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", ld.acceptLength)
		scheduler("sglang:spec_accept_rate", "The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).", ld.acceptRate)
	}
	scheduler("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", float64(s.cfg.MaxTotalTokens))
	scheduler("sglang:context_len", "The context length.", float64(s.cfg.ContextLength))
	// SGLang's tokenizer counters carry is_streaming; the simulator never
	// streams, so every request is is_streaming="false".
	streaming := func(name string, help string, v float64) {
		p.Family(name, help, prom.Counter)
		p.Float(v, "engine_type", "unified", "is_streaming", "false", "model_name", s.cfg.Model)
	}
	streaming("sglang:prompt_tokens_total", "Number of prefill tokens processed.", float64(st.PromptTokens))
	streaming("sglang:generation_tokens_total", "Number of generation tokens processed.", float64(st.GeneratedTokens))
	p.Family("sglang:cached_tokens_total", "Number of cached prompt tokens.", prom.Counter)
	for _, src := range []string{"device", "host", "total"} {
		p.Float(0, "cache_source", src, "engine_type", "unified", "model_name", s.cfg.Model)
	}
	streaming("sglang:num_requests_total", "The number of processed requests.", float64(s.stats.items.Load()))
	tokenizer("sglang:num_aborted_requests_total", "Number of requests aborted.", float64(st.Aborts))
	f := s.fstats.snapshot()
	hl := []string{"engine_type", "unified", "is_streaming", "false", "model_name", s.cfg.Model}
	writeHistogram(&b, "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", f.ttft, hl...)
	writeHistogram(&b, "sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", f.e2e, hl...)
	writeRaw(w, http.StatusOK, prom.ContentType, b.Bytes())
}
