package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// vllm is vLLM's flavor: the OpenAI-compatible server's router, its errors
// and request bodies, and its info routes (/version, /v1/models); the
// generation routes are in vllm_generate.go, the token routes in
// vllm_tokens.go (see flavors.go for the facts and their sources).
// /health and /metrics route to the faults and meters parts. See
// flavorParts for what a flavor may touch.
type vllm struct{ flavorParts }

// routes is vLLM's FastAPI router: the API key applies to paths under
// /v1 and /inference only; a missing route is FastAPI's 404, a wrong
// method its 405.
func (v *vllm) routes() flavorRouter {
	get, post := []string{http.MethodGet}, []string{http.MethodPost}
	table := map[string]route{
		"/health":                {get, v.faults.handleHealth},
		"/v1/models":             {get, v.handleModels},
		"/v1/completions":        {post, v.handleCompletions},
		"/v1/chat/completions":   {post, v.handleChat},
		"/tokenize":              {post, v.handleTokenize},
		"/detokenize":            {post, v.handleDetokenize},
		"/inference/v1/generate": {post, v.handleGenerate},
		"/metrics":               {get, v.meters.vllmPage},
		"/version":               {get, v.handleVersion},
	}
	return flavorRouter{
		table: table,
		gate: func(w http.ResponseWriter, r *http.Request) bool {
			p := r.URL.Path
			if v.cfg.APIKey == "" || r.Method == http.MethodOptions ||
				!(strings.HasPrefix(p, "/v1") || strings.HasPrefix(p, "/inference")) {
				return true
			}
			if r.Header.Get("Authorization") == "Bearer "+v.cfg.APIKey {
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

// handleVersion serves /version.
func (v *vllm) handleVersion(w http.ResponseWriter, r *http.Request) {
	writeRaw(w, http.StatusOK, "application/json", []byte(`{"version":"0.0.0+gendex.sim"}`))
}

// modelCard is one /v1/models card.
func (v *vllm) modelCard(id, root string, parent any, maxLen any) []byte {
	perm := orderedJSON([]kv{
		{"id", "modelperm-" + newRID()}, {"object", "model_permission"}, {"created", v.created},
		{"allow_create_engine", false}, {"allow_sampling", true}, {"allow_logprobs", true},
		{"allow_search_indices", false}, {"allow_view", true}, {"allow_fine_tuning", false},
		{"organization", "*"}, {"group", nil}, {"is_blocking", false},
	})
	card := []kv{
		{"id", id}, {"object", "model"}, {"created", v.created}, {"owned_by", "vllm"},
		{"root", root}, {"parent", parent}, {"max_model_len", maxLen},
		{"permission", jsonList(perm)},
	}
	if !v.cfg.Unmarked {
		card = append(card, kv{"gendex_simulator", true})
	}
	return orderedJSON(card)
}

// handleModels serves /v1/models: the base model, then its LoRA
// adapters (max_model_len null).
func (v *vllm) handleModels(w http.ResponseWriter, r *http.Request) {
	cards := [][]byte{v.modelCard(v.cfg.Model, v.cfg.Model, nil, v.cfg.ContextLength)}
	for _, a := range v.cfg.LoRAAdapters {
		cards = append(cards, v.modelCard(a, "/adapters/"+a, v.cfg.Model, nil))
	}
	writeRaw(w, http.StatusOK, "application/json", orderedJSON([]kv{{"object", "list"}, {"data", jsonList(cards...)}}))
}

// checkBody does the checks every vLLM POST route shares: content type,
// JSON object body, the model field's type and existence. It answers the
// request and returns nil when one fails.
func (v *vllm) checkBody(w http.ResponseWriter, r *http.Request, body []byte) map[string]json.RawMessage {
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
	if name, ok := asString(m["model"]); ok && !v.knows(name) {
		writeVLLMError(w, http.StatusNotFound, "NotFoundError", fmt.Sprintf("The model `%s` does not exist.", name), "model")
		return nil
	}
	return m
}

// knows reports whether name is the served model or a LoRA adapter.
func (v *vllm) knows(name string) bool {
	if name == v.cfg.Model {
		return true
	}
	for _, a := range v.cfg.LoRAAdapters {
		if a == name {
			return true
		}
	}
	return false
}
