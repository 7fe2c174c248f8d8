package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// llama.cpp's flavor: llama-server's router, its errors and request bodies,
// and its info routes (/health, /v1/models, /props, /metrics); the
// generation routes are in llamacpp_generate.go, the token routes in
// llamacpp_tokens.go (see flavors.go for the facts and their sources).

// llamaBuild is the build_info and system_fingerprint the simulator
// reports as llama-server.
const llamaBuild = "b0-gendex-sim"

// llamaRoutes is llama-server's router. Its pre-routing handler answers
// 503 "Loading model" to every path while the model loads, then checks the
// API key; cpp-httplib answers 404 "File Not Found" to a path no handler
// serves for the request's method.
func (s *Server) llamaRoutes() flavorRouter {
	get, post := []string{http.MethodGet}, []string{http.MethodPost}
	table := map[string]route{
		"/health":              {get, s.handleLlamaHealth},
		"/v1/health":           {get, s.handleLlamaHealth},
		"/v1/models":           {get, s.handleLlamaModels},
		"/models":              {get, s.handleLlamaModels},
		"/props":               {get, s.handleLlamaProps},
		"/metrics":             {get, s.handleLlamaMetrics},
		"/completion":          {post, s.handleLlamaCompletion},
		"/completions":         {post, s.handleLlamaCompletion},
		"/v1/completions":      {post, s.handleLlamaCompletion},
		"/v1/chat/completions": {post, s.handleLlamaChat},
		"/chat/completions":    {post, s.handleLlamaChat},
		"/tokenize":            {post, s.handleLlamaTokenize},
		"/detokenize":          {post, s.handleLlamaDetokenize},
		"/apply-template":      {post, s.handleLlamaApplyTemplate},
	}
	public := map[string]bool{"/health": true, "/v1/health": true, "/models": true, "/v1/models": true}
	notFound := func(w http.ResponseWriter) {
		writeRaw(w, http.StatusNotFound, "application/json; charset=utf-8",
			[]byte(`{"error":{"message":"File Not Found","type":"not_found_error","code":404}}`))
	}
	return flavorRouter{
		table: table,
		gate: func(w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodOptions {
				writeRaw(w, http.StatusOK, "text/html", nil)
				return false
			}
			if s.warmingUp() {
				writeRaw(w, http.StatusServiceUnavailable, "application/json; charset=utf-8",
					[]byte(`{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`))
				return false
			}
			if s.cfg.APIKey == "" || public[r.URL.Path] {
				return true
			}
			key := r.Header.Get("Authorization")
			if key == "" {
				key = r.Header.Get("X-Api-Key")
			}
			if strings.TrimPrefix(key, "Bearer ") == s.cfg.APIKey {
				return true
			}
			writeRaw(w, http.StatusUnauthorized, "application/json; charset=utf-8",
				[]byte(`{"error":{"message":"Invalid API Key","type":"authentication_error","code":401}}`))
			return false
		},
		notFound:  notFound,
		badMethod: func(w http.ResponseWriter, _ route) { notFound(w) },
	}
}

// writeLlamaError writes format_error_response's shape: {"error":{"code",
// "message","type"}} with the status of its type.
func writeLlamaError(w http.ResponseWriter, status int, typ, msg string, extra ...kv) {
	e := append([]kv{{"code", status}, {"message", msg}, {"type", typ}}, extra...)
	writeRaw(w, status, "application/json; charset=utf-8", orderedJSON([]kv{{"error", orderedJSON(e)}}))
}

// llamaInvalid writes a 400 invalid_request_error.
func llamaInvalid(w http.ResponseWriter, msg string) {
	writeLlamaError(w, http.StatusBadRequest, "invalid_request_error", msg)
}

// readLlamaBody reads and parses a JSON body as json::parse does; a parse
// failure escapes the handler as a 500 server_error. A body that is not an
// object reads as an empty one (every field lookup misses).
func readLlamaBody(w http.ResponseWriter, r *http.Request) (map[string]json.RawMessage, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, false
	}
	return parseLlamaBody(w, body)
}

func parseLlamaBody(w http.ResponseWriter, body []byte) (map[string]json.RawMessage, bool) {
	if !json.Valid(body) {
		writeLlamaError(w, http.StatusInternalServerError, "server_error",
			"[json.exception.parse_error.101] parse error at line 1, column 1: syntax error while parsing value")
		return nil, false
	}
	m, _ := asObject(body)
	if m == nil {
		m = map[string]json.RawMessage{}
	}
	return m, true
}

// handleLlamaHealth serves /health: {"status":"ok"} once loaded (the gate
// answers 503 before).
func (s *Server) handleLlamaHealth(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", []byte(`{"status":"ok"}`))
}

// llamaNCtxTrain is the model's training context reported as n_ctx_train.
func (s *Server) llamaNCtxTrain() int { return max(s.cfg.ContextLength, 4096) }

// handleLlamaModels serves /v1/models: an Ollama-style "models" list, then
// the OpenAI list whose one card has meta.n_ctx (per slot) and no
// max_model_len.
func (s *Server) handleLlamaModels(w http.ResponseWriter, r *http.Request) {
	m := s.cfg.Model
	card := []kv{
		{"id", m}, {"aliases", []string{m}}, {"tags", []string{}}, {"object", "model"},
		{"created", time.Now().Unix()}, {"owned_by", "llamacpp"},
		{"meta", orderedJSON([]kv{
			{"vocab_type", 2}, {"n_vocab", VocabSize}, {"n_ctx", s.cfg.ContextLength},
			{"n_ctx_train", s.llamaNCtxTrain()}, {"n_embd", 1024}, {"n_params", 1000000},
			{"size", 2000000}, {"ftype", "F16"},
		})},
	}
	if !s.cfg.Unmarked {
		card = append(card, kv{"gendex_simulator", true})
	}
	ollama := orderedJSON([]kv{
		{"name", m}, {"model", m}, {"modified_at", ""}, {"size", ""}, {"digest", ""}, {"type", "model"},
		{"description", ""}, {"tags", []string{""}}, {"capabilities", []string{"completion"}}, {"parameters", ""},
		{"details", orderedJSON([]kv{{"parent_model", ""}, {"format", "gguf"}, {"family", ""},
			{"families", []string{""}}, {"parameter_size", ""}, {"quantization_level", ""}})},
	})
	body := orderedJSON([]kv{
		{"models", jsonList(ollama)},
		{"object", "list"},
		{"data", jsonList(orderedJSON(card))},
	})
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", body)
}

// llamaDefaults are llama-server's sampling defaults.
var llamaDefaults = map[string]float64{
	"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
	"frequency_penalty": 0, "presence_penalty": 0, "repeat_penalty": 1.0,
}

// handleLlamaProps serves /props: the slot context and default settings.
func (s *Server) handleLlamaProps(w http.ResponseWriter, r *http.Request) {
	params := []kv{{"seed", 4294967295}}
	for _, k := range []string{"temperature", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty"} {
		params = append(params, kv{k, llamaDefaults[k]})
	}
	params = append(params, kv{"n_predict", -1})
	body := orderedJSON([]kv{
		{"default_generation_settings", orderedJSON([]kv{{"params", orderedJSON(params)}, {"n_ctx", s.cfg.ContextLength}})},
		{"total_slots", s.cfg.Slots}, {"model_alias", s.cfg.Model}, {"model_path", "/models/" + s.cfg.Model},
		{"endpoint_slots", false}, {"endpoint_props", false}, {"endpoint_metrics", s.cfg.EnableMetrics},
		{"build_info", llamaBuild}, {"is_sleeping", false},
	})
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", body)
}

// llamaNum formats a metric value as a C++ ostream prints a double.
func llamaNum(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// handleLlamaMetrics serves /metrics: 501 without --metrics; else
// llama.cpp's counters and gauges, unlabelled, with the process start
// time in the Process-Start-Time-Unix header.
func (s *Server) handleLlamaMetrics(w http.ResponseWriter, r *http.Request) {
	if !s.cfg.EnableMetrics {
		writeLlamaError(w, http.StatusNotImplemented, "not_supported_error",
			"This server does not support metrics endpoint. Start it with `--metrics`")
		return
	}
	st := s.Stats()
	f := s.fstats.snapshot()
	s.fstats.resetScrapeWindow()
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
	item("gauge", "prompt_tokens_seconds", "Average prompt throughput in tokens/s", rate(f.promptSinceScrape, s.cfg.PrefillTokensPerSec))
	item("gauge", "predicted_tokens_seconds", "Average generation throughput in tokens/s", rate(f.predictSinceScrape, s.cfg.DecodeTokensPerSec))
	item("gauge", "requests_processing", "Number of requests processing", float64(st.Running))
	item("gauge", "requests_deferred", "Number of requests deferred", float64(st.Queued))
	item("gauge", "n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", busy)
	w.Header().Set("Process-Start-Time-Unix", strconv.FormatInt(s.created, 10))
	writeRaw(w, http.StatusOK, "text/plain; version=0.0.4", b.Bytes())
}
