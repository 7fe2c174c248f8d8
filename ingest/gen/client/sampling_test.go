package client

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// marshal encodes v as the client does (no HTML escaping).
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), err
}

func TestSamplingJSONSendsOnlySetKeys(t *testing.T) {
	for _, tc := range []struct {
		p    SamplingParams
		want string
	}{
		{SamplingParams{}, `{}`},
		{SamplingParams{Temperature: new(0.0), TopK: new(-1), IgnoreEOS: new(false)}, `{"temperature":0,"top_k":-1,"ignore_eos":false}`},
		{SamplingParams{MaxNewTokens: new(10240), Stop: Strings{"</s>", "\n\n"}, SamplingSeed: new(int64(1))},
			`{"max_new_tokens":10240,"stop":["</s>","\n\n"],"sampling_seed":1}`},
		{SamplingParams{LogitBias: map[string]float64{"42": -100}, NoStopTrim: new(true), SpacesBetweenSpecialTokens: new(false)},
			`{"spaces_between_special_tokens":false,"no_stop_trim":true,"logit_bias":{"42":-100}}`},
	} {
		b, err := marshal(tc.p)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal = %s, %v; want %s", b, err, tc.want)
		}
	}
}

func TestOpenAIFields(t *testing.T) {
	p := SamplingParams{
		MaxNewTokens: new(100), MinNewTokens: new(1), Temperature: new(0.5), TopP: new(0.9), TopK: new(40), MinP: new(0.1),
		FrequencyPenalty: new(0.2), PresencePenalty: new(0.3), RepetitionPenalty: new(1.1), Stop: Strings{"x"},
		StopTokenIDs: []int{2}, IgnoreEOS: new(true), SkipSpecialTokens: new(false), SpacesBetweenSpecialTokens: new(true),
		NoStopTrim: new(true), SamplingSeed: new(int64(9)), LogitBias: map[string]float64{"1": 2},
	}
	b, _ := marshal(p.OpenAIFields())
	want := `{"frequency_penalty":0.2,"ignore_eos":true,"logit_bias":{"1":2},"max_tokens":100,"min_p":0.1,"min_tokens":1,` +
		`"no_stop_trim":true,"presence_penalty":0.3,"repetition_penalty":1.1,"seed":9,"skip_special_tokens":false,` +
		`"spaces_between_special_tokens":true,"stop":["x"],"stop_token_ids":[2],"temperature":0.5,"top_k":40,"top_p":0.9}`
	if string(b) != want {
		t.Errorf("OpenAIFields\n got %s\nwant %s", b, want)
	}
	if m := (SamplingParams{}).OpenAIFields(); len(m) != 0 {
		t.Errorf("unset params map to %v", m)
	}
	// Every SamplingParams field must be mapped.
	if n := len(p.OpenAIFields()); n != reflect.TypeFor[SamplingParams]().NumField() {
		t.Errorf("OpenAIFields maps %d of %d fields", n, reflect.TypeFor[SamplingParams]().NumField())
	}
}

func TestMerge(t *testing.T) {
	run := SamplingParams{MaxNewTokens: new(2048), Temperature: new(0.7), TopP: new(0.95), Stop: Strings{"a"}}
	over := SamplingParams{MaxNewTokens: new(10240), Temperature: new(0.0), StopTokenIDs: []int{2}}
	got := run.Merge(over)
	b, _ := marshal(got)
	if want := `{"max_new_tokens":10240,"temperature":0,"top_p":0.95,"stop":["a"],"stop_token_ids":[2]}`; string(b) != want {
		t.Errorf("Merge = %s; want %s", b, want)
	}
	if b, _ := marshal(run); string(b) != `{"max_new_tokens":2048,"temperature":0.7,"top_p":0.95,"stop":["a"]}` {
		t.Errorf("Merge changed its receiver: %s", b)
	}
	// Merging a full override must replace every field.
	full := SamplingParams{
		MaxNewTokens: new(1), MinNewTokens: new(1), Temperature: new(1.0), TopP: new(1.0), TopK: new(1), MinP: new(1.0),
		FrequencyPenalty: new(1.0), PresencePenalty: new(1.0), RepetitionPenalty: new(1.0), Stop: Strings{"z"},
		StopTokenIDs: []int{1}, IgnoreEOS: new(true), SkipSpecialTokens: new(true), SpacesBetweenSpecialTokens: new(true),
		NoStopTrim: new(true), SamplingSeed: new(int64(1)), LogitBias: map[string]float64{"1": 1},
	}
	a, _ := marshal(SamplingParams{}.Merge(full))
	c, _ := marshal(full)
	if string(a) != string(c) {
		t.Errorf("Merge dropped a field:\n got %s\nwant %s", a, c)
	}
}

func TestParseSampling(t *testing.T) {
	p, err := ParseSampling([]byte(`{"temperature":0.6,"top_p":0.95,"stop":"</s>","max_new_tokens":null,"stop_token_ids":[2,3]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := marshal(p)
	if want := `{"temperature":0.6,"top_p":0.95,"stop":["</s>"],"stop_token_ids":[2,3]}`; string(b) != want {
		t.Errorf("parsed %s; want %s", b, want)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"max_tokens":10}`, `sampling_params: unknown key "max_tokens" (SGLang calls it max_new_tokens)`},
		{`{"seed":1}`, `sampling_params: unknown key "seed" (SGLang calls it sampling_seed)`},
		{`{"n":2}`, `sampling_params: unknown key "n" (gendex sends one sample per request)`},
		{`{"temprature":1}`, `sampling_params: unknown key "temprature" (known: frequency_penalty, ignore_eos,`},
		{`{"temperature":"hot"}`, `sampling_params: key "temperature": cannot use JSON string as float64`},
		{`{"stop":5}`, `stop: want a string or an array of strings`},
		{`{"top_p":0}`, `sampling params: top_p must be in (0, 1], got 0`},
		{`{"max_new_tokens":5,"min_new_tokens":9}`, `min_new_tokens (9) must be <= max_new_tokens (5)`},
		{`[1]`, `sampling_params: want a JSON object`},
		{`null`, `sampling_params: want a JSON object`},
	} {
		_, err := ParseSampling([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseSampling(%s) = %v; want %q", tc.in, err, tc.want)
		}
	}
	// Every known key parses.
	var all []string
	for _, k := range samplingKeys {
		v := `1`
		switch k {
		case "stop":
			v = `"x"`
		case "stop_token_ids":
			v = `[1]`
		case "logit_bias":
			v = `{"1":1}`
		case "ignore_eos", "skip_special_tokens", "spaces_between_special_tokens", "no_stop_trim":
			v = `true`
		}
		all = append(all, fmt.Sprintf("%q:%s", k, v))
	}
	if _, err := ParseSampling([]byte("{" + strings.Join(all, ",") + "}")); err != nil {
		t.Errorf("all known keys: %v", err)
	}
}

func TestValidate(t *testing.T) {
	ok := SamplingParams{Temperature: new(0.0), TopP: new(1.0), TopK: new(-1), MinP: new(0.0), RepetitionPenalty: new(2.0),
		FrequencyPenalty: new(-2.0), PresencePenalty: new(2.0), MaxNewTokens: new(0), MinNewTokens: new(0)}
	if err := ok.Validate(); err != nil {
		t.Errorf("boundary values: %v", err)
	}
	if err := (SamplingParams{Temperature: new(0.0), TopK: new(0)}).Validate(); err != nil {
		t.Errorf("greedy with top_k 0 (SGLang forces top_k=1): %v", err)
	}
	bad := SamplingParams{Temperature: new(-1.0), TopK: new(0), MinP: new(1.5), RepetitionPenalty: new(0.0),
		FrequencyPenalty: new(3.0), PresencePenalty: new(-3.0), MaxNewTokens: new(-1), MinNewTokens: new(-1)}
	err := bad.Validate()
	for _, key := range []string{"temperature", "top_k", "min_p", "repetition_penalty", "frequency_penalty", "presence_penalty", "max_new_tokens", "min_new_tokens"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("Validate() = %v; want it to name %s", err, key)
		}
	}
}
