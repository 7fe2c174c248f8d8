package sim

import (
	"encoding/json"
	"net/http"
	"time"
)

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

// completionPrompt is the one prompt of a completions request.
type completionPrompt struct {
	text  string // a text prompt (BOS added by the tokenizer)
	ids   []int  // a token prompt; nil for a text prompt
	empty bool   // "Prompt cannot be empty"
}

// parseCompletionPrompt accepts str | list[int]; a list of prompts
// (list[str] or list[list[int]]) is a batch, which the simulator refuses.
func parseCompletionPrompt(raw json.RawMessage) (*completionPrompt, *apiError) {
	bad := validationError(fieldError{typ: "string_type", loc: []any{"body", "prompt"}, msg: "Input should be a valid string"})
	if raw == nil {
		return nil, validationError(fieldError{typ: "missing", loc: []any{"body", "prompt"}, msg: "Field required"})
	}
	if s, ok := asString(raw); ok {
		return &completionPrompt{text: s, empty: s == ""}, nil
	}
	a, ok := asArray(raw)
	if !ok {
		return nil, bad
	}
	if len(a) == 0 {
		return &completionPrompt{empty: true}, nil
	}
	switch jsonKind(a[0]) {
	case "number":
		ids, ok := asInts(raw)
		if !ok {
			return nil, bad
		}
		return &completionPrompt{ids: ids}, nil
	case "array", "string":
		return nil, errBatch
	}
	return nil, bad
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
