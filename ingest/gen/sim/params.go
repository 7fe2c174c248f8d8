package sim

import (
	"encoding/json"
	"math"
	"strconv"
)

// unlimited stands for a null max_new_tokens (generate until the context
// limit), as the scheduler's 1 << 30.
const unlimited = 1 << 30

// samplingParams are the parsed and verified sampling_params of one item.
type samplingParams struct {
	maxNewTokens   int // unlimited if null
	minNewTokens   int
	stop           []string
	stopTokenIDs   []int
	ignoreEOS      bool
	skipSpecial    bool
	noStopTrim     bool
	n              int
	streamInterval int
	seed           int64
	hasSeed        bool
	greedy         bool // temperature 0 or top_k 1
	// salt mixes the sampling fields a vLLM or llama.cpp flavor reads into
	// the output (see samplingSalt); 0 for SGLang.
	salt uint64
	// noToolCall: the request's tool_choice is "none", so the model
	// answers in text whatever tools its prompt holds.
	noToolCall bool
	// oneCall: the request allows one tool call per turn (llama.cpp
	// without parallel_tool_calls), so the model makes no parallel calls.
	oneCall bool
}

// samplingKeys lists every key SGLang's SamplingParams accepts, with the
// JSON kind its value must have ("any" accepts everything).
var samplingKeys = map[string]string{
	"max_new_tokens": "int", "stop": "strs", "stop_token_ids": "ints",
	"stop_regex": "strs", "temperature": "num", "top_p": "num", "top_k": "int",
	"min_p": "num", "frequency_penalty": "num", "presence_penalty": "num",
	"repetition_penalty": "num", "min_new_tokens": "int", "n": "int",
	"json_schema": "str", "regex": "str", "ebnf": "str", "structural_tag": "str",
	"ignore_eos": "bool", "skip_special_tokens": "bool",
	"spaces_between_special_tokens": "bool", "no_stop_trim": "bool",
	"custom_params": "any", "stream_interval": "int", "logit_bias": "obj",
	"sampling_seed": "int",
	// Internal fields of the msgspec struct; accepted as keyword arguments.
	"stop_strs": "any", "stop_regex_strs": "any", "stop_str_max_len": "any",
	"stop_regex_max_len": "any", "is_normalized": "any",
}

// parseSamplingParams builds and verifies the sampling parameters of one
// item from its sampling_params object (nil means {}), the way
// SamplingParams(**d), normalize and verify do. An unknown key or a value of
// the wrong type is a TypeError (HTTP 500 on /generate); a bad value is a
// ValueError with SGLang's message. The checks run in SGLang's order: the
// keys and types, the ranges, the token limits, logit_bias, the grammars.
func parseSamplingParams(obj map[string]json.RawMessage, defaultMax int) (*samplingParams, *apiError) {
	if err := checkSamplingKeys(obj); err != nil {
		return nil, err
	}
	o := samplingObject(obj)
	p := &samplingParams{skipSpecial: o.flag("skip_special_tokens", true)}
	p.ignoreEOS = o.flag("ignore_eos", false)
	p.noStopTrim = o.flag("no_stop_trim", false)
	maxNum := o.readMaxNew(p, defaultMax)
	minNew, minNum := o.integer("min_new_tokens", 0)
	p.minNewTokens = minNew
	p.n, _ = o.integer("n", 1)
	p.streamInterval, _ = o.integer("stream_interval", 1)
	if p.streamInterval < 1 {
		p.streamInterval = 1
	}
	if s, ok := parseNum(obj["sampling_seed"]); ok {
		p.seed, p.hasSeed = int64(s.f), true
	}
	o.readStops(p)

	// __post_init__: temperature 0 means greedy, implemented as top_k 1.
	temp := o.num("temperature", 1.0)
	topK, topKNum := o.integer("top_k", -1)
	if temp.f >= 0 && temp.f < 1e-6 {
		temp = pyNum{f: 1.0}
		topK, topKNum = 1, pyNum{f: 1, isInt: true, i: 1}
	}
	if topK == -1 {
		topK = 1 << 30
	}
	p.greedy = topK == 1

	if err := o.verifyRanges(temp, topK, topKNum, minNew, minNum); err != nil {
		return nil, err
	}
	if p.maxNewTokens != unlimited {
		if p.maxNewTokens < 0 {
			return nil, valueError("max_new_tokens must be at least 0, got %s.", maxNum)
		}
		if minNew > p.maxNewTokens {
			return nil, valueError("min_new_tokens must be in [0, max_new_tokens(%s)], got %s.", maxNum, minNum)
		}
	}
	if err := checkLogitBias(obj); err != nil {
		return nil, err
	}
	if err := checkGrammars(obj); err != nil {
		return nil, err
	}
	return p, nil
}

// checkSamplingKeys answers SamplingParams(**d)'s TypeError: a key it does
// not take, or a value of the wrong type.
func checkSamplingKeys(obj map[string]json.RawMessage) *apiError {
	for k, v := range obj {
		kind, ok := samplingKeys[k]
		if !ok {
			return typeError("Unexpected keyword argument '" + k + "'")
		}
		if !isNull(v) && !hasKind(v, kind) {
			return typeError("wrong type for sampling parameter '" + k + "'")
		}
	}
	return nil
}

// samplingObject reads a sampling_params object's values, each with its
// default when absent (or of another kind).
type samplingObject map[string]json.RawMessage

func (o samplingObject) num(key string, def float64) pyNum {
	if n, ok := parseNum(o[key]); ok {
		return n
	}
	return pyNum{f: def}
}

func (o samplingObject) integer(key string, def int) (int, pyNum) {
	if n, ok := parseNum(o[key]); ok {
		return int(n.f), n
	}
	return def, pyNum{f: float64(def), isInt: true, i: int64(def)}
}

func (o samplingObject) flag(key string, def bool) bool {
	if b, ok := asBool(o[key]); ok && jsonKind(o[key]) == "bool" {
		return b
	}
	return def
}

// readMaxNew sets p.maxNewTokens: defaultMax when absent, unlimited when
// null. It returns the value as given, for the error messages.
func (o samplingObject) readMaxNew(p *samplingParams, defaultMax int) pyNum {
	raw, present := o["max_new_tokens"]
	var maxNum pyNum
	switch {
	case !present:
		p.maxNewTokens = defaultMax
		maxNum = pyNum{f: float64(defaultMax), isInt: true, i: int64(defaultMax)}
	case isNull(raw):
		p.maxNewTokens = unlimited
	default:
		p.maxNewTokens, maxNum = o.integer("max_new_tokens", defaultMax)
	}
	return maxNum
}

// readStops sets p's stop strings (empty ones dropped) and stop token ids.
func (o samplingObject) readStops(p *samplingParams) {
	if list, _, ok := asStrings(o["stop"]); ok {
		for _, s := range list {
			if s != "" {
				p.stop = append(p.stop, s)
			}
		}
	}
	if a, ok := asArray(o["stop_token_ids"]); ok {
		for _, v := range a {
			if id, ok := asInt(v); ok {
				p.stopTokenIDs = append(p.stopTokenIDs, id)
			}
		}
	}
}

// verifyRanges is verify's range checks, in its order, on the values after
// __post_init__ (temp, topK) and min_new_tokens.
func (o samplingObject) verifyRanges(temp pyNum, topK int, topKNum pyNum, minNew int, minNum pyNum) *apiError {
	topP := o.num("top_p", 1.0)
	minP := o.num("min_p", 0.0)
	freq := o.num("frequency_penalty", 0.0)
	pres := o.num("presence_penalty", 0.0)
	rep := o.num("repetition_penalty", 1.0)
	switch {
	case math.IsNaN(temp.f) || math.IsInf(temp.f, 0) || temp.f < 0:
		return valueError("temperature must be a non-negative finite number, got %s.", temp)
	case !(topP.f > 0 && topP.f <= 1):
		return valueError("top_p must be in (0, 1], got %s.", topP)
	case !(minP.f >= 0 && minP.f <= 1):
		return valueError("min_p must be in [0, 1], got %s.", minP)
	case topK < 1:
		return valueError("top_k must be -1 (disable) or at least 1, got %s.", topKNum)
	case !(freq.f >= -2 && freq.f <= 2):
		return valueError("frequency_penalty must be in [-2, 2], got %s.", freq)
	case !(pres.f >= -2 && pres.f <= 2):
		return valueError("presence_penalty must be in [-2, 2], got %s.", pres)
	case !(rep.f > 0 && rep.f <= 2):
		return valueError("repetition_penalty must be in (0, 2] (1.0 = no penalty), got %s.", rep)
	case minNew < 0:
		return valueError("min_new_tokens must be in [0, max_new_tokens], got %s.", minNum)
	}
	return nil
}

// checkLogitBias checks that logit_bias's keys are token ids of the
// vocabulary, in the object's order.
func checkLogitBias(obj map[string]json.RawMessage) *apiError {
	if _, ok := asObject(obj["logit_bias"]); !ok {
		return nil
	}
	for _, k := range orderedKeys(obj["logit_bias"]) {
		id, err := strconv.Atoi(k)
		if err != nil {
			return valueError("invalid literal for int() with base 10: %s", pyStr(k))
		}
		if id < 0 || id >= VocabSize {
			return valueError("logit_bias must has keys in [0, %d], got %s.", VocabSize-1, k)
		}
	}
	return nil
}

// checkGrammars refuses more than one of regex, json_schema and ebnf.
func checkGrammars(obj map[string]json.RawMessage) *apiError {
	grammars := 0
	for _, k := range []string{"json_schema", "regex", "ebnf"} {
		if !isNull(obj[k]) {
			grammars++
		}
	}
	if grammars > 1 {
		return valueError("Only one of regex, json_schema, or ebnf can be set.")
	}
	return nil
}

// hasKind reports whether raw has the JSON kind named by kind.
func hasKind(raw json.RawMessage, kind string) bool {
	switch kind {
	case "any":
		return true
	case "num":
		return jsonKind(raw) == "number"
	case "int":
		_, ok := asInt(raw)
		return ok
	case "bool":
		return jsonKind(raw) == "bool"
	case "str":
		return jsonKind(raw) == "string"
	case "obj":
		return jsonKind(raw) == "object"
	case "strs":
		_, _, ok := asStrings(raw)
		return ok
	case "ints":
		a, ok := asArray(raw)
		if !ok {
			return false
		}
		for _, v := range a {
			if _, ok := asInt(v); !ok && !isNull(v) {
				return false
			}
		}
		return true
	}
	return false
}
