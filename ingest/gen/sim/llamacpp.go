package sim

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"time"
)

// llamaCpp is llama.cpp's flavor: llama-server's router, its errors and
// request bodies, and its info routes (/health, /v1/models, /props); the
// generation routes are in llamacpp_generate.go, the token routes in
// llamacpp_tokens.go (see flavors.go for the facts and their sources).
// /metrics routes to the meters part, its loading state comes from faults.
// See flavorParts for what a flavor may touch.
type llamaCpp struct{ flavorParts }

// llamaBuild is the build_info and system_fingerprint the simulator
// reports as llama-server.
const llamaBuild = "b0-gendex-sim"

// routes is llama-server's router. Its pre-routing handler answers
// 503 "Loading model" to every path while the model loads, then checks the
// API key; cpp-httplib answers 404 "File Not Found" to a path no handler
// serves for the request's method.
func (l *llamaCpp) routes() flavorRouter {
	get, post := []string{http.MethodGet}, []string{http.MethodPost}
	table := map[string]route{
		"/health":              {get, l.handleHealth},
		"/v1/health":           {get, l.handleHealth},
		"/v1/models":           {get, l.handleModels},
		"/models":              {get, l.handleModels},
		"/props":               {get, l.handleProps},
		"/metrics":             {get, l.meters.llamaPage},
		"/completion":          {post, l.handleCompletion},
		"/completions":         {post, l.handleCompletion},
		"/v1/completions":      {post, l.handleCompletion},
		"/v1/chat/completions": {post, l.handleChat},
		"/chat/completions":    {post, l.handleChat},
		"/tokenize":            {post, l.handleTokenize},
		"/detokenize":          {post, l.handleDetokenize},
		"/apply-template":      {post, l.handleApplyTemplate},
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
			if l.faults.warmingUp() {
				writeRaw(w, http.StatusServiceUnavailable, "application/json; charset=utf-8",
					[]byte(`{"error":{"message":"Loading model","type":"unavailable_error","code":503}}`))
				return false
			}
			if l.cfg.APIKey == "" || public[r.URL.Path] {
				return true
			}
			key := r.Header.Get("Authorization")
			if key == "" {
				key = r.Header.Get("X-Api-Key")
			}
			if strings.TrimPrefix(key, "Bearer ") == l.cfg.APIKey {
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

// handleHealth serves /health: {"status":"ok"} once loaded (the gate
// answers 503 before).
func (l *llamaCpp) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", []byte(`{"status":"ok"}`))
}

// nCtxTrain is the model's training context reported as n_ctx_train.
func (l *llamaCpp) nCtxTrain() int { return max(l.cfg.ContextLength, 4096) }

// handleModels serves /v1/models: an Ollama-style "models" list, then
// the OpenAI list whose one card has meta.n_ctx (per slot) and no
// max_model_len.
func (l *llamaCpp) handleModels(w http.ResponseWriter, r *http.Request) {
	m := l.cfg.Model
	card := []kv{
		{"id", m}, {"aliases", []string{m}}, {"tags", []string{}}, {"object", "model"},
		{"created", time.Now().Unix()}, {"owned_by", "llamacpp"},
		{"meta", orderedJSON([]kv{
			{"vocab_type", 2}, {"n_vocab", VocabSize}, {"n_ctx", l.cfg.ContextLength},
			{"n_ctx_train", l.nCtxTrain()}, {"n_embd", 1024}, {"n_params", 1000000},
			{"size", 2000000}, {"ftype", "F16"},
		})},
	}
	if !l.cfg.Unmarked {
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

// handleProps serves /props: the slot context and default settings.
func (l *llamaCpp) handleProps(w http.ResponseWriter, r *http.Request) {
	params := []kv{{"seed", 4294967295}}
	for _, k := range []string{"temperature", "top_k", "top_p", "min_p", "repeat_penalty", "presence_penalty", "frequency_penalty"} {
		params = append(params, kv{k, llamaDefaults[k]})
	}
	params = append(params, kv{"n_predict", -1})
	body := orderedJSON([]kv{
		{"default_generation_settings", orderedJSON([]kv{{"params", orderedJSON(params)}, {"n_ctx", l.cfg.ContextLength}})},
		{"total_slots", l.cfg.Slots}, {"model_alias", l.cfg.Model}, {"model_path", "/models/" + l.cfg.Model},
		{"endpoint_slots", false}, {"endpoint_props", false}, {"endpoint_metrics", l.cfg.EnableMetrics},
		{"build_info", llamaBuild}, {"is_sleeping", false},
	})
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", body)
}
