package sim

import (
	"encoding/json"
	"net/http"
	"time"
)

// SGLang's OpenAI-compatible generation routes, /v1/chat/completions and
// /v1/completions: what both check and map to a /generate request, then
// each route's answer.

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

// usageOf is the usage of a finished item.
func usageOf(it *item) usage {
	u := usage{PromptTokens: len(it.prompt), CompletionTokens: it.produced, ReasoningTokens: it.reasoningTokens()}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

// openAIRequest is a chat or completions request turned into /generate form.
type openAIRequest struct {
	body  map[string]json.RawMessage
	model string
	gen   *generateReq
	// tools and toolHistory (the calls in the messages) with
	// Config.ToolCalls; tools is nil without it.
	tools       *toolRequest
	toolHistory int
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
	o := &openAIRequest{body: m, model: "default"}
	if s, ok := asString(m["model"]); ok {
		o.model = s
	}
	if boolField(m, "stream", false) {
		return nil, errNoStreaming
	}
	o.gen = &generateReq{}
	if rid, ok := asString(m["rid"]); ok {
		o.gen.hasRID, o.gen.rid = true, rid
	}
	return o, nil
}

// chatSpec lists the typed chat-only fields.
var chatSpec = map[string]kind{
	"max_completion_tokens": kInt, "separate_reasoning": kBool, "continue_final_message": kBool,
	"chat_template_kwargs": kObj, "input_ids": kInts, "return_prompt_token_ids": kBool,
	"return_meta_info": kBool, "logprobs": kBool, "parallel_tool_calls": kBool,
}

func strPtr(s string) *string { return &s }

// completionSpec lists the typed completions-only fields.
var completionSpec = map[string]kind{"echo": kBool, "suffix": kStr}

// runOpenAI runs a non-streaming chat or completions request's item to the
// end. When it could not be scheduled, or did not finish, it has answered
// (or ended) the request and returns false.
func (s *sglang) runOpenAI(w http.ResponseWriter, r *http.Request, g *genRequest, it *item) bool {
	if it.schedErr != "" {
		writeOpenAIError(w, valueError("%s", it.schedErr))
		g.end(outError)
		return false
	}
	if !s.eng.run(r.Context(), it) {
		g.finishItem(it, false)
		return false
	}
	return true
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

// handleChat serves /v1/chat/completions.
func (s *sglang) handleChat(w http.ResponseWriter, r *http.Request) {
	g := s.faults.admit(w, r)
	if g == nil {
		return
	}
	it, o, err := s.prepareChat(g, r)
	if err != nil {
		writeOpenAIError(w, err)
		g.end(outError)
		return
	}
	defer s.eng.unregister(it)
	reasoning := s.cfg.ReasoningParser && boolField(o.body, "separate_reasoning", true)
	if !s.runOpenAI(w, r, g, it) {
		return
	}
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
		Message:      chatMessageOut{Role: "assistant", Content: text, ReasoningContent: rc},
		FinishReason: strPtr(it.finish.typ()),
		MatchedStop:  it.finish.matched(),
	}
	if o.tools.calling() && s.cfg.ToolCallParser != "" {
		if normal, calls := parseCalls(formatOf(s.cfg.ToolCallParser), sglangParser, text, o.tools.names); len(calls) > 0 {
			tc := s.tools.sglangCalls(calls, o.toolHistory)
			c.Message.Content, c.Message.ToolCalls = normal, &tc
			if *c.FinishReason == "stop" {
				c.FinishReason, c.MatchedStop = strPtr("tool_calls"), nil
			}
		}
	}
	if boolField(o.body, "return_prompt_token_ids", false) {
		c.PromptTokenIDs = it.prompt
	}
	if boolField(o.body, "return_meta_info", false) {
		c.MetaInfo = it.meta(s.cfg.SpecDraftTokens)
	}
	writeJSON(w, http.StatusOK, chatResponse{
		ID: it.rid, Object: "chat.completion", Created: time.Now().Unix(), Model: o.model,
		Choices: []chatChoice{c}, Usage: usageOf(it),
		Metadata: map[string]string{"weight_version": "default"},
	})
	g.finishItem(it, true)
}

// prepareChat validates a chat request and builds its item.
func (s *sglang) prepareChat(g *genRequest, r *http.Request) (*item, *openAIRequest, *apiError) {
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
	if s.cfg.ToolCalls {
		if o.tools, err = readTools(o.body); err == nil {
			err = attachToolCalls(o.body["messages"], msgs)
		}
		if err != nil {
			return nil, nil, err
		}
		g.noToolCall, o.toolHistory = o.tools.choice == "none", historyCalls(msgs)
	}
	prompt, ok := asInts(o.body["input_ids"])
	if !ok {
		prompt = s.eng.chatPrompt(o.body, msgs)
	}
	maxNew := o.body["max_tokens"]
	if mc := o.body["max_completion_tokens"]; truthy(mc) {
		maxNew = mc
	}
	sp := openAISampling(o.body, maxNew, nil)
	if o.tools.calling() {
		sp["skip_special_tokens"] = json.RawMessage("false") // as SGLang forces, so call markers survive
	}
	o.gen.hasIDs, o.gen.ids = true, prompt
	o.gen.sp = sp
	o.gen.promptIDs = boolField(o.body, "return_prompt_token_ids", false)
	it, err := s.prepareGenerate(g, o.gen)
	if err != nil {
		return nil, nil, httpError(http.StatusBadRequest, "BadRequestError", err.msg)
	}
	return it, o, nil
}

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

// handleCompletions serves /v1/completions.
func (s *sglang) handleCompletions(w http.ResponseWriter, r *http.Request) {
	g := s.faults.admit(w, r)
	if g == nil {
		return
	}
	o, err := parseOpenAI(r, g.body, "Input should be a valid dictionary or object to extract fields from", completionSpec)
	var prompt *completionPrompt
	if err == nil {
		prompt, err = parseCompletionPrompt(o.body["prompt"])
	}
	if err == nil {
		if n, ok := asInt(o.body["max_tokens"]); ok && n <= 0 {
			err = validationError(fieldError{typ: "value_error", loc: []any{"body", "max_tokens"}, msg: "Value error, max_tokens must be positive"})
		} else if prompt.empty {
			err = httpError(http.StatusBadRequest, "BadRequestError", "Prompt cannot be empty")
		}
	}
	var it *item
	if err == nil {
		maxNew := o.body["max_tokens"]
		if isNull(maxNew) {
			maxNew = json.RawMessage("16")
		}
		gen := o.gen
		gen.sp = openAISampling(o.body, maxNew, nil)
		if prompt.ids != nil {
			gen.hasIDs, gen.ids = true, prompt.ids
		} else {
			gen.text = &prompt.text
		}
		var gerr *apiError
		if it, gerr = s.prepareGenerate(g, gen); gerr != nil {
			err = httpError(http.StatusBadRequest, "BadRequestError", gerr.msg)
		}
	}
	if err != nil {
		writeOpenAIError(w, err)
		g.end(outError)
		return
	}
	defer s.eng.unregister(it)
	if !s.runOpenAI(w, r, g, it) {
		return
	}
	text := it.finalText()
	if boolField(o.body, "echo", false) {
		if prompt.ids != nil {
			text = Decode(prompt.ids, true) + text
		} else {
			text = prompt.text + text
		}
	}
	writeJSON(w, http.StatusOK, completionResponse{
		ID: it.rid, Object: "text_completion", Created: time.Now().Unix(), Model: o.model,
		Choices:  []completionChoice{{Text: text, FinishReason: strPtr(it.finish.typ()), MatchedStop: it.finish.matched()}},
		Usage:    usageOf(it),
		Metadata: map[string]string{"weight_version": "default"},
	})
	g.finishItem(it, true)
}
