package sim

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strings"
)

// What every flavor reads the same way in a request: the body as JSON
// (FastAPI's rules for SGLang and vLLM), field types, Python truthiness,
// chat messages, a completion's one prompt, and the simulator's own
// refusals (batches, n > 1, streaming), which gendex never sends.

// errBatch answers a request with a list where one prompt belongs (a list
// of texts, of input_ids lists, of sampling_params or of rids): gen sends
// one prompt per request, so the simulator does not batch.
var errBatch = httpError(http.StatusBadRequest, "BadRequestError", "sim: batch requests are not simulated (gendex sends one prompt per request)")

// errParallelSampling answers a request for n > 1 samples: gen asks for one.
var errParallelSampling = httpError(http.StatusBadRequest, "BadRequestError", "sim: n > 1 is not simulated (gendex asks for one sample per request)")

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

// checkOpenAIContentType is SGLang's validate_json_request dependency.
func checkOpenAIContentType(r *http.Request) *apiError {
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	mt, _, _ := strings.Cut(ct, ";")
	if mt != "application/json" {
		return validationError(fieldError{typ: "value_error", loc: []any{"header", "content-type"}, msg: "Unsupported Media Type: Only 'application/json' is allowed"})
	}
	return nil
}

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
