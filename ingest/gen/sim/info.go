package sim

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"gendex/query/prom"
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

// handleHealth serves /health and /health_generate: 503 with an empty body
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
	return orderedJSON([]kv{
		{"id", s.cfg.Model}, {"object", "model"}, {"created", s.created}, {"owned_by", "sglang"},
		{"root", s.cfg.Model}, {"parent", nil}, {"max_model_len", s.cfg.ContextLength},
	})
}

// handleModels serves /v1/models; data[0].max_model_len is the context
// length.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	body := orderedJSON([]kv{{"object", "list"}, {"data", append(append([]byte{'['}, s.modelCard()...), ']')}})
	writeRaw(w, http.StatusOK, "application/json", body)
}

// handleModel serves /v1/models/{model}.
func (s *Server) handleModel(w http.ResponseWriter, name string) {
	if name != s.cfg.Model {
		writeRaw(w, http.StatusNotFound, "application/json", orderedJSON([]kv{{"error", orderedJSON([]kv{
			{"message", fmt.Sprintf("The model '%s' does not exist", name)}, {"type", "invalid_request_error"},
			{"param", "model"}, {"code", "model_not_found"},
		})}}))
		return
	}
	writeRaw(w, http.StatusOK, "application/json", s.modelCard())
}

// handleModelInfo serves /model_info and /get_model_info.
func (s *Server) handleModelInfo(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, "application/json", orderedJSON([]kv{
		{"model_path", s.cfg.Model}, {"tokenizer_path", s.cfg.Model}, {"is_generation", true},
		{"preferred_sampling_params", nil}, {"weight_version", "default"},
		{"has_image_understanding", false}, {"has_audio_understanding", false},
		{"model_type", "sim"}, {"architectures", []string{"SimForCausalLM"}},
	}))
}

// serverArgs is the subset of ServerArgs that /server_info reports.
func (s *Server) serverArgs() []kv {
	c := &s.cfg
	var parser any
	if c.ReasoningParser {
		parser = "sim"
	}
	return []kv{
		{"model_path", c.Model}, {"tokenizer_path", c.Model}, {"tokenizer_mode", "auto"},
		{"skip_tokenizer_init", false}, {"served_model_name", c.Model}, {"context_length", nil},
		{"max_running_requests", c.Slots}, {"max_queued_requests", nil}, {"max_total_tokens", nil},
		{"chunked_prefill_size", 8192}, {"max_prefill_tokens", 16384}, {"mem_fraction_static", 0.88},
		{"tp_size", 1}, {"dp_size", 1}, {"random_seed", c.Seed}, {"stream_interval", 1},
		{"incremental_streaming_output", false}, {"reasoning_parser", parser},
		{"enable_metrics", c.EnableMetrics}, {"weight_version", "default"}, {"allow_auto_truncate", false},
	}
}

// handleServerInfo serves /server_info and /get_server_info: server args,
// scheduler info (status, max_total_num_tokens, max_req_input_len),
// internal_states, version and kv_events.
func (s *Server) handleServerInfo(w http.ResponseWriter, r *http.Request) {
	args := s.serverArgs()
	internal := append(append([]kv{}, args...),
		kv{"last_gen_throughput", 0.0},
		kv{"memory_usage", orderedJSON([]kv{{"weight", 0.0}, {"kvcache", 0.0}, {"token_capacity", s.cfg.maxTotalNumTokens()}, {"graph", 0.0}})},
		kv{"effective_max_running_requests_per_dp", s.cfg.Slots},
	)
	members := append(args,
		kv{"status", "ready"},
		kv{"max_total_num_tokens", s.cfg.maxTotalNumTokens()},
		kv{"max_req_input_len", s.cfg.maxReqInputLen()},
		kv{"internal_states", append(append([]byte{'['}, orderedJSON(internal)...), ']')},
		kv{"version", "sim"},
		kv{"kv_events", nil},
	)
	writeRaw(w, http.StatusOK, "application/json", orderedJSON(members))
}

// handleFlushCache serves /flush_cache[?timeout=s]: 200 when no request is
// running or waiting (after waiting up to timeout seconds for that), else
// 400.
func (s *Server) handleFlushCache(w http.ResponseWriter, r *http.Request) {
	timeout := 0.0
	if v := r.URL.Query().Get("timeout"); v != "" {
		t, err := strconv.ParseFloat(v, 64)
		if err != nil || t < 0 {
			writeOpenAIError(w, validationError(fieldError{typ: "greater_than_equal", loc: []any{"query", "timeout"}, msg: "Input should be greater than or equal to 0"}))
			return
		}
		timeout = t
	}
	idle := func() bool { p := s.slots.snapshot(); return p.running == 0 && p.waiting == 0 }
	msg := "Flush cache failed.\n"
	ok := idle()
	if !ok && timeout > 0 {
		msg = "Timed out waiting for idle state."
		deadline := time.Now().Add(time.Duration(timeout * float64(time.Second)))
		for !ok && time.Now().Before(deadline) {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
			ok = idle()
		}
	}
	if ok {
		writeRaw(w, http.StatusOK, "", []byte("Cache flushed.\nPlease check backend logs for more details. "+
			"(When there are running or waiting requests, the operation will not be performed.)\n"))
		return
	}
	writeRaw(w, http.StatusBadRequest, "", []byte(msg))
}

// handleAbortRequest serves /abort_request {"rid","abort_all"}: 200 with an
// empty body. Aborted requests answer their own callers with 200 and
// finish_reason type "abort".
func (s *Server) handleAbortRequest(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	m, verr := decodeBody(body, "Input should be a valid dictionary or object to extract fields from")
	if verr == nil {
		verr = checkFields(m, map[string]kind{"rid": kStr, "abort_all": kBool})
	}
	if verr != nil {
		writeOpenAIError(w, verr)
		return
	}
	rid, _ := decodeString(m["rid"])
	s.reqs.abort(rid, boolField(m, "abort_all", false))
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// handleTokenize serves /v1/tokenize and /tokenize.
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
		list, isList, _ := decodeStrings(m["prompt"])
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

// handleDetokenize serves /v1/detokenize and /detokenize.
func (s *Server) handleDetokenize(w http.ResponseWriter, r *http.Request) {
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
		verr = checkFields(m, map[string]kind{"skip_special_tokens": kBool, "model": kStr})
	}
	if verr == nil && isNull(m["tokens"]) {
		verr = validationError(fieldError{typ: "missing", loc: []any{"body", "tokens"}, msg: "Field required"})
	}
	var out any
	if verr == nil {
		skip := boolField(m, "skip_special_tokens", true)
		a, _ := decodeArray(m["tokens"])
		if ids, ok := decodeInts(m["tokens"]); ok {
			out = Decode(ids, skip)
		} else if len(a) > 0 && jsonKind(a[0]) == "array" {
			texts := make([]string, len(a))
			for i, e := range a {
				ids, ok := decodeInts(e)
				if !ok {
					verr = validationError(fieldError{typ: "int_type", loc: []any{"body", "tokens", i}, msg: "Input should be a valid integer"})
					break
				}
				texts[i] = Decode(ids, skip)
			}
			out = texts
		} else {
			verr = validationError(fieldError{typ: "list_type", loc: []any{"body", "tokens"}, msg: "Input should be a valid list"})
		}
	}
	if verr != nil {
		writeOpenAIError(w, verr)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"text": out})
}

// handleMetrics serves /metrics in the Prometheus text format with SGLang's
// metric names and labels; as SGLang's Python client does, a counter's
// family is named with its _total.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	st := s.Stats()
	var b bytes.Buffer
	p := prom.NewWriter(&b)
	metric := func(name string, typ prom.Type, help string, v float64) {
		p.Family(name, help, typ)
		p.Float(v, "engine_type", "unified", "model_name", s.cfg.Model, "pp_rank", "0", "tp_rank", "0")
	}
	metric("sglang:num_running_reqs", prom.Gauge, "The number of running requests.", float64(st.Running))
	metric("sglang:num_queue_reqs", prom.Gauge, "The number of requests in the waiting queue.", float64(st.Queued))
	metric("sglang:context_len", prom.Gauge, "The context length.", float64(s.cfg.ContextLength))
	metric("sglang:prompt_tokens_total", prom.Counter, "Number of prefill tokens processed.", float64(st.PromptTokens))
	metric("sglang:generation_tokens_total", prom.Counter, "Number of generation tokens processed.", float64(st.GeneratedTokens))
	metric("sglang:num_requests_total", prom.Counter, "The number of processed requests.", float64(s.stats.items.Load()))
	metric("sglang:num_aborted_requests_total", prom.Counter, "Number of requests aborted.", float64(st.Aborts))
	writeRaw(w, http.StatusOK, prom.ContentType, b.Bytes())
}
