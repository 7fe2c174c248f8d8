package sim

import (
	"crypto/subtle"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// sglang is SGLang's flavor, the default: its router and API key, its
// info routes (/v1/models, /v1/tokenize) here, its generation routes in
// sglang_generate.go (/generate) and sglang_openai.go
// (/v1/chat/completions and /v1/completions). /health, /metrics,
// /server_info and /parse_function_call route to the faults, meters and
// tools parts. See flavorParts for what a flavor may touch.
type sglang struct{ flavorParts }

// routes is SGLang's router: auth first, as SGLang's middleware runs
// before routing; unknown paths get FastAPI's 404 {"detail":"Not Found"},
// known paths with another method 405.
func (s *sglang) routes() flavorRouter {
	get, post := []string{http.MethodGet}, []string{http.MethodPost}
	table := map[string]route{
		"/generate":            {post, s.handleGenerate},
		"/v1/chat/completions": {post, s.handleChat},
		"/v1/completions":      {post, s.handleCompletions},
		"/v1/tokenize":         {post, s.handleTokenize},
		"/health":              {get, s.faults.handleHealth},
		"/v1/models":           {get, s.handleModels},
		"/parse_function_call": {post, s.tools.handleParseFunctionCall},
		"/server_info":         {get, s.meters.serverInfo},
		"/get_server_info":     {get, s.meters.serverInfo},
		"/abort_request":       {post, s.handleAbort},
	}
	if s.cfg.EnableMetrics {
		table["/metrics"] = route{get, s.meters.sglangPage}
	}
	return flavorRouter{
		table: table,
		gate: func(w http.ResponseWriter, r *http.Request) bool {
			if !s.authorized(r) {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
				return false
			}
			return true
		},
		notFound:  fastAPINotFound,
		badMethod: fastAPIBadMethod,
	}
}

// authorized applies SGLang's API key check: /health and /metrics (and
// OPTIONS) are always open; everything else needs "Bearer <key>", with the
// scheme matched case-insensitively and the key in constant time.
func (s *sglang) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" || r.Method == http.MethodOptions ||
		strings.HasPrefix(r.URL.Path, "/health") || strings.HasPrefix(r.URL.Path, "/metrics") {
		return true
	}
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}

// modelCard is one entry of /v1/models.
func (s *sglang) modelCard() []byte {
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
func (s *sglang) loraCard(name string) []byte {
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
func (s *sglang) handleModels(w http.ResponseWriter, r *http.Request) {
	data := []byte{'['}
	for _, a := range s.cfg.LoRAAdapters {
		data = append(append(data, s.loraCard(a)...), ',')
	}
	data = append(append(data, s.modelCard()...), ']')
	body := orderedJSON([]kv{{"object", "list"}, {"data", data}})
	writeRaw(w, http.StatusOK, "application/json", body)
}

// handleTokenize serves /v1/tokenize.
func (s *sglang) handleTokenize(w http.ResponseWriter, r *http.Request) {
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
		ids := s.eng.chatPrompt(m, msgs)
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
