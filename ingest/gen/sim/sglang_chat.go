package sim

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// parseMessages validates and flattens chat messages.
func parseMessages(raw json.RawMessage) ([]chatMessage, *apiError) {
	if raw == nil {
		return nil, validationError(fieldError{typ: "missing", loc: []any{"body", "messages"}, msg: "Field required"})
	}
	list, ok := asArray(raw)
	if !ok {
		return nil, validationError(fieldError{typ: "list_type", loc: []any{"body", "messages"}, msg: "Input should be a valid list"})
	}
	msgs := make([]chatMessage, len(list))
	for i, e := range list {
		loc := []any{"body", "messages", i}
		m, ok := asObject(e)
		if !ok {
			return nil, validationError(fieldError{typ: "model_attributes_type", loc: loc, msg: "Input should be a valid dictionary or object to extract fields from"})
		}
		role, ok := asString(m["role"])
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
			msgs[i].content, _ = asString(c)
		case "array":
			parts, _ := asArray(c)
			var b strings.Builder
			for _, p := range parts {
				pm, ok := asObject(p)
				if !ok {
					return nil, validationError(fieldError{typ: "model_attributes_type", loc: append(loc, "content"), msg: "Input should be a valid dictionary or object to extract fields from"})
				}
				if t, _ := asString(pm["type"]); t == "text" {
					s, _ := asString(pm["text"])
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
