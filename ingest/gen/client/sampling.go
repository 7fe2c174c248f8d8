package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// SamplingParams are the sampling settings of a request, named as in
// SGLang's /generate "sampling_params". A nil (or empty) field is not set
// and is not sent, so the server's default applies. Its JSON encoding is
// exactly the /generate sampling_params object; OpenAIFields maps it onto
// the chat/completions fields.
//
// Keys that change the shape of the answer (n) or need more than text
// generation (json_schema, regex, ebnf, structural_tag, stop_regex,
// custom_params) are deliberately absent.
type SamplingParams struct {
	MaxNewTokens               *int               `json:"max_new_tokens,omitempty"`
	MinNewTokens               *int               `json:"min_new_tokens,omitempty"`
	Temperature                *float64           `json:"temperature,omitempty"`
	TopP                       *float64           `json:"top_p,omitempty"`
	TopK                       *int               `json:"top_k,omitempty"`
	MinP                       *float64           `json:"min_p,omitempty"`
	FrequencyPenalty           *float64           `json:"frequency_penalty,omitempty"`
	PresencePenalty            *float64           `json:"presence_penalty,omitempty"`
	RepetitionPenalty          *float64           `json:"repetition_penalty,omitempty"`
	Stop                       Strings            `json:"stop,omitempty"`
	StopTokenIDs               []int              `json:"stop_token_ids,omitempty"`
	IgnoreEOS                  *bool              `json:"ignore_eos,omitempty"`
	SkipSpecialTokens          *bool              `json:"skip_special_tokens,omitempty"`
	SpacesBetweenSpecialTokens *bool              `json:"spaces_between_special_tokens,omitempty"`
	NoStopTrim                 *bool              `json:"no_stop_trim,omitempty"`
	SamplingSeed               *int64             `json:"sampling_seed,omitempty"`
	LogitBias                  map[string]float64 `json:"logit_bias,omitempty"`
}

// Strings is a list of strings that also decodes from a single JSON string,
// as SGLang's "stop" does.
type Strings []string

// UnmarshalJSON accepts a string or an array of strings.
func (s *Strings) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = Strings{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return errors.New("stop: want a string or an array of strings")
	}
	*s = many
	return nil
}

// Merge returns p with every field that o sets replaced by o's value: o is
// a per-prompt override of run-wide settings p. Pointers, slices and maps
// are shared, not copied; treat them as read-only.
func (p SamplingParams) Merge(o SamplingParams) SamplingParams {
	p.MaxNewTokens = pick(p.MaxNewTokens, o.MaxNewTokens)
	p.MinNewTokens = pick(p.MinNewTokens, o.MinNewTokens)
	p.Temperature = pick(p.Temperature, o.Temperature)
	p.TopP = pick(p.TopP, o.TopP)
	p.TopK = pick(p.TopK, o.TopK)
	p.MinP = pick(p.MinP, o.MinP)
	p.FrequencyPenalty = pick(p.FrequencyPenalty, o.FrequencyPenalty)
	p.PresencePenalty = pick(p.PresencePenalty, o.PresencePenalty)
	p.RepetitionPenalty = pick(p.RepetitionPenalty, o.RepetitionPenalty)
	if len(o.Stop) > 0 {
		p.Stop = o.Stop
	}
	if len(o.StopTokenIDs) > 0 {
		p.StopTokenIDs = o.StopTokenIDs
	}
	p.IgnoreEOS = pick(p.IgnoreEOS, o.IgnoreEOS)
	p.SkipSpecialTokens = pick(p.SkipSpecialTokens, o.SkipSpecialTokens)
	p.SpacesBetweenSpecialTokens = pick(p.SpacesBetweenSpecialTokens, o.SpacesBetweenSpecialTokens)
	p.NoStopTrim = pick(p.NoStopTrim, o.NoStopTrim)
	p.SamplingSeed = pick(p.SamplingSeed, o.SamplingSeed)
	if len(o.LogitBias) > 0 {
		p.LogitBias = o.LogitBias
	}
	return p
}

func pick[T any](old, override *T) *T {
	if override != nil {
		return override
	}
	return old
}

// OpenAIFields returns the set fields under their /v1/chat/completions and
// /v1/completions names: max_new_tokens becomes max_tokens, min_new_tokens
// min_tokens, sampling_seed seed; the rest keep SGLang's names, which
// SGLang and vLLM both accept as extensions.
func (p SamplingParams) OpenAIFields() map[string]any {
	m := make(map[string]any, 8)
	put(m, "max_tokens", p.MaxNewTokens)
	put(m, "min_tokens", p.MinNewTokens)
	put(m, "temperature", p.Temperature)
	put(m, "top_p", p.TopP)
	put(m, "top_k", p.TopK)
	put(m, "min_p", p.MinP)
	put(m, "frequency_penalty", p.FrequencyPenalty)
	put(m, "presence_penalty", p.PresencePenalty)
	put(m, "repetition_penalty", p.RepetitionPenalty)
	if len(p.Stop) > 0 {
		m["stop"] = []string(p.Stop)
	}
	if len(p.StopTokenIDs) > 0 {
		m["stop_token_ids"] = p.StopTokenIDs
	}
	put(m, "ignore_eos", p.IgnoreEOS)
	put(m, "skip_special_tokens", p.SkipSpecialTokens)
	put(m, "spaces_between_special_tokens", p.SpacesBetweenSpecialTokens)
	put(m, "no_stop_trim", p.NoStopTrim)
	put(m, "seed", p.SamplingSeed)
	if len(p.LogitBias) > 0 {
		m["logit_bias"] = p.LogitBias
	}
	return m
}

func put[T any](m map[string]any, key string, v *T) {
	if v != nil {
		m[key] = *v
	}
}

// Validate checks the ranges SGLang enforces (sampling_params.py verify), so
// a bad run-wide setting fails once instead of once per prompt.
func (p SamplingParams) Validate() error {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if v := p.Temperature; v != nil && *v < 0 {
		bad("temperature must be >= 0, got %v", *v)
	}
	if v := p.TopP; v != nil && (*v <= 0 || *v > 1) {
		bad("top_p must be in (0, 1], got %v", *v)
	}
	greedy := p.Temperature != nil && *p.Temperature >= 0 && *p.Temperature < 1e-6 // SGLang then forces top_k=1
	if v := p.TopK; v != nil && *v < 1 && *v != -1 && !greedy {
		bad("top_k must be -1 (all) or at least 1, got %d", *v)
	}
	if v := p.MinP; v != nil && (*v < 0 || *v > 1) {
		bad("min_p must be in [0, 1], got %v", *v)
	}
	if v := p.FrequencyPenalty; v != nil && (*v < -2 || *v > 2) {
		bad("frequency_penalty must be in [-2, 2], got %v", *v)
	}
	if v := p.PresencePenalty; v != nil && (*v < -2 || *v > 2) {
		bad("presence_penalty must be in [-2, 2], got %v", *v)
	}
	if v := p.RepetitionPenalty; v != nil && (*v <= 0 || *v > 2) {
		bad("repetition_penalty must be in (0, 2], got %v", *v)
	}
	if v := p.MaxNewTokens; v != nil && *v < 0 {
		bad("max_new_tokens must be >= 0, got %d", *v)
	}
	if v := p.MinNewTokens; v != nil {
		if *v < 0 {
			bad("min_new_tokens must be >= 0, got %d", *v)
		} else if p.MaxNewTokens != nil && *v > *p.MaxNewTokens {
			bad("min_new_tokens (%d) must be <= max_new_tokens (%d)", *v, *p.MaxNewTokens)
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New("sampling params: " + strings.Join(errs, "; "))
}

// samplingKeys lists the JSON names of SamplingParams, sorted.
var samplingKeys = func() []string {
	t := reflect.TypeFor[SamplingParams]()
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	slices.Sort(keys)
	return keys
}()

// samplingHints names the SGLang key for common OpenAI spellings, and
// explains SGLang keys gendex does not send.
var samplingHints = map[string]string{
	"max_tokens":            "SGLang calls it max_new_tokens",
	"max_completion_tokens": "SGLang calls it max_new_tokens",
	"min_tokens":            "SGLang calls it min_new_tokens",
	"seed":                  "SGLang calls it sampling_seed",
	"n":                     "gendex sends one sample per request",
	"json_schema":           "constrained decoding is not supported",
	"regex":                 "constrained decoding is not supported",
	"ebnf":                  "constrained decoding is not supported",
	"structural_tag":        "constrained decoding is not supported",
	"stop_regex":            "not supported",
}

// ParseSampling decodes a JSON sampling_params object, such as a prompt
// line's per-prompt override. It rejects keys SamplingParams does not know
// (SGLang answers an unknown sampling key with HTTP 500 for every request),
// wrong value types and out-of-range values, with an error that names the
// key. A null value leaves the field unset.
func ParseSampling(raw []byte) (SamplingParams, error) {
	var p SamplingParams
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return p, errors.New("sampling_params: want a JSON object")
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if _, ok := slices.BinarySearch(samplingKeys, k); ok {
			continue
		}
		if hint, ok := samplingHints[k]; ok {
			return p, fmt.Errorf("sampling_params: unknown key %q (%s)", k, hint)
		}
		return p, fmt.Errorf("sampling_params: unknown key %q (known: %s)", k, strings.Join(samplingKeys, ", "))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return p, fmt.Errorf("sampling_params: key %q: cannot use JSON %s as %s", te.Field, te.Value, te.Type)
		}
		return p, fmt.Errorf("sampling_params: %w", err)
	}
	if err := p.Validate(); err != nil {
		return p, err
	}
	return p, nil
}
