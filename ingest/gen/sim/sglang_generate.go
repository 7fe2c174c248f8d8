package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// SGLang's /generate, and the item building its OpenAI routes share
// (prepareGenerate, buildItem: TokenizerManager's checks); the answer's
// meta_info.

// generateReq is a /generate body after FastAPI-level type validation: one
// prompt (input_ids or text), as gen sends.
type generateReq struct {
	text      *string // nil when absent
	ids       []int
	hasIDs    bool
	hasEmbeds bool
	sp        map[string]json.RawMessage // nil when absent
	rid       string
	hasRID    bool
	stream    bool
	promptIDs bool
}

// parseGenerateRequest validates the types of a /generate body, as FastAPI
// does for GenerateReqInput before the handler runs.
func parseGenerateRequest(contentType string, body []byte) (*generateReq, *apiError) {
	if err := checkJSONContentType(contentType); err != nil {
		return nil, err
	}
	m, err := decodeBody(body, "Input should be a dictionary or an instance of GenerateReqInput")
	if err != nil {
		return nil, err
	}
	bad := func(field, typ, msg string) *apiError {
		return validationError(fieldError{typ: typ, loc: []any{"body", field}, msg: msg})
	}
	req := &generateReq{}
	var ok bool
	if v := m["text"]; !isNull(v) {
		t, ok := asString(v)
		if !ok {
			if _, _, ok := asStrings(v); ok {
				return nil, errBatch
			}
			return nil, bad("text", "string_type", "Input should be a valid string")
		}
		req.text = &t
	}
	if v := m["input_ids"]; !isNull(v) {
		req.hasIDs = true
		a, ok := asArray(v)
		if !ok {
			return nil, bad("input_ids", "list_type", "Input should be a valid list")
		}
		if len(a) > 0 && jsonKind(a[0]) == "array" {
			return nil, errBatch
		}
		if req.ids, ok = asInts(v); !ok {
			return nil, bad("input_ids", "int_type", "Input should be a valid integer")
		}
	}
	req.hasEmbeds = !isNull(m["input_embeds"])
	if v := m["sampling_params"]; !isNull(v) {
		if req.sp, ok = asObject(v); !ok {
			if _, isList := asArray(v); isList {
				return nil, errBatch
			}
			return nil, bad("sampling_params", "dict_type", "Input should be a valid dictionary")
		}
	}
	if v := m["rid"]; !isNull(v) {
		req.hasRID = true
		if req.rid, ok = asString(v); !ok {
			if _, _, ok := asStrings(v); ok {
				return nil, errBatch
			}
			return nil, bad("rid", "string_type", "Input should be a valid string")
		}
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"stream", &req.stream}, {"return_prompt_token_ids", &req.promptIDs}} {
		if v := m[f.key]; !isNull(v) {
			if *f.dst, ok = asBool(v); !ok {
				return nil, bad(f.key, "bool_parsing", "Input should be a valid boolean, unable to interpret input")
			}
		}
	}
	return req, nil
}

// buildItem validates a prompt and its sampling parameters and makes the
// item, the way TokenizerManager.generate_request does. defaultMax is the
// max_new_tokens of a request that omits it.
func (s *sglang) buildItem(g *genRequest, prompt []int, rawSP map[string]json.RawMessage, rid string, defaultMax int, promptIDs bool) (*item, *apiError) {
	ctxLen := s.cfg.ContextLength
	nTok := len(prompt)
	if nTok >= ctxLen {
		return nil, valueError("The input (%d tokens) is longer than the model's context length (%d tokens).", nTok, ctxLen)
	}
	// The tokenizer checks the raw max_new_tokens before parsing the
	// sampling params; null or absent skips the check.
	if maxNew, ok := asInt(rawSP["max_new_tokens"]); ok && maxNew+nTok > ctxLen {
		return nil, valueError("Requested token count exceeds the model's maximum context length of %d tokens. "+
			"You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. "+
			"Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
			ctxLen, maxNew+nTok, nTok, maxNew)
	}
	sp, err := parseSamplingParams(rawSP, defaultMax)
	if err != nil {
		return nil, err
	}
	if sp.n > 1 {
		return nil, errParallelSampling
	}
	sp.noToolCall, sp.oneCall = g.noToolCall, g.oneCall
	var schedErr string
	if m := s.cfg.maxReqInputLen(); nTok >= m {
		schedErr = fmt.Sprintf("Input length (%d tokens) exceeds the maximum allowed length (%d tokens). Use a shorter input or enable --allow-auto-truncate.", nTok, m)
	}
	budget := max(0, min(sp.maxNewTokens, ctxLen-1-nTok-1))
	sp.minNewTokens = min(sp.minNewTokens, budget)
	it := &item{
		rid:       rid,
		prompt:    prompt,
		sp:        sp,
		budget:    budget,
		schedErr:  schedErr,
		abortAt:   -1,
		arrival:   g.arrival,
		promptIDs: promptIDs,
	}
	it.plan = s.eng.plan(prompt, sp, budget)
	g.applyFault(it)
	if err := s.eng.register(it); err != nil {
		return nil, err
	}
	return it, nil
}

// prepareGenerate turns a /generate request into its item: rid,
// tokenization and validation. Errors are Python ValueErrors (400) as in
// SGLang, or the simulator's own refusals.
func (s *sglang) prepareGenerate(g *genRequest, req *generateReq) (*item, *apiError) {
	var prompt []int
	switch {
	case req.hasIDs:
		if len(req.ids) == 0 {
			return nil, valueError("input_ids cannot be empty.")
		}
		prompt = req.ids
	case req.text != nil:
		prompt = Encode(*req.text, true)
	case req.hasEmbeds:
		return nil, valueError("input_embeds is provided while disable_radix_cache is False. " +
			"Please add `--disable-radix-cache` when you launch the server if you want to use input_embeds as inputs.")
	default:
		return nil, valueError("Either text, input_ids or input_embeds should be provided.")
	}
	rid := req.rid
	if !req.hasRID {
		rid = newRID()
	}
	return s.buildItem(g, prompt, req.sp, rid, s.cfg.MaxNewTokensDefault, req.promptIDs)
}

// genOut is one /generate result object; keys in SGLang's order.
type genOut struct {
	Text           string    `json:"text"`
	OutputIDs      []int     `json:"output_ids"`
	MetaInfo       *metaInfo `json:"meta_info"`
	PromptTokenIDs []int     `json:"prompt_token_ids,omitempty"`
}

// metaInfo is meta_info of a generation result, keys in insertion order.
type metaInfo struct {
	ID               string        `json:"id"`
	FinishReason     *finishReason `json:"finish_reason"`
	PromptTokens     int           `json:"prompt_tokens"`
	WeightVersion    string        `json:"weight_version"`
	NumRetractions   int           `json:"num_retractions"`
	ReasoningTokens  int           `json:"reasoning_tokens"`
	CompletionTokens int           `json:"completion_tokens"`
	CachedTokens     int           `json:"cached_tokens"`
	DPRank           *int          `json:"dp_rank"`
	E2ELatency       *float64      `json:"e2e_latency,omitempty"`
	*specMeta
	ResponseSentToClientTS *float64 `json:"response_sent_to_client_ts,omitempty"`
}

// unixNow returns the current time as float unix seconds.
func unixNow() *float64 {
	t := float64(time.Now().UnixMicro()) / 1e6
	return &t
}

// meta builds the meta_info of a finished item; draftTokens is
// Config.SpecDraftTokens.
func (it *item) meta(draftTokens int) *metaInfo {
	e2e := it.finished.Sub(it.arrival).Seconds()
	return &metaInfo{
		ID: it.rid, FinishReason: it.finish, PromptTokens: len(it.prompt), WeightVersion: "default",
		ReasoningTokens: it.plan.reasoningTokens(it.produced), CompletionTokens: it.produced,
		E2ELatency: &e2e, specMeta: specMetaOf(it.produced, it.spec(draftTokens)), ResponseSentToClientTS: unixNow(),
	}
}

// result builds the non-streaming /generate result of a finished item.
func (it *item) result(draftTokens int) *genOut {
	out := &genOut{Text: it.finalText(), OutputIDs: it.plan.ids[:it.produced:it.produced], MetaInfo: it.meta(draftTokens)}
	if it.promptIDs {
		out.PromptTokenIDs = it.prompt
	}
	return out
}

// handleGenerate serves /generate (POST and PUT).
func (s *sglang) handleGenerate(w http.ResponseWriter, r *http.Request) {
	g := s.faults.admit(w, r)
	if g == nil {
		return
	}
	req, verr := parseGenerateRequest(r.Header.Get("Content-Type"), g.body)
	if verr != nil {
		writeOpenAIError(w, verr)
		g.end(outError)
		return
	}
	if req.stream {
		writeOpenAIError(w, errNoStreaming)
		g.end(outError)
		return
	}
	it, err := s.prepareGenerate(g, req)
	if err != nil {
		writeGenerateError(w, err)
		g.end(outError)
		return
	}
	defer s.eng.unregister(it)
	if it.schedErr != "" {
		writeGenerateError(w, valueError("%s", it.schedErr))
		g.end(outError)
		return
	}
	if !s.eng.run(r.Context(), it) {
		g.finishItem(it, false)
		return
	}
	writeJSON(w, http.StatusOK, it.result(s.cfg.SpecDraftTokens))
	g.finishItem(it, true)
}
