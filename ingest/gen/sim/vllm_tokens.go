package sim

import "net/http"

// vLLM's token routes: /tokenize and /detokenize.

// handleTokenize serves /tokenize: {prompt, add_special_tokens=true}
// or {messages, add_generation_prompt=true, add_special_tokens=false} ->
// {count, max_model_len, tokens, token_strs}.
func (v *vllm) handleTokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(r)
	if !ok {
		return
	}
	m := v.checkBody(w, r, body)
	if m == nil {
		return
	}
	var ids []int
	switch {
	case !isNull(m["messages"]):
		msgs, err := parseMessages(m["messages"])
		if err == nil && v.cfg.ToolCalls {
			if _, err = readTools(m); err == nil {
				err = attachToolCalls(m["messages"], msgs)
			}
		}
		if err != nil {
			writeVLLMAPIError(w, err)
			return
		}
		t := chatTemplate{addGenerationPrompt: boolField(m, "add_generation_prompt", true), reasoningModel: v.cfg.ReasoningParser}
		if boolField(m, "continue_final_message", false) {
			if t.addGenerationPrompt && !isNull(m["add_generation_prompt"]) {
				writeVLLMAPIError(w, validationError(fieldError{typ: "value_error", loc: []any{"body"},
					msg: "Value error, Cannot set both `continue_final_message` and `add_generation_prompt` to True."}))
				return
			}
			t.continueFinalMessage, t.addGenerationPrompt = true, false
		}
		t.tools, t.format = v.tools.promptLines(m), formatOf(v.cfg.ToolCallParser)
		ids = applyChatTemplate(msgs, t)
		if boolField(m, "add_special_tokens", false) {
			ids = append([]int{BOSID}, ids...)
		}
	case !isNull(m["prompt"]):
		p, ok := asString(m["prompt"])
		if !ok {
			writeVLLMAPIError(w, validationError(fieldError{typ: "string_type", loc: []any{"body", "prompt"}, msg: "Input should be a valid string"}))
			return
		}
		ids = Encode(p, boolField(m, "add_special_tokens", true))
	default:
		writeVLLMAPIError(w, validationError(
			fieldError{typ: "missing", loc: []any{"body", "TokenizeCompletionRequest", "prompt"}, msg: "Field required"},
			fieldError{typ: "missing", loc: []any{"body", "TokenizeChatRequest", "messages"}, msg: "Field required"}))
		return
	}
	var strs any
	if boolField(m, "return_token_strs", false) {
		list := make([]string, len(ids))
		for i, id := range ids {
			list[i] = Decode([]int{id}, false)
		}
		strs = list
	}
	writeRaw(w, http.StatusOK, "application/json", orderedJSON([]kv{
		{"count", len(ids)}, {"max_model_len", v.cfg.ContextLength}, {"tokens", ids}, {"token_strs", strs},
	}))
}

// handleDetokenize serves /detokenize {tokens} -> {prompt}.
func (v *vllm) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	body, ok := readBody(r)
	if !ok {
		return
	}
	m := v.checkBody(w, r, body)
	if m == nil {
		return
	}
	ids, ok := asInts(m["tokens"])
	if !ok {
		msg := fieldError{typ: "missing", loc: []any{"body", "tokens"}, msg: "Field required"}
		if !isNull(m["tokens"]) {
			msg = fieldError{typ: "list_type", loc: []any{"body", "tokens"}, msg: "Input should be a valid list"}
		}
		writeVLLMAPIError(w, validationError(msg))
		return
	}
	writeRaw(w, http.StatusOK, "application/json", orderedJSON([]kv{{"prompt", Decode(ids, false)}}))
}
