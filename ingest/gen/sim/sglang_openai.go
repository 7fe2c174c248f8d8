package sim

import (
	"encoding/json"
	"net/http"
	"strings"
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
			_, good = asInt(v)
			typ, msg = "int_parsing", "Input should be a valid integer"
		case kBool:
			_, good = asBool(v)
			typ, msg = "bool_parsing", "Input should be a valid boolean"
		case kStr:
			good, typ, msg = jsonKind(v) == "string", "string_type", "Input should be a valid string"
		case kStrs:
			_, _, good = asStrings(v)
			typ, msg = "string_type", "Input should be a valid string"
		case kInts:
			_, good = asInts(v)
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
	if b, ok := asBool(m[key]); ok {
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
		b, _ := asBool(raw)
		return b
	case "number":
		n, _ := parseNum(raw)
		return n.f != 0
	case "string":
		s, _ := asString(raw)
		return s != ""
	case "array":
		a, _ := asArray(raw)
		return len(a) > 0
	}
	m, _ := asObject(raw)
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
