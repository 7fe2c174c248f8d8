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
