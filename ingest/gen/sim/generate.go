package sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"time"
)

// generateReq is a /generate body after FastAPI-level type validation.
type generateReq struct {
	text      []string
	textList  bool
	hasText   bool
	ids       [][]int
	idsList   bool
	hasIDs    bool
	hasEmbeds bool
	sps       []map[string]json.RawMessage // nil map means {}
	spsList   bool
	hasSPs    bool
	rids      []string
	ridsList  bool
	hasRID    bool
	stream    bool
	promptIDs bool
}

// checkJSONContentType applies FastAPI's body parsing rule: a body is JSON
// when Content-Type is missing or application/json or application/*+json.
func checkJSONContentType(ct string) *apiError {
	if ct == "" {
		return nil
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || (strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json"))) {
		return nil
	}
	return validationError(fieldError{typ: "dataclass_type", loc: []any{"body"}, msg: "Input should be a dictionary or an instance of GenerateReqInput"})
}

// decodeBody decodes a JSON object body, or returns FastAPI's validation
// error for a syntax error or another JSON type.
func decodeBody(body []byte, typeMsg string) (map[string]json.RawMessage, *apiError) {
	var m map[string]json.RawMessage
	err := json.Unmarshal(body, &m)
	if err == nil && m != nil {
		return m, nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) || (err != nil && !isTypeError(err)) {
		pos := 0
		if se != nil {
			pos = int(se.Offset)
		}
		return nil, validationError(fieldError{typ: "json_invalid", loc: []any{"body", pos}, msg: "JSON decode error"})
	}
	return nil, validationError(fieldError{typ: "dataclass_type", loc: []any{"body"}, msg: typeMsg})
}

// isTypeError reports whether err is a JSON value of the wrong type.
func isTypeError(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te)
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
		req.hasText = true
		if req.text, req.textList, ok = decodeStrings(v); !ok {
			return nil, bad("text", "string_type", "Input should be a valid string")
		}
	}
	if v := m["input_ids"]; !isNull(v) {
		req.hasIDs = true
		a, ok := decodeArray(v)
		if !ok {
			return nil, bad("input_ids", "list_type", "Input should be a valid list")
		}
		if len(a) > 0 && jsonKind(a[0]) == "array" {
			req.idsList = true
			for _, e := range a {
				ids, ok := decodeInts(e)
				if !ok {
					return nil, bad("input_ids", "list_type", "Input should be a valid list of lists of integers")
				}
				req.ids = append(req.ids, ids)
			}
		} else {
			ids, ok := decodeInts(v)
			if !ok {
				return nil, bad("input_ids", "int_type", "Input should be a valid integer")
			}
			req.ids = [][]int{ids}
		}
	}
	req.hasEmbeds = !isNull(m["input_embeds"])
	if v := m["sampling_params"]; !isNull(v) {
		req.hasSPs = true
		if obj, ok := decodeObject(v); ok {
			req.sps = []map[string]json.RawMessage{obj}
		} else if a, ok := decodeArray(v); ok {
			req.spsList = true
			for _, e := range a {
				obj, ok := decodeObject(e)
				if !ok {
					return nil, bad("sampling_params", "dict_type", "Input should be a valid dictionary")
				}
				req.sps = append(req.sps, obj)
			}
		} else {
			return nil, bad("sampling_params", "dict_type", "Input should be a valid dictionary")
		}
	}
	if v := m["rid"]; !isNull(v) {
		req.hasRID = true
		if req.rids, req.ridsList, ok = decodeStrings(v); !ok {
			return nil, bad("rid", "string_type", "Input should be a valid string")
		}
	}
	for _, f := range []struct {
		key string
		dst *bool
	}{{"stream", &req.stream}, {"return_prompt_token_ids", &req.promptIDs}} {
		if v := m[f.key]; !isNull(v) {
			if *f.dst, ok = decodeBool(v); !ok {
				return nil, bad(f.key, "bool_parsing", "Input should be a valid boolean, unable to interpret input")
			}
		}
	}
	return req, nil
}

// errNoStreaming answers a request with "stream": true: gen reads whole
// answers, so the simulator does not stream.
var errNoStreaming = httpError(http.StatusBadRequest, "BadRequestError", "sim: streaming is not simulated")

// newRID returns a random request id like uuid4().hex.
func newRID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return hex.EncodeToString(b[:])
}

// itemSpec is one prompt of a request before expansion into samples.
type itemSpec struct {
	prompt []int
	sp     map[string]json.RawMessage
}

// buildItems validates prompts and sampling parameters and expands them into
// items, the way TokenizerManager.generate_request does: any error fails the
// whole request. rids holds one rid per prompt (ignored when n > 1, where
// SGLang draws fresh uuids). defaultMax is the max_new_tokens of a request
// that omits it.
func (s *Server) buildItems(g *genRequest, specs []itemSpec, rids []string, n int, defaultMax int, promptIDs bool) ([]*item, *apiError) {
	ctxLen := s.cfg.ContextLength
	items := make([]*item, 0, len(specs)*n)
	for i, spec := range specs {
		nTok := len(spec.prompt)
		if nTok >= ctxLen {
			return nil, valueError("The input (%d tokens) is longer than the model's context length (%d tokens).", nTok, ctxLen)
		}
		// The tokenizer checks the raw max_new_tokens before parsing the
		// sampling params; null or absent skips the check.
		if maxNew, ok := decodeInt(spec.sp["max_new_tokens"]); ok && maxNew+nTok > ctxLen {
			return nil, valueError("Requested token count exceeds the model's maximum context length of %d tokens. "+
				"You requested a total of %d tokens: %d tokens from the input messages and %d tokens for the completion. "+
				"Please reduce the number of tokens in the input messages or the completion to fit within the limit.",
				ctxLen, maxNew+nTok, nTok, maxNew)
		}
		sp, err := parseSamplingParams(spec.sp, defaultMax)
		if err != nil {
			return nil, err
		}
		var schedErr string
		if m := s.cfg.maxReqInputLen(); nTok >= m {
			schedErr = fmt.Sprintf("Input length (%d tokens) exceeds the maximum allowed length (%d tokens). Use a shorter input or enable --allow-auto-truncate.", nTok, m)
		}
		budget := max(0, min(sp.maxNewTokens, ctxLen-1-nTok-1))
		sp.minNewTokens = min(sp.minNewTokens, budget)
		for j := range n {
			rid := newRID()
			if n == 1 {
				rid = rids[i]
			}
			it := &item{
				rid:       rid,
				index:     len(items),
				prompt:    spec.prompt,
				sp:        sp,
				budget:    budget,
				schedErr:  schedErr,
				abortAt:   -1,
				arrival:   g.arrival,
				promptIDs: promptIDs,
			}
			it.plan = s.planOutput(spec.prompt, sp, budget, j)
			items = append(items, it)
		}
	}
	g.applyFault(items)
	if err := s.reqs.add(items); err != nil {
		return nil, err
	}
	return items, nil
}

// prepareGenerate normalizes a /generate request into items: batch shape,
// parallel sampling, rids, tokenization and validation. Errors are Python
// ValueErrors (400) or TypeErrors (500) as in SGLang.
func (s *Server) prepareGenerate(g *genRequest, req *generateReq) ([]*item, bool, *apiError) {
	if !req.hasText && !req.hasIDs {
		if req.hasEmbeds {
			return nil, false, valueError("input_embeds is provided while disable_radix_cache is False. " +
				"Please add `--disable-radix-cache` when you launch the server if you want to use input_embeds as inputs.")
		}
		return nil, false, valueError("Either text, input_ids or input_embeds should be provided.")
	}
	var prompts [][]int
	batch := false
	if req.hasIDs {
		if len(req.ids) == 1 && len(req.ids[0]) == 0 && !req.idsList {
			return nil, false, valueError("input_ids cannot be empty.")
		}
		prompts, batch = req.ids, req.idsList
	} else {
		for _, t := range req.text {
			prompts = append(prompts, Encode(t, true))
		}
		batch = req.textList
	}

	n := 1
	if len(req.sps) > 0 {
		n = intOr(req.sps[0]["n"], 1)
		for _, sp := range req.sps[1:] {
			if intOr(sp["n"], 1) != n {
				return nil, false, valueError("The parallel_sample_num should be the same for all samples in sample params.")
			}
		}
	}
	n = max(n, 1)
	if n > 1 {
		batch = true
	}

	rids := make([]string, len(prompts))
	switch {
	case !batch && req.ridsList:
		return nil, false, typeError("rid must be a string for a single request")
	case !req.hasRID:
		for i := range rids {
			rids[i] = newRID()
		}
	case !batch:
		rids[0] = req.rids[0]
	case !req.ridsList:
		for i := range rids {
			rids[i] = fmt.Sprintf("%s_%d", req.rids[0], i)
		}
	default:
		if len(req.rids) != len(prompts) {
			return nil, false, valueError("The specified rids length mismatch with the batch_size for batch processing.")
		}
		copy(rids, req.rids)
		if dups := duplicates(rids); len(dups) > 0 {
			return nil, false, valueError("Duplicate request IDs detected within the request: %s", pyList(dups))
		}
	}

	specs := make([]itemSpec, len(prompts))
	for i, p := range prompts {
		specs[i].prompt = p
		switch {
		case !req.spsList && len(req.sps) == 1:
			specs[i].sp = req.sps[0]
		case req.spsList:
			if i >= len(req.sps) {
				return nil, false, typeError("list index out of range")
			}
			specs[i].sp = req.sps[i]
		}
	}
	items, err := s.buildItems(g, specs, rids, n, s.cfg.MaxNewTokensDefault, req.promptIDs)
	return items, batch, err
}

// intOr decodes an integer, or returns def.
func intOr(raw json.RawMessage, def int) int {
	if v, ok := decodeInt(raw); ok {
		return v
	}
	return def
}

// duplicates returns the values that occur more than once, in first-seen
// order.
func duplicates(list []string) []string {
	count := map[string]int{}
	var order []string
	for _, s := range list {
		if count[s] == 0 {
			order = append(order, s)
		}
		count[s]++
	}
	var dups []string
	for _, s := range order {
		if count[s] > 1 {
			dups = append(dups, s)
		}
	}
	return dups
}

// pyList formats strings like Python's repr of a list.
func pyList(list []string) string {
	parts := make([]string, len(list))
	for i, s := range list {
		parts[i] = pyStr(s)
	}
	return "[" + strings.Join(parts, ", ") + "]"
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
	ID                     string        `json:"id"`
	FinishReason           *finishReason `json:"finish_reason"`
	PromptTokens           int           `json:"prompt_tokens"`
	WeightVersion          string        `json:"weight_version"`
	NumRetractions         int           `json:"num_retractions"`
	ReasoningTokens        int           `json:"reasoning_tokens"`
	CompletionTokens       int           `json:"completion_tokens"`
	CachedTokens           int           `json:"cached_tokens"`
	DPRank                 *int          `json:"dp_rank"`
	E2ELatency             *float64      `json:"e2e_latency,omitempty"`
	ResponseSentToClientTS *float64      `json:"response_sent_to_client_ts,omitempty"`
}

// unixNow returns the current time as float unix seconds.
func unixNow() *float64 {
	t := float64(time.Now().UnixMicro()) / 1e6
	return &t
}

// finalText is the text of a finished item: trimmed at the matched stop
// unless no_stop_trim, untrimmed for aborts.
func (it *item) finalText() string {
	if it.finish == &it.plan.finish {
		return it.plan.text(it.produced, it.sp, true)
	}
	return it.plan.text(it.produced, it.sp, false)
}

// meta builds the meta_info of a finished item.
func (it *item) meta() *metaInfo {
	e2e := it.finished.Sub(it.arrival).Seconds()
	return &metaInfo{
		ID: it.rid, FinishReason: it.finish, PromptTokens: len(it.prompt), WeightVersion: "default",
		ReasoningTokens: it.plan.reasoningTokens(it.produced), CompletionTokens: it.produced,
		E2ELatency: &e2e, ResponseSentToClientTS: unixNow(),
	}
}

// result builds the non-streaming /generate result of a finished item.
func (it *item) result() *genOut {
	out := &genOut{Text: it.finalText(), OutputIDs: it.plan.ids[:it.produced:it.produced], MetaInfo: it.meta()}
	if it.promptIDs {
		out.PromptTokenIDs = it.prompt
	}
	return out
}

// handleGenerate serves /generate (POST and PUT).
func (s *Server) handleGenerate(w http.ResponseWriter, r *http.Request) {
	g := s.beginGeneration(w, r)
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
	items, batch, err := s.prepareGenerate(g, req)
	if err != nil {
		writeGenerateError(w, err)
		g.end(outError)
		return
	}
	defer s.reqs.remove(items)
	for _, it := range items {
		if it.schedErr != "" {
			writeGenerateError(w, valueError("%s", it.schedErr))
			g.end(outError)
			return
		}
	}
	if !s.runAll(r.Context(), items) {
		g.finishItems(items, false)
		return
	}
	if !batch {
		writeJSON(w, http.StatusOK, items[0].result())
	} else {
		outs := make([]*genOut, len(items))
		for i, it := range items {
			outs[i] = it.result()
		}
		writeJSON(w, http.StatusOK, outs)
	}
	g.finishItems(items, true)
}
