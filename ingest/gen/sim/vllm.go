package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"gendex/store/prom"
)

// vLLM's flavor: the OpenAI-compatible server's router, its errors and
// request bodies, and its info routes (/version, /v1/models, /metrics);
// the generation routes are in vllm_generate.go, the token routes in
// vllm_tokens.go (see flavors.go for the facts and their sources).

// vllmRoutes is vLLM's FastAPI router: the API key applies to paths under
// /v1 and /inference only; a missing route is FastAPI's 404, a wrong
// method its 405.
func (s *Server) vllmRoutes() flavorRouter {
	get, post := []string{http.MethodGet}, []string{http.MethodPost}
	table := map[string]route{
		"/health":                {get, s.handleHealth},
		"/v1/models":             {get, s.handleVLLMModels},
		"/v1/completions":        {post, s.handleVLLMCompletions},
		"/v1/chat/completions":   {post, s.handleVLLMChat},
		"/tokenize":              {post, s.handleVLLMTokenize},
		"/detokenize":            {post, s.handleVLLMDetokenize},
		"/inference/v1/generate": {post, s.handleVLLMGenerate},
		"/metrics":               {get, s.handleVLLMMetrics},
		"/version":               {get, s.handleVLLMVersion},
	}
	return flavorRouter{
		table: table,
		gate: func(w http.ResponseWriter, r *http.Request) bool {
			p := r.URL.Path
			if s.cfg.APIKey == "" || r.Method == http.MethodOptions ||
				!(strings.HasPrefix(p, "/v1") || strings.HasPrefix(p, "/inference")) {
				return true
			}
			if r.Header.Get("Authorization") == "Bearer "+s.cfg.APIKey {
				return true
			}
			writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
			return false
		},
		notFound:  fastAPINotFound,
		badMethod: fastAPIBadMethod,
	}
}

// writeVLLMError writes vLLM's ErrorResponse: {"error":{"message","type",
// "param","code"}}; param "" is null.
func writeVLLMError(w http.ResponseWriter, status int, typ, msg, param string) {
	var p any
	if param != "" {
		p = param
	}
	writeRaw(w, status, "application/json", orderedJSON([]kv{{"error", orderedJSON([]kv{
		{"message", msg}, {"type", typ}, {"param", p}, {"code", status},
	})}}))
}

// writeVLLMAPIError writes a simulator error in vLLM's shape: validation
// errors as "Bad Request", others as BadRequestError (or their own type).
func writeVLLMAPIError(w http.ResponseWriter, e *apiError) {
	typ := e.errType
	if e.kind == kindValue {
		typ = "BadRequestError"
	}
	writeVLLMError(w, e.status, typ, e.msg, "")
}

// handleVLLMVersion serves /version.
func (s *Server) handleVLLMVersion(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, "application/json", []byte(`{"version":"0.0.0+gendex.sim"}`))
}

// vllmCard is one /v1/models card.
func (s *Server) vllmCard(id, root string, parent any, maxLen any) []byte {
	perm := orderedJSON([]kv{
		{"id", "modelperm-" + newRID()}, {"object", "model_permission"}, {"created", s.created},
		{"allow_create_engine", false}, {"allow_sampling", true}, {"allow_logprobs", true},
		{"allow_search_indices", false}, {"allow_view", true}, {"allow_fine_tuning", false},
		{"organization", "*"}, {"group", nil}, {"is_blocking", false},
	})
	card := []kv{
		{"id", id}, {"object", "model"}, {"created", s.created}, {"owned_by", "vllm"},
		{"root", root}, {"parent", parent}, {"max_model_len", maxLen},
		{"permission", jsonList(perm)},
	}
	if !s.cfg.Unmarked {
		card = append(card, kv{"gendex_simulator", true})
	}
	return orderedJSON(card)
}

// handleVLLMModels serves /v1/models: the base model, then its LoRA
// adapters (max_model_len null).
func (s *Server) handleVLLMModels(w http.ResponseWriter, r *http.Request) {
	cards := [][]byte{s.vllmCard(s.cfg.Model, s.cfg.Model, nil, s.cfg.ContextLength)}
	for _, a := range s.cfg.LoRAAdapters {
		cards = append(cards, s.vllmCard(a, "/adapters/"+a, s.cfg.Model, nil))
	}
	writeRaw(w, http.StatusOK, "application/json", orderedJSON([]kv{{"object", "list"}, {"data", jsonList(cards...)}}))
}

// vllmBody does the checks every vLLM POST route shares: content type,
// JSON object body, the model field's type and existence. It answers the
// request and returns nil when one fails.
func (s *Server) vllmBody(w http.ResponseWriter, r *http.Request, body []byte) map[string]json.RawMessage {
	if err := checkOpenAIContentType(r); err != nil {
		writeVLLMAPIError(w, err)
		return nil
	}
	m, err := decodeBody(body, "Input should be a valid dictionary or object to extract fields from")
	if err == nil {
		err = checkFields(m, map[string]kind{"model": kStr})
	}
	if err != nil {
		writeVLLMAPIError(w, err)
		return nil
	}
	if name, ok := asString(m["model"]); ok && !s.vllmKnows(name) {
		writeVLLMError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", name), "model")
		return nil
	}
	return m
}

// vllmKnows reports whether name is the served model or a LoRA adapter.
func (s *Server) vllmKnows(name string) bool {
	if name == s.cfg.Model {
		return true
	}
	for _, a := range s.cfg.LoRAAdapters {
		if a == name {
			return true
		}
	}
	return false
}

// handleVLLMMetrics serves /metrics (always mounted in vLLM) with vLLM's
// names; every series carries engine and model_name.
func (s *Server) handleVLLMMetrics(w http.ResponseWriter, r *http.Request) {
	st := s.Stats()
	f := s.fstats.snapshot()
	ld := s.load.snapshot(time.Now(), s.cfg.DecodeTokensPerSec)
	var b bytes.Buffer
	p := prom.NewWriter(&b)
	labels := []string{"engine", "0", "model_name", s.cfg.Model}
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
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", float64(ld.usedTokens)/float64(s.cfg.MaxTotalTokens))
	counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", float64(st.PromptTokens))
	counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", 0)
	counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", float64(st.PromptTokens))
	counter("vllm:generation_tokens_total", "Number of generation tokens processed.", float64(st.GeneratedTokens))
	p.Family("vllm:request_success_total", "Count of successfully processed requests.", prom.Counter)
	for _, reason := range []string{"stop", "length", "abort"} {
		p.Float(float64(f.finishedReasons[reason]), "engine", "0", "finished_reason", reason, "model_name", s.cfg.Model)
	}
	if s.cfg.SpecDraftTokens >= 2 {
		counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", float64(f.specDrafts))
		counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", float64(f.specDraftTokens))
		counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", float64(f.specAccepted))
	}
	// One API server (the default) serves prometheus_client's global
	// registry, with its process collector; --api-server-count above 1
	// serves a multiprocess registry without it.
	p.Family("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", prom.Gauge)
	p.Float(s.startedAt)
	writeRaw(w, http.StatusOK, prom.ContentType, b.Bytes())
}
