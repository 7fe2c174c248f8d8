package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// kind names the pydantic type of a request field, for checkFields.
type kind int

const (
	kNum  kind = iota // float
	kInt              // int
	kBool             // bool
	kStr              // str
	kStrs             // str | list[str]
	kInts             // list[int]
	kObj              // dict
)

// checkFields validates the types of the listed fields of a request body,
// as pydantic does for an OpenAI request model. null is accepted for all.
func checkFields(m map[string]json.RawMessage, spec map[string]kind) *apiError {
	for k, want := range spec {
		v, ok := m[k]
		if !ok || isNull(v) {
			continue
		}
		good := false
		typ, msg := "", ""
		switch want {
		case kNum:
			good, typ, msg = jsonKind(v) == "number", "float_parsing", "Input should be a valid number"
		case kInt:
			_, good = decodeInt(v)
			typ, msg = "int_parsing", "Input should be a valid integer"
		case kBool:
			_, good = decodeBool(v)
			typ, msg = "bool_parsing", "Input should be a valid boolean"
		case kStr:
			good, typ, msg = jsonKind(v) == "string", "string_type", "Input should be a valid string"
		case kStrs:
			_, _, good = decodeStrings(v)
			typ, msg = "string_type", "Input should be a valid string"
		case kInts:
			_, good = decodeInts(v)
			typ, msg = "list_type", "Input should be a valid list"
		case kObj:
			good, typ, msg = jsonKind(v) == "object", "dict_type", "Input should be a valid dictionary"
		}
		if !good {
			return validationError(fieldError{typ: typ, loc: []any{"body", k}, msg: msg})
		}
	}
	return nil
}

// checkOpenAIContentType is SGLang's validate_json_request dependency.
func checkOpenAIContentType(r *http.Request) *apiError {
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	mt, _, _ := strings.Cut(ct, ";")
	if mt != "application/json" {
		return validationError(fieldError{typ: "value_error", loc: []any{"header", "content-type"}, msg: "Unsupported Media Type: Only 'application/json' is allowed"})
	}
	return nil
}

// boolField returns a boolean field of a validated body, or def.
func boolField(m map[string]json.RawMessage, key string, def bool) bool {
	if b, ok := decodeBool(m[key]); ok {
		return b
	}
	return def
}

// orNull returns raw, or JSON null when raw is absent.
func orNull(raw json.RawMessage) json.RawMessage {
	if raw == nil {
		return json.RawMessage("null")
	}
	return raw
}

// truthy reports whether a JSON value is truthy in Python.
func truthy(raw json.RawMessage) bool {
	switch jsonKind(raw) {
	case "", "null":
		return false
	case "bool":
		b, _ := decodeBool(raw)
		return b
	case "number":
		n, _ := parseNum(raw)
		return n.f != 0
	case "string":
		s, _ := decodeString(raw)
		return s != ""
	case "array":
		a, _ := decodeArray(raw)
		return len(a) > 0
	}
	m, _ := decodeObject(raw)
	return len(m) > 0
}

// openAISampling maps the sampling fields shared by chat and completions to
// a sampling_params object; defs gives the values used for absent fields.
func openAISampling(m map[string]json.RawMessage, maxNew json.RawMessage, defs map[string]string) map[string]json.RawMessage {
	sp := map[string]json.RawMessage{"max_new_tokens": orNull(maxNew)}
	for dst, src := range map[string]string{
		"temperature": "temperature", "top_p": "top_p", "top_k": "top_k", "min_p": "min_p",
		"min_new_tokens": "min_tokens", "stop": "stop", "stop_token_ids": "stop_token_ids",
		"presence_penalty": "presence_penalty", "frequency_penalty": "frequency_penalty",
		"repetition_penalty": "repetition_penalty", "n": "n", "no_stop_trim": "no_stop_trim",
		"ignore_eos": "ignore_eos", "skip_special_tokens": "skip_special_tokens",
		"sampling_seed": "seed", "logit_bias": "logit_bias",
	} {
		v, ok := m[src]
		if !ok || isNull(v) {
			if d, ok := defs[src]; ok {
				v = json.RawMessage(d)
			}
		}
		if v != nil {
			sp[dst] = v
		}
	}
	return sp
}

// openAISpec lists the typed fields common to chat and completions.
var openAISpec = map[string]kind{
	"model": kStr, "temperature": kNum, "top_p": kNum, "top_k": kInt, "min_p": kNum,
	"min_tokens": kInt, "stop": kStrs, "stop_token_ids": kInts, "presence_penalty": kNum,
	"frequency_penalty": kNum, "repetition_penalty": kNum, "n": kInt, "no_stop_trim": kBool,
	"ignore_eos": kBool, "skip_special_tokens": kBool, "seed": kInt, "stream": kBool,
	"stream_options": kObj, "max_tokens": kInt, "rid": kStr, "logit_bias": kObj,
}

// usage is UsageInfo; reasoning_tokens is flat, as in SGLang.
type usage struct {
	PromptTokens        int  `json:"prompt_tokens"`
	TotalTokens         int  `json:"total_tokens"`
	CompletionTokens    int  `json:"completion_tokens"`
	PromptTokensDetails *any `json:"prompt_tokens_details"`
	ReasoningTokens     int  `json:"reasoning_tokens"`
}

// usageOf sums the usage of items, counting each prompt once per n samples.
func usageOf(items []*item, n int) usage {
	var u usage
	for i, it := range items {
		if n <= 1 || i%n == 0 {
			u.PromptTokens += len(it.prompt)
		}
		u.CompletionTokens += it.produced
		u.ReasoningTokens += it.reasoningTokens()
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// openAIRequest is a chat or completions request turned into /generate form.
type openAIRequest struct {
	body  map[string]json.RawMessage
	model string
	n     int
	gen   *generateReq
}

// parseOpenAI does the checks shared by chat and completions: content type,
// JSON body and field types.
func parseOpenAI(r *http.Request, body []byte, typeMsg string, extra map[string]kind) (*openAIRequest, *apiError) {
	if err := checkOpenAIContentType(r); err != nil {
		return nil, err
	}
	m, err := decodeBody(body, typeMsg)
	if err != nil {
		return nil, err
	}
	if err := checkFields(m, openAISpec); err != nil {
		return nil, err
	}
	if err := checkFields(m, extra); err != nil {
		return nil, err
	}
	o := &openAIRequest{body: m, model: "default", n: max(intOr(m["n"], 1), 1)}
	if s, ok := decodeString(m["model"]); ok {
		o.model = s
	}
	if boolField(m, "stream", false) {
		return nil, errNoStreaming
	}
	o.gen = &generateReq{}
	if rid, ok := decodeString(m["rid"]); ok {
		o.gen.hasRID, o.gen.rids = true, []string{rid}
	}
	return o, nil
}

// chatSpec lists the typed chat-only fields.
var chatSpec = map[string]kind{
	"max_completion_tokens": kInt, "separate_reasoning": kBool, "continue_final_message": kBool,
	"chat_template_kwargs": kObj, "input_ids": kInts, "return_prompt_token_ids": kBool,
	"return_meta_info": kBool, "logprobs": kBool,
}

// parseMessages validates and flattens chat messages.
func parseMessages(raw json.RawMessage) ([]chatMessage, *apiError) {
	if raw == nil {
		return nil, validationError(fieldError{typ: "missing", loc: []any{"body", "messages"}, msg: "Field required"})
	}
	list, ok := decodeArray(raw)
	if !ok {
		return nil, validationError(fieldError{typ: "list_type", loc: []any{"body", "messages"}, msg: "Input should be a valid list"})
	}
	msgs := make([]chatMessage, len(list))
	for i, e := range list {
		loc := []any{"body", "messages", i}
		m, ok := decodeObject(e)
		if !ok {
			return nil, validationError(fieldError{typ: "model_attributes_type", loc: loc, msg: "Input should be a valid dictionary or object to extract fields from"})
		}
		role, ok := decodeString(m["role"])
		role = strings.ToLower(role)
		if _, known := roleTokens[role]; !ok || (!known && role != "latest_reminder") {
			return nil, validationError(fieldError{typ: "value_error", loc: append(loc, "role"),
				msg: "Value error, 'role' must be one of 'system', 'assistant', 'tool', 'function', 'developer', 'latest_reminder' (case-insensitive)."})
		}
		if role == "latest_reminder" {
			role = "system"
		}
		msgs[i].role = role
		c := m["content"]
		switch jsonKind(c) {
		case "", "null":
		case "string":
			msgs[i].content, _ = decodeString(c)
		case "array":
			parts, _ := decodeArray(c)
			var b strings.Builder
			for _, p := range parts {
				pm, ok := decodeObject(p)
				if !ok {
					return nil, validationError(fieldError{typ: "model_attributes_type", loc: append(loc, "content"), msg: "Input should be a valid dictionary or object to extract fields from"})
				}
				if t, _ := decodeString(pm["type"]); t == "text" {
					s, _ := decodeString(pm["text"])
					b.WriteString(s)
				}
			}
			msgs[i].content = b.String()
		default:
			return nil, validationError(fieldError{typ: "string_type", loc: append(loc, "content"), msg: "Input should be a valid string"})
		}
	}
	return msgs, nil
}

// chatPrompt renders the prompt ids of a chat request (or of /v1/tokenize
// with messages): the fake chat template with the generation prompt, unless
// continue_final_message. chat_template_kwargs.enable_thinking (or
// reasoning_effort "none") false disables thinking.
func (s *Server) chatPrompt(m map[string]json.RawMessage, msgs []chatMessage) []int {
	t := chatTemplate{addGenerationPrompt: true, reasoningModel: s.cfg.ReasoningParser}
	if boolField(m, "continue_final_message", false) && len(msgs) > 0 && msgs[len(msgs)-1].role == "assistant" {
		t.continueFinalMessage, t.addGenerationPrompt = true, false
	}
	if e, ok := decodeString(m["reasoning_effort"]); ok && e == "none" {
		t.disableThinking = true
	}
	if kw, ok := decodeObject(m["chat_template_kwargs"]); ok {
		for _, k := range []string{"enable_thinking", "thinking"} {
			if v, ok := decodeBool(kw[k]); ok {
				t.disableThinking = !v
				break
			}
		}
	}
	return applyChatTemplate(msgs, t)
}

// splitReasoning separates "<think>…</think>" at the start of text, as a
// reasoning parser does for a non-streaming answer.
func splitReasoning(text string) (reasoning, content string) {
	rest, ok := strings.CutPrefix(text, tokenNames[ThinkStartID])
	if !ok {
		return "", text
	}
	r, c, found := strings.Cut(rest, tokenNames[ThinkEndID])
	if !found {
		return strings.TrimSpace(rest), ""
	}
	return strings.TrimSpace(r), strings.TrimSpace(c)
}

// chatMessageOut is ChatMessage.
type chatMessageOut struct {
	Role             string  `json:"role"`
	Content          string  `json:"content"`
	ReasoningContent *string `json:"reasoning_content"`
	ToolCalls        *[]any  `json:"tool_calls"`
}

type chatChoice struct {
	Index          int            `json:"index"`
	Message        chatMessageOut `json:"message"`
	Logprobs       *any           `json:"logprobs"`
	FinishReason   *string        `json:"finish_reason"`
	MatchedStop    any            `json:"matched_stop"`
	PromptTokenIDs []int          `json:"prompt_token_ids,omitempty"`
	MetaInfo       *metaInfo      `json:"meta_info,omitempty"`
}

type chatResponse struct {
	ID       string            `json:"id"`
	Object   string            `json:"object"`
	Created  int64             `json:"created"`
	Model    string            `json:"model"`
	Choices  []chatChoice      `json:"choices"`
	Usage    usage             `json:"usage"`
	Metadata map[string]string `json:"metadata"`
}

func strPtr(s string) *string { return &s }

// handleChat serves /v1/chat/completions.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	g := s.beginGeneration(w, r)
	if g == nil {
		return
	}
	items, o, err := s.prepareChat(g, r)
	if err != nil {
		writeOpenAIError(w, err)
		g.end(outError)
		return
	}
	defer s.reqs.remove(items)
	reasoning := s.cfg.ReasoningParser && boolField(o.body, "separate_reasoning", true)
	if !s.runOpenAI(w, r, g, items) {
		return
	}
	resp := chatResponse{
		ID: items[0].rid, Object: "chat.completion", Created: time.Now().Unix(), Model: o.model,
		Choices: make([]chatChoice, len(items)), Usage: usageOf(items, o.n),
		Metadata: map[string]string{"weight_version": "default"},
	}
	promptIDs := boolField(o.body, "return_prompt_token_ids", false)
	metaInfo := boolField(o.body, "return_meta_info", false)
	for i, it := range items {
		text := it.finalText()
		var rc *string
		if reasoning {
			var rtext string
			rtext, text = splitReasoning(text)
			if rtext != "" {
				rc = &rtext
			}
		}
		c := chatChoice{
			Index:        i,
			Message:      chatMessageOut{Role: "assistant", Content: text, ReasoningContent: rc},
			FinishReason: strPtr(it.finish.typ()),
			MatchedStop:  it.finish.matched(),
		}
		if promptIDs {
			c.PromptTokenIDs = it.prompt
		}
		if metaInfo {
			c.MetaInfo = it.meta()
		}
		resp.Choices[i] = c
	}
	writeJSON(w, http.StatusOK, resp)
	g.finishItems(items, true)
}

// prepareChat validates a chat request and builds its items.
func (s *Server) prepareChat(g *genRequest, r *http.Request) ([]*item, *openAIRequest, *apiError) {
	o, err := parseOpenAI(r, g.body, "Input should be a valid dictionary or object to extract fields from", chatSpec)
	if err != nil {
		return nil, nil, err
	}
	msgs, err := parseMessages(o.body["messages"])
	if err != nil {
		return nil, nil, err
	}
	if len(msgs) == 0 {
		return nil, nil, httpError(http.StatusBadRequest, "BadRequestError", "Messages cannot be empty.")
	}
	prompt, ok := decodeInts(o.body["input_ids"])
	if !ok {
		prompt = s.chatPrompt(o.body, msgs)
	}
	maxNew := o.body["max_tokens"]
	if mc := o.body["max_completion_tokens"]; truthy(mc) {
		maxNew = mc
	}
	sp := openAISampling(o.body, maxNew, nil)
	o.gen.hasIDs, o.gen.ids = true, [][]int{prompt}
	o.gen.hasSPs, o.gen.sps = true, []map[string]json.RawMessage{sp}
	o.gen.promptIDs = boolField(o.body, "return_prompt_token_ids", false)
	items, _, err := s.prepareGenerate(g, o.gen)
	if err != nil {
		return nil, nil, httpError(http.StatusBadRequest, "BadRequestError", err.msg)
	}
	return items, o, nil
}

// completionSpec lists the typed completions-only fields.
var completionSpec = map[string]kind{"echo": kBool, "suffix": kStr}

type completionChoice struct {
	Index        int     `json:"index"`
	Text         string  `json:"text"`
	Logprobs     *any    `json:"logprobs"`
	FinishReason *string `json:"finish_reason"`
	MatchedStop  any     `json:"matched_stop"`
}

type completionResponse struct {
	ID       string             `json:"id"`
	Object   string             `json:"object"`
	Created  int64              `json:"created"`
	Model    string             `json:"model"`
	Choices  []completionChoice `json:"choices"`
	Usage    usage              `json:"usage"`
	Metadata map[string]string  `json:"metadata"`
}

// completionPrompt is the prompt of a completions request.
type completionPrompt struct {
	texts   []string // text prompts (BOS added by the tokenizer)
	ids     [][]int  // token prompts
	isBatch bool
	empty   bool // "Prompt cannot be empty"
}

// parseCompletionPrompt accepts str | list[str] | list[int] | list[list[int]].
func parseCompletionPrompt(raw json.RawMessage) (*completionPrompt, *apiError) {
	bad := validationError(fieldError{typ: "string_type", loc: []any{"body", "prompt"}, msg: "Input should be a valid string"})
	if raw == nil {
		return nil, validationError(fieldError{typ: "missing", loc: []any{"body", "prompt"}, msg: "Field required"})
	}
	p := &completionPrompt{}
	if s, ok := decodeString(raw); ok {
		p.texts, p.empty = []string{s}, s == ""
		return p, nil
	}
	a, ok := decodeArray(raw)
	if !ok {
		return nil, bad
	}
	if len(a) == 0 {
		p.empty = true
		return p, nil
	}
	switch jsonKind(a[0]) {
	case "number":
		ids, ok := decodeInts(raw)
		if !ok {
			return nil, bad
		}
		p.ids = [][]int{ids}
	case "array":
		p.isBatch = true
		p.empty = true
		for _, e := range a {
			ids, ok := decodeInts(e)
			if !ok {
				return nil, bad
			}
			p.ids = append(p.ids, ids)
			p.empty = p.empty && len(ids) == 0
		}
	default:
		list, _, ok := decodeStrings(raw)
		if !ok {
			return nil, bad
		}
		p.texts, p.isBatch, p.empty = list, true, true
		for _, s := range list {
			p.empty = p.empty && s == ""
		}
	}
	return p, nil
}

// handleCompletions serves /v1/completions.
func (s *Server) handleCompletions(w http.ResponseWriter, r *http.Request) {
	g := s.beginGeneration(w, r)
	if g == nil {
		return
	}
	o, err := parseOpenAI(r, g.body, "Input should be a valid dictionary or object to extract fields from", completionSpec)
	var prompt *completionPrompt
	if err == nil {
		prompt, err = parseCompletionPrompt(o.body["prompt"])
	}
	if err == nil {
		if n, ok := decodeInt(o.body["max_tokens"]); ok && n <= 0 {
			err = validationError(fieldError{typ: "value_error", loc: []any{"body", "max_tokens"}, msg: "Value error, max_tokens must be positive"})
		} else if prompt.empty {
			err = httpError(http.StatusBadRequest, "BadRequestError", "Prompt cannot be empty")
		}
	}
	var items []*item
	if err == nil {
		maxNew := o.body["max_tokens"]
		if isNull(maxNew) {
			maxNew = json.RawMessage("16")
		}
		sp := openAISampling(o.body, maxNew, nil)
		gen := o.gen
		gen.hasSPs, gen.sps = true, []map[string]json.RawMessage{sp}
		if prompt.ids != nil {
			gen.hasIDs, gen.ids, gen.idsList = true, prompt.ids, prompt.isBatch
		} else {
			gen.hasText, gen.text, gen.textList = true, prompt.texts, prompt.isBatch
		}
		var gerr *apiError
		if items, _, gerr = s.prepareGenerate(g, gen); gerr != nil {
			err = httpError(http.StatusBadRequest, "BadRequestError", gerr.msg)
		}
	}
	if err != nil {
		writeOpenAIError(w, err)
		g.end(outError)
		return
	}
	defer s.reqs.remove(items)
	echo := boolField(o.body, "echo", false)
	echoText := func(it *item) string {
		if !echo {
			return ""
		}
		i := it.index / o.n
		if prompt.texts != nil {
			return prompt.texts[i]
		}
		return Decode(prompt.ids[i], true)
	}
	if !s.runOpenAI(w, r, g, items) {
		return
	}
	resp := completionResponse{
		ID: items[0].rid, Object: "text_completion", Created: time.Now().Unix(), Model: o.model,
		Choices: make([]completionChoice, len(items)), Usage: usageOf(items, o.n),
		Metadata: map[string]string{"weight_version": "default"},
	}
	for i, it := range items {
		resp.Choices[i] = completionChoice{Index: i, Text: echoText(it) + it.finalText(),
			FinishReason: strPtr(it.finish.typ()), MatchedStop: it.finish.matched()}
	}
	writeJSON(w, http.StatusOK, resp)
	g.finishItems(items, true)
}

// runOpenAI runs a non-streaming chat or completions request's items to the
// end. When one could not be scheduled, or they did not finish, it has
// answered (or ended) the request and returns false.
func (s *Server) runOpenAI(w http.ResponseWriter, r *http.Request, g *genRequest, items []*item) bool {
	for _, it := range items {
		if it.schedErr != "" {
			writeOpenAIError(w, valueError("%s", it.schedErr))
			g.end(outError)
			return false
		}
	}
	if !s.runAll(r.Context(), items) {
		g.finishItems(items, false)
		return false
	}
	return true
}
