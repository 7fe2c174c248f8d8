package gen

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"gendex/ingest/gen/client"
)

// A mixture (gen --mix KEY=SPEC) samples one key per record from a
// distribution instead of one value for the run. The value a record gets
// is drawn from a hash of (dataset, id, sample, seed, key), never from a
// random state, so a resume, a shard, a redo and a fresh run give every
// record the same value. A conversation (its turns, its tool steps) is one
// record: one draw, the same value on every request it makes.
//
// This file owns the grammar, the draw and how a draw reaches a request
// (sampling fields, chat template kwargs, reasoning_effort) and an
// answer's provenance ("mix": each key's spec, run-wide; "drawn": the
// part of each spec this record drew). It touches no file and no index.

// Mix is the run's mixtures, one per key, sorted by key.
type Mix []MixKey

// MixKey is one key's mixture: its spec as given (its provenance) and its
// parts, in the spec's order.
type MixKey struct {
	Key   string
	Spec  string
	parts []mixPart
}

// mixPart is one VALUE:WEIGHT of a spec. label is VALUE as written in
// the spec, and as "drawn" records it; value is what is sent (float64,
// int, bool or string); a uniform part (u(lo,hi)) sends a float drawn in
// [lo, hi).
type mixPart struct {
	label   string
	weight  float64
	value   any
	uniform bool
	lo, hi  float64
}

// mixKind is how a key's values are written and sent.
type mixKind int

const (
	mixFloat  mixKind = iota // a sampling field, float; u(a,b) allowed
	mixInt                   // a sampling field, integer
	mixBool                  // enable_thinking: a chat template kwarg
	mixString                // reasoning_effort
)

// mixKeys are the keys --mix draws, and their kinds.
var mixKeys = map[string]mixKind{
	"temperature": mixFloat, "top_p": mixFloat, "min_p": mixFloat, "top_k": mixInt,
	"frequency_penalty": mixFloat, "presence_penalty": mixFloat, "repetition_penalty": mixFloat,
	"enable_thinking": mixBool, "reasoning_effort": mixString,
}

// MixKeys lists the keys --mix takes, sorted.
func MixKeys() []string {
	keys := make([]string, 0, len(mixKeys))
	for k := range mixKeys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// weightSlack is how far a spec's weights may sum from 1.
const weightSlack = 1e-6

// ParseMixKey parses one --mix value, KEY=SPEC, where SPEC is
// VALUE:WEIGHT,... with weights summing to 1 and, for a float key, a
// VALUE of u(LO,HI) drawing uniformly in [LO, HI). The error names the
// spec and says what is wrong.
func ParseMixKey(arg string) (MixKey, error) {
	key, spec, ok := strings.Cut(arg, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" || spec == "" {
		return MixKey{}, fmt.Errorf("--mix %q: want KEY=VALUE:WEIGHT,... such as temperature=0:0.15,1.0:0.70,u(0.2,1.0):0.15", arg)
	}
	kind, known := mixKeys[key]
	if !known {
		return MixKey{}, fmt.Errorf("--mix %q: unknown key %q (known: %s)", arg, key, strings.Join(MixKeys(), ", "))
	}
	m := MixKey{Key: key, Spec: spec}
	sum := 0.0
	for _, item := range splitSpec(spec) {
		p, err := parsePart(key, kind, item)
		if err != nil {
			return MixKey{}, fmt.Errorf("--mix %q: %v", arg, err)
		}
		if slices.ContainsFunc(m.parts, func(q mixPart) bool { return q.label == p.label }) {
			return MixKey{}, fmt.Errorf("--mix %q: %s is given twice", arg, p.label)
		}
		m.parts = append(m.parts, p)
		sum += p.weight
	}
	if math.Abs(sum-1) > weightSlack {
		return MixKey{}, fmt.Errorf("--mix %q: the weights sum to %v, want 1", arg, sum)
	}
	return m, nil
}

// splitSpec splits a spec at its commas outside parentheses.
func splitSpec(spec string) []string {
	var items []string
	depth, start := 0, 0
	for i, c := range spec {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, spec[start:i])
				start = i + 1
			}
		}
	}
	return append(items, spec[start:])
}

// parsePart parses one VALUE:WEIGHT of key's spec.
func parsePart(key string, kind mixKind, item string) (mixPart, error) {
	i := strings.LastIndexByte(item, ':')
	if i < 0 {
		return mixPart{}, fmt.Errorf("%q: want VALUE:WEIGHT", item)
	}
	label, w := strings.TrimSpace(item[:i]), strings.TrimSpace(item[i+1:])
	weight, err := strconv.ParseFloat(w, 64)
	if err != nil || !(weight > 0 && weight <= 1) {
		return mixPart{}, fmt.Errorf("%q: the weight %q is not a number in (0, 1]", item, w)
	}
	p := mixPart{label: label, weight: weight}
	switch {
	case kind == mixFloat && strings.HasPrefix(label, "u(") && strings.HasSuffix(label, ")"):
		lo, hi, _ := strings.Cut(label[2:len(label)-1], ",")
		var e1, e2 error
		p.lo, e1 = strconv.ParseFloat(strings.TrimSpace(lo), 64)
		p.hi, e2 = strconv.ParseFloat(strings.TrimSpace(hi), 64)
		if e1 != nil || e2 != nil || !(p.lo < p.hi) {
			return mixPart{}, fmt.Errorf("%q: want u(LO,HI) with numbers LO < HI", label)
		}
		p.uniform, p.value = true, p.lo
		if err := validMixValue(key, p.lo); err != nil {
			return mixPart{}, err
		}
		return p, validMixValue(key, p.hi)
	case kind == mixFloat:
		f, err := strconv.ParseFloat(label, 64)
		if err != nil {
			return mixPart{}, fmt.Errorf("%q: %s takes numbers or u(LO,HI)", label, key)
		}
		p.value = f
	case kind == mixInt:
		n, err := strconv.Atoi(label)
		if err != nil {
			return mixPart{}, fmt.Errorf("%q: %s takes integers", label, key)
		}
		p.value = n
	case kind == mixBool:
		b, err := strconv.ParseBool(label)
		if err != nil || label != strconv.FormatBool(b) {
			return mixPart{}, fmt.Errorf("%q: %s takes true or false", label, key)
		}
		p.value = b
	default:
		if label == "" || strings.ContainsAny(label, " \t\"") {
			return mixPart{}, fmt.Errorf("%q: %s takes a word such as low, medium or high", label, key)
		}
		p.value = label
	}
	return p, validMixValue(key, p.value)
}

// validMixValue checks a sampling key's value as the run's flags are
// checked (client.SamplingParams.Validate).
func validMixValue(key string, v any) error {
	var sp client.SamplingParams
	if !setSampling(&sp, key, v) {
		return nil // not a sampling field
	}
	return sp.Validate()
}

// setSampling sets key to v in sp, and reports whether key is a sampling
// field.
func setSampling(sp *client.SamplingParams, key string, v any) bool {
	f, _ := v.(float64)
	switch key {
	case "temperature":
		sp.Temperature = &f
	case "top_p":
		sp.TopP = &f
	case "min_p":
		sp.MinP = &f
	case "frequency_penalty":
		sp.FrequencyPenalty = &f
	case "presence_penalty":
		sp.PresencePenalty = &f
	case "repetition_penalty":
		sp.RepetitionPenalty = &f
	case "top_k":
		n, _ := v.(int)
		sp.TopK = &n
	default:
		return false
	}
	return true
}

// mixUnit maps (dataset, id, sample, seed, key) to two numbers in [0, 1):
// the first picks a part of the spec, the second places a uniform part's
// value. SHA-256 of the five, each ended by a zero byte: a change here
// re-draws every record of every dataset (mix_test.go pins values).
func mixUnit(dataset, id string, sample int, seed int64, key string) (pick, place float64) {
	h := sha256.New()
	for _, s := range []string{dataset, id, strconv.Itoa(sample), strconv.FormatInt(seed, 10), key} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	sum := h.Sum(nil)
	unit := func(b []byte) float64 { return float64(binary.BigEndian.Uint64(b)>>11) / (1 << 53) }
	return unit(sum[:8]), unit(sum[8:16])
}

// drawnKey is what one key drew for a record: the part's label and the
// value sent.
type drawnKey struct {
	key, label string
	value      any
}

// drawn is a record's draw, one per key of the run's Mix (nil: no mix).
type drawn []drawnKey

// draw is the record's draw: the record (dataset, id) and its sample (0
// until gen makes several samples per prompt), under seed.
func (m Mix) draw(dataset, id string, sample int, seed int64) drawn {
	if len(m) == 0 {
		return nil
	}
	d := make(drawn, 0, len(m))
	for _, k := range m {
		pick, place := mixUnit(dataset, id, sample, seed, k.Key)
		p := k.parts[len(k.parts)-1] // the sum's rounding falls to the last part
		acc := 0.0
		for _, q := range k.parts {
			if acc += q.weight; pick < acc {
				p = q
				break
			}
		}
		v := p.value
		if p.uniform {
			v = p.lo + (p.hi-p.lo)*place
		}
		d = append(d, drawnKey{key: k.Key, label: p.label, value: v})
	}
	return d
}

// mixSeed is the seed of a run's draws: --seed, else 0.
func mixSeed(sp client.SamplingParams) int64 {
	if sp.SamplingSeed != nil {
		return *sp.SamplingSeed
	}
	return 0
}

// applySampling sets the drawn sampling keys in sp, and returns the keys
// p's own sampling_params set that the draw replaced.
func (d drawn) applySampling(sp *client.SamplingParams, own client.SamplingParams) (replaced []string) {
	for _, k := range d {
		var mine client.SamplingParams
		if setSampling(&mine, k.key, k.value) {
			if ownSets(own, k.key) {
				replaced = append(replaced, k.key)
			}
			setSampling(sp, k.key, k.value)
		}
	}
	return replaced
}

// ownSets reports whether a prompt's own sampling sets key.
func ownSets(own client.SamplingParams, key string) bool {
	switch key {
	case "temperature":
		return own.Temperature != nil
	case "top_p":
		return own.TopP != nil
	case "min_p":
		return own.MinP != nil
	case "frequency_penalty":
		return own.FrequencyPenalty != nil
	case "presence_penalty":
		return own.PresencePenalty != nil
	case "repetition_penalty":
		return own.RepetitionPenalty != nil
	case "top_k":
		return own.TopK != nil
	}
	return false
}

// templateKwargs are the chat template kwargs the draw sets
// (enable_thinking), nil for none.
func (d drawn) templateKwargs() map[string]any {
	var kw map[string]any
	for _, k := range d {
		if v, ok := k.value.(bool); ok && k.key == "enable_thinking" {
			kw = map[string]any{"enable_thinking": v}
		}
	}
	return kw
}

// effort is the drawn reasoning_effort, "" for none.
func (d drawn) effort() string {
	for _, k := range d {
		if v, ok := k.value.(string); ok && k.key == "reasoning_effort" {
			return v
		}
	}
	return ""
}

// templated reports whether the draw sets what only a chat template
// reads (enable_thinking, reasoning_effort).
func (d drawn) templated() bool { return d.templateKwargs() != nil || d.effort() != "" }

// specs is the "mix" of a run's provenance: each key's spec.
func (m Mix) specs() map[string]string {
	if len(m) == 0 {
		return nil
	}
	s := make(map[string]string, len(m))
	for _, k := range m {
		s[k.Key] = k.Spec
	}
	return s
}

// labels is the "drawn" of an answer's provenance: each key's part.
func (d drawn) labels() map[string]string {
	if len(d) == 0 {
		return nil
	}
	s := make(map[string]string, len(d))
	for _, k := range d {
		s[k.key] = k.label
	}
	return s
}

// values is an answer's "mix_values": the value of each key as sent (a
// uniform part's number, which "drawn" names by its part), nil for none.
// A key that was not sent (unsentLabel) is left out.
func (d drawn) values() []byte {
	m := make(map[string]any, len(d))
	for _, k := range d {
		if k.value != nil {
			m[k.key] = k.value
		}
	}
	if len(m) == 0 {
		return nil
	}
	b, _ := json.Marshal(m) // keys sorted
	return b
}

// provenanceDrawn is prov, an answer's provenance for ds
// (dsRun.provenanceOf), with the record's draw in its "drawn" part; made
// once per provenance and draw.
func (ds *dsRun) provenanceDrawn(prov []byte, d drawn) []byte {
	if len(d) == 0 || len(prov) == 0 {
		return prov
	}
	key := string(prov)
	for _, k := range d {
		key += "\x00" + k.key + "=" + k.label
	}
	ds.provMu.Lock()
	defer ds.provMu.Unlock()
	if b, ok := ds.provs[key]; ok {
		return b
	}
	var p provenance
	if json.Unmarshal(prov, &p) != nil {
		return prov
	}
	p.Drawn = d.labels()
	b, _ := json.Marshal(p)
	if ds.provs == nil {
		ds.provs = map[string][]byte{}
	}
	ds.provs[key] = b
	return b
}

// template is what the draw asks of the chat template.
func (d drawn) template() client.Template {
	return client.Template{Kwargs: d.templateKwargs(), Effort: d.effort()}
}

// applyMix sets p's draw in sp, its sampling (the run's, merged with p's
// own): the draw replaces what p's own sampling_params set, which is said
// once per key.
func (a *asker) applyMix(sp *client.SamplingParams, p *Prompt) {
	for _, k := range p.mix.applySampling(sp, p.Sampling) {
		a.ctl.once("mix own "+k, "gen: prompt %s sets %s in its sampling_params; --mix %s draws it per record instead (said once, for every prompt that sets it)", p.ID, k, k)
	}
}

// mixUntemplated is the run's stop when p goes to route without a chat
// template (a text or token-id prompt to /generate or /v1/completions)
// and its draw sets what only a template reads (enable_thinking,
// reasoning_effort): the answer would not be what its provenance says it
// drew. Nil otherwise.
func mixUntemplated(s *server, p *Prompt, route string) error {
	if !p.mix.templated() || p.Messages != nil || route == "/v1/chat/completions" {
		return nil
	}
	var keys []string
	for _, k := range p.mix {
		if k.key == "enable_thinking" || k.key == "reasoning_effort" {
			keys = append(keys, k.key)
		}
	}
	return &stopError{msg: fmt.Sprintf("prompt %s is text or token ids, which %s's %s takes without a chat template, and --mix %s reaches the model only through one",
		p.ID, s.name, route, strings.Join(keys, ", --mix ")),
		hint: "give --api chat (a text prompt then goes as a user turn through the server's template), or leave " + strings.Join(keys, " and ") + " out of --mix for such prompts"}
}

// said is the mixtures as gen's startup line says them: ", drawn per
// record: temperature=SPEC, ..." ("" for none).
func (m Mix) said() string {
	if len(m) == 0 {
		return ""
	}
	parts := make([]string, len(m))
	for i, k := range m {
		parts[i] = k.Key + "=" + k.Spec
	}
	return ", drawn per record (--mix): " + strings.Join(parts, " ")
}

// ParseMix parses gen's --mix values (ParseMixKey) into the run's Mix. A
// key given twice, or also set by its own flag (--temperature and --mix
// temperature=...: flagGiven says which flags were given), is an error.
func ParseMix(args []string, flagGiven func(name string) bool) (Mix, error) {
	var m Mix
	for _, arg := range args {
		k, err := ParseMixKey(arg)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(m, func(o MixKey) bool { return o.Key == k.Key }) {
			return nil, fmt.Errorf("--mix %s is given twice: give one spec per key", k.Key)
		}
		if flag := strings.ReplaceAll(k.Key, "_", "-"); flagGiven(flag) {
			return nil, fmt.Errorf("--%s and --mix %s both set %s: give one of them", flag, k.Key, k.Key)
		}
		m = append(m, k)
	}
	slices.SortFunc(m, func(a, b MixKey) int { return strings.Compare(a.Key, b.Key) })
	return m, nil
}
