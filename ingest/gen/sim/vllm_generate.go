package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// vLLM's generation routes: /v1/completions, /v1/chat/completions and
// /inference/v1/generate, their requests validated as vLLM validates them
// and their answers in its shapes.

// vllmSamplingSpec lists the typed sampling fields vLLM's request models
// validate.
var vllmSamplingSpec = map[string]kind{
	"temperature": kNum, "top_p": kNum, "top_k": kInt, "min_p": kNum, "repetition_penalty": kNum,
	"presence_penalty": kNum, "frequency_penalty": kNum, "min_tokens": kInt, "stop": kStrs,
	"stop_token_ids": kInts, "ignore_eos": kBool, "skip_special_tokens": kBool,
	"include_stop_str_in_output": kBool, "seed": kInt, "max_tokens": kInt,
	"max_completion_tokens": kInt, "stream": kBool, "return_token_ids": kBool, "n": kInt,
}

// vllmDefaults are the values vLLM falls back to when neither the request
// nor the model's generation config sets a field.
var vllmDefaults = map[string]float64{
	"temperature": 1.0, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "repetition_penalty": 1.0,
	"presence_penalty": 0.0, "frequency_penalty": 0.0,
}

// vllmSampling validates and reads the sampling fields vLLM reads into the
// engine's sampling map and the output salt. maxNew is the token limit
// (JSON null: the rest of the context).
func vllmSampling(m map[string]json.RawMessage, maxNew json.RawMessage) (map[string]json.RawMessage, uint64, *apiError) {
	if err := checkFields(m, vllmSamplingSpec); err != nil {
		return nil, 0, err
	}
	read := map[string]json.RawMessage{}
	for k, def := range vllmDefaults {
		v := m[k]
		if isNull(v) {
			v = rawNum(def)
		}
		read[k] = v
	}
	f := func(k string) float64 { n, _ := parseNum(read[k]); return n.f }
	bad := func(format string, args ...any) *apiError {
		return validationError(fieldError{typ: "value_error", loc: []any{"body"}, msg: "Value error, " + fmt.Sprintf(format, args...)})
	}
	switch {
	case f("temperature") < 0:
		return nil, 0, bad("temperature must be non-negative, got %v.", pyFloat(f("temperature")))
	case !(f("top_p") > 0 && f("top_p") <= 1):
		return nil, 0, bad("top_p must be in (0, 1], got %v.", pyFloat(f("top_p")))
	case f("top_k") < -1:
		return nil, 0, bad("top_k must be 0 (disable), or at least 1, got %d.", int(f("top_k")))
	case !(f("min_p") >= 0 && f("min_p") <= 1):
		return nil, 0, bad("min_p must be in [0, 1], got %v.", pyFloat(f("min_p")))
	case f("repetition_penalty") <= 0:
		return nil, 0, bad("repetition_penalty must be greater than zero, got %v.", pyFloat(f("repetition_penalty")))
	case f("presence_penalty") < -2 || f("presence_penalty") > 2:
		return nil, 0, bad("presence_penalty must be in [-2, 2], got %v.", pyFloat(f("presence_penalty")))
	case f("frequency_penalty") < -2 || f("frequency_penalty") > 2:
		return nil, 0, bad("frequency_penalty must be in [-2, 2], got %v.", pyFloat(f("frequency_penalty")))
	}
	if n, ok := asInt(maxNew); ok && n < 1 {
		return nil, 0, bad("max_tokens must be at least 1, got %d.", n)
	}
	if n, ok := asInt(m["n"]); ok && n > 1 {
		return nil, 0, errParallelSampling
	}
	sp := map[string]json.RawMessage{"max_new_tokens": orNull(maxNew)}
	if f("temperature") < 1e-5 || f("top_k") == 1 {
		sp["temperature"] = json.RawMessage("0")
	}
	for dst, src := range map[string]string{
		"min_new_tokens": "min_tokens", "stop": "stop", "stop_token_ids": "stop_token_ids",
		"ignore_eos": "ignore_eos", "skip_special_tokens": "skip_special_tokens",
		"no_stop_trim": "include_stop_str_in_output", "sampling_seed": "seed",
	} {
		if v := m[src]; !isNull(v) {
			sp[dst] = v
		}
	}
	if b, ok := asBool(sp["ignore_eos"]); ok {
		sp["ignore_eos"] = json.RawMessage(strconv.FormatBool(b))
	}
	for _, k := range []string{"skip_special_tokens", "no_stop_trim"} {
		if b, ok := asBool(sp[k]); ok {
			sp[k] = json.RawMessage(strconv.FormatBool(b))
		}
	}
	return sp, samplingSalt(read), nil
}

// checkContext applies vLLM's input validation: token ids in the
// vocabulary, a prompt shorter than max_model_len, and a max_tokens that
// fits beside it.
func (v *vllm) checkContext(prompt []int, maxNew json.RawMessage) (string, string) {
	for _, id := range prompt {
		if id < 0 || id >= VocabSize {
			return fmt.Sprintf("Token id %d is out of vocabulary", id), ""
		}
	}
	n, c := len(prompt), v.cfg.ContextLength
	if n >= c {
		return fmt.Sprintf("This model's maximum context length is %d tokens. However, your request has %d input tokens. "+
			"Please reduce the length of the input messages.", c, n), "input_tokens"
	}
	if k, ok := asInt(maxNew); ok && k+n > c {
		return fmt.Sprintf("'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum context length is %d tokens "+
			"and your request has %d input tokens (%d > %d - %d).", k, c, n, k, c, n), "max_tokens"
	}
	return "", ""
}

// run checks the context, answers an injected parse fault, then
// builds and runs the item. It returns nil when it has answered (or
// ended) the request.
func (v *vllm) run(w http.ResponseWriter, r *http.Request, g *genRequest, prompt []int, sp map[string]json.RawMessage, salt uint64) *item {
	if msg, param := v.checkContext(prompt, sp["max_new_tokens"]); msg != "" {
		writeVLLMError(w, http.StatusBadRequest, "BadRequestError", msg, param)
		g.end(outError)
		return nil
	}
	if g.parseFault() {
		return nil
	}
	it, err := runFlavorItem(v.eng, r, g, prompt, sp, salt)
	if err != nil {
		writeVLLMAPIError(w, err)
		g.end(outError)
	}
	return it
}

// vllmStopReason is stop_reason: the matched stop string or stop token id,
// null for EOS and the length limit.
func vllmStopReason(it *item) any {
	switch it.finish.kind {
	case finishStopString:
		return it.finish.matchedStr
	case finishStopToken:
		if it.finish.matchedID != EOSID {
			return it.finish.matchedID
		}
	}
	return nil
}

// vllmUsage is UsageInfo.
func vllmUsage(it *item) []byte {
	return orderedJSON([]kv{
		{"prompt_tokens", len(it.prompt)}, {"total_tokens", len(it.prompt) + it.produced},
		{"completion_tokens", it.produced}, {"prompt_tokens_details", nil},
	})
}

// outputIDs is the output ids of a finished item.
func outputIDs(it *item) []int { return it.plan.ids[:it.produced:it.produced] }

// begin starts a generation request and reads its body as vLLM does;
// on nil, the answer is written and the request ended.
func (v *vllm) begin(w http.ResponseWriter, r *http.Request) (*genRequest, map[string]json.RawMessage) {
	return v.faults.admitWith(w, r, func(body []byte) map[string]json.RawMessage { return v.checkBody(w, r, body) })
}

// vllmSamplingOf reads m's sampling fields once the request's own checks
// gave err (nil: passed); on an error it answers as vLLM does, ends g and
// reports false.
func vllmSamplingOf(w http.ResponseWriter, g *genRequest, m map[string]json.RawMessage, maxNew json.RawMessage, err *apiError) (map[string]json.RawMessage, uint64, bool) {
	var sp map[string]json.RawMessage
	var salt uint64
	if err == nil {
		sp, salt, err = vllmSampling(m, maxNew)
	}
	if err != nil {
		writeVLLMAPIError(w, err)
		g.end(outError)
		return nil, 0, false
	}
	return sp, salt, true
}

// writeAnswer writes an OpenAI-compatible answer of it as vLLM's
// server does (id prefix, object, its one choice, usage, then tail) and
// finishes the item.
func (v *vllm) writeAnswer(w http.ResponseWriter, g *genRequest, it *item, idPrefix, object string, choice []kv, tail ...kv) {
	c := orderedJSON(choice)
	fields := append([]kv{
		{"id", idPrefix + it.rid}, {"object", object}, {"created", time.Now().Unix()}, {"model", v.cfg.Model},
		{"choices", jsonList(c)}, {"service_tier", nil}, {"system_fingerprint", nil},
		{"usage", vllmUsage(it)},
	}, tail...)
	writeRaw(w, http.StatusOK, "application/json", orderedJSON(fields))
	g.finishItem(it, true)
}

// handleCompletions serves /v1/completions: a text or token-id prompt,
// max_tokens 16 by default.
func (v *vllm) handleCompletions(w http.ResponseWriter, r *http.Request) {
	g, m := v.begin(w, r)
	if g == nil {
		return
	}
	var prompt *completionPrompt
	err := validationError(fieldError{typ: "value_error", loc: []any{"body"}, msg: "Value error, Either prompt or prompt_embeds must be provided and non-empty."})
	if !isNull(m["prompt"]) {
		prompt, err = parseCompletionPrompt(m["prompt"])
		if err == nil && prompt.empty {
			err = validationError(fieldError{typ: "value_error", loc: []any{"body"}, msg: "Value error, Either prompt or prompt_embeds must be provided and non-empty."})
		}
	}
	if err == nil && boolField(m, "stream", false) {
		err = errNoStreaming
	}
	maxNew := m["max_tokens"]
	if isNull(maxNew) {
		maxNew = json.RawMessage("16")
	}
	sp, salt, ok := vllmSamplingOf(w, g, m, maxNew, err)
	if !ok {
		return
	}
	ids := prompt.ids
	if ids == nil {
		ids = Encode(prompt.text, boolField(m, "add_special_tokens", true))
	}
	it := v.run(w, r, g, ids, sp, salt)
	if it == nil {
		return
	}
	text := it.finalText()
	if boolField(m, "echo", false) {
		text = Decode(ids, true) + text
	}
	choice := []kv{{"index", 0}, {"text", text}, {"logprobs", nil}, {"finish_reason", it.finish.typ()},
		{"stop_reason", vllmStopReason(it)}, {"token_ids", nil}, {"prompt_logprobs", nil}, {"prompt_token_ids", nil}}
	if boolField(m, "return_token_ids", false) {
		choice[5].v, choice[7].v = outputIDs(it), it.prompt
	}
	v.writeAnswer(w, g, it, "cmpl-", "text_completion", choice, kv{"kv_transfer_params", nil})
}

// handleChat serves /v1/chat/completions: the messages through the
// chat template; SGLang's input_ids is an unknown field, ignored.
func (v *vllm) handleChat(w http.ResponseWriter, r *http.Request) {
	g, m := v.begin(w, r)
	if g == nil {
		return
	}
	msgs, err := parseMessages(m["messages"])
	if err == nil && boolField(m, "stream", false) {
		err = errNoStreaming
	}
	var tools *toolRequest
	if err == nil && v.cfg.ToolCalls {
		if tools, err = readTools(m); err == nil {
			err = attachToolCalls(m["messages"], msgs)
		}
	}
	maxNew := m["max_tokens"]
	if mc := m["max_completion_tokens"]; !isNull(mc) {
		maxNew = mc
	}
	sp, salt, ok := vllmSamplingOf(w, g, m, maxNew, err)
	if !ok {
		return
	}
	autoTools := v.cfg.EnableAutoToolChoice && v.cfg.ToolCallParser != ""
	if tools.calling() {
		if !autoTools {
			writeVLLMError(w, http.StatusBadRequest, "BadRequestError",
				`"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`, "")
			g.end(outError)
			return
		}
		sp["skip_special_tokens"] = json.RawMessage("false") // the tool parser's adjust_request
	}
	g.noToolCall = tools != nil && tools.choice == "none"
	prompt := v.eng.chatPrompt(m, msgs)
	it := v.run(w, r, g, prompt, sp, salt)
	if it == nil {
		return
	}
	text := it.finalText()
	var reasoning any
	if v.cfg.ReasoningParser && boolField(m, "include_reasoning", true) {
		if rtext, content := splitReasoning(text); rtext != "" {
			reasoning, text = rtext, content
		}
	}
	var content, toolCalls any = text, []int{}
	finish := it.finish.typ()
	if tools.calling() {
		if normal, calls := parseCalls(formatOf(v.cfg.ToolCallParser), vllmParser, text, tools.names); len(calls) > 0 {
			content, toolCalls, finish = normal, vllmToolCalls(calls), "tool_calls"
			if normal == "" {
				content = nil
			}
		}
	}
	msg := orderedJSON([]kv{{"role", "assistant"}, {"content", content}, {"refusal", nil}, {"annotations", nil},
		{"audio", nil}, {"function_call", nil}, {"tool_calls", toolCalls}, {"reasoning", reasoning}})
	choice := []kv{{"index", 0}, {"message", msg}, {"logprobs", nil}, {"finish_reason", finish},
		{"stop_reason", vllmStopReason(it)}, {"token_ids", nil}}
	var promptIDs any
	if boolField(m, "return_token_ids", false) {
		choice[5].v, promptIDs = outputIDs(it), it.prompt
	}
	v.writeAnswer(w, g, it, "chatcmpl-", "chat.completion", choice,
		kv{"prompt_logprobs", nil}, kv{"prompt_token_ids", promptIDs}, kv{"kv_transfer_params", nil})
}

// handleGenerate serves /inference/v1/generate: token ids in, token
// ids out, no text and no usage.
func (v *vllm) handleGenerate(w http.ResponseWriter, r *http.Request) {
	g, m := v.begin(w, r)
	if g == nil {
		return
	}
	var errs []fieldError
	ids, idsOK := asInts(m["token_ids"])
	switch {
	case isNull(m["token_ids"]):
		errs = append(errs, fieldError{typ: "missing", loc: []any{"body", "token_ids"}, msg: "Field required"})
	case !idsOK:
		errs = append(errs, fieldError{typ: "list_type", loc: []any{"body", "token_ids"}, msg: "Input should be a valid list"})
	}
	spRaw, spOK := asObject(m["sampling_params"])
	switch {
	case isNull(m["sampling_params"]):
		errs = append(errs, fieldError{typ: "missing", loc: []any{"body", "sampling_params"}, msg: "Field required"})
	case !spOK:
		errs = append(errs, fieldError{typ: "dict_type", loc: []any{"body", "sampling_params"}, msg: "Input should be a valid dictionary"})
	}
	var err *apiError
	if len(errs) > 0 {
		err = validationError(errs...)
	} else if boolField(m, "stream", false) {
		err = errNoStreaming
	}
	var sp map[string]json.RawMessage
	var salt uint64
	if err == nil {
		maxNew := spRaw["max_tokens"]
		if isNull(maxNew) {
			maxNew = json.RawMessage("16")
		}
		sp, salt, err = vllmSampling(spRaw, maxNew)
	}
	if err == nil && len(ids) == 0 {
		err = valueError("The decoder prompt cannot be empty")
	}
	if err != nil {
		writeVLLMAPIError(w, err)
		g.end(outError)
		return
	}
	if n, c := len(ids), v.cfg.ContextLength; n >= c {
		writeVLLMError(w, http.StatusBadRequest, "BadRequestError", fmt.Sprintf("The decoder prompt (length %d) is longer than the maximum model length of %d. "+
			"Make sure that `max_model_len` is no smaller than the number of text tokens.", n, c), "")
		g.end(outError)
		return
	}
	if k, ok := asInt(sp["max_new_tokens"]); ok && k+len(ids) > v.cfg.ContextLength {
		sp["max_new_tokens"] = json.RawMessage(strconv.Itoa(v.cfg.ContextLength - len(ids)))
	}
	it := v.run(w, r, g, ids, sp, salt)
	if it == nil {
		return
	}
	rid, ok := asString(m["request_id"])
	if !ok {
		rid = newRID()
	}
	choice := orderedJSON([]kv{{"index", 0}, {"logprobs", nil}, {"finish_reason", it.finish.typ()}, {"token_ids", outputIDs(it)}})
	writeRaw(w, http.StatusOK, "application/json", orderedJSON([]kv{
		{"request_id", rid}, {"choices", jsonList(choice)},
		{"prompt_logprobs", nil}, {"kv_transfer_params", nil},
	}))
	g.finishItem(it, true)
}
