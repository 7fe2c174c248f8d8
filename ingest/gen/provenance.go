package gen

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"gendex/ingest/gen/client"
	"gendex/store"
)

// Provenance: every answer gen writes says how it was made, in its
// "provenance" object: the sampling gen sent (the keys it did not send are
// the server's defaults, and say so), who answered, as far as the
// server's /v1/models tells (the model, its path, the server software,
// the context length), and how gen asked ("gen": the API, so the route,
// --turns, the dataset's id rule, the prompt key and, on /generate, the
// tool-call parser). The index keeps each distinct object once per
// answer file, with its lines (store.Maker). Before the first request to a
// server, a run compares its own with those of the answers already in each
// dataset: a difference is refused, naming both sides, unless
// --allow-mixed. A "gen" key an answer lacks (written by a gendex before
// it recorded them) is unknown: not compared, and said once.

// provenance is the "provenance" object of a server's answers. Server
// holds model, model_path, software and context_length from /v1/models,
// and what client.ServerIdentity read (version, chat template, parsers,
// speculative settings); Gen how gen asked (askedOf, and the dataset's
// "id": dsRun.provenanceOf). Its keys are written sorted.
type provenance struct {
	Sampling json.RawMessage `json:"sampling"`
	Unset    string          `json:"unset"`
	Server   map[string]any  `json:"server"`
	Gen      map[string]any  `json:"gen,omitempty"`
	// Mix is each --mix key's spec; Drawn, in an answer's, the part of
	// each spec its record drew (mix.go).
	Mix   map[string]string `json:"mix,omitempty"`
	Drawn map[string]string `json:"drawn,omitempty"`
	// Samples is the run's answers per prompt (--samples), absent for
	// one: compared as 1 (provenanceDiff).
	Samples int `json:"samples,omitempty"`
}

// provenanceOf is the compact "provenance" object of the answers a server
// described by info and ident (client.ServerIdentity, nil: none told)
// makes, asked with sampling and the mixtures mix, as asked says (askedOf).
func provenanceOf(sampling client.SamplingParams, mix Mix, samples int, model string, info client.ModelInfo, ident, asked map[string]any) []byte {
	s, _ := json.Marshal(sampling)
	p := provenance{Sampling: s, Unset: "server defaults", Server: map[string]any{}, Gen: asked, Mix: mix.specs()}
	if samples > 1 {
		p.Samples = samples
	}
	for k, v := range ident {
		p.Server[k] = v
	}
	if model != "" {
		p.Server["model"] = model
	}
	if info.Root != "" && info.Root != model && p.Server["model_path"] == nil {
		p.Server["model_path"] = info.Root
	}
	if sw := info.Flavor.String(); sw != "" {
		p.Server["software"] = sw
	}
	if info.MaxModelLen > 0 {
		p.Server["context_length"] = info.MaxModelLen
	}
	b, _ := json.Marshal(p)
	return b
}

// The "gen" values of the rules gen follows when no flag names one.
const (
	builtinIDRule     = "custom_id or id"
	builtinPromptRule = "input_ids, text, messages or conversations"
)

// askedOf is the "gen" part of the provenance of the answers a server
// makes in this run: api, the one it is asked with (run.apiFor; so the route: raw
// /generate on ids gen made, or the server's chat template), --turns, the
// prompt key (--prompt), with several samples per prompt the seed each is
// sent (sampleSeedRule: "sampling" holds the seed as given) and, on /generate, the tool-call parser
// /parse_function_call reads the calls with (--tool-call-parser, else the
// server's own, from ident). The dataset's id rule is added per dataset
// (dsRun.provenanceOf).
func (w *writer) askedOf(api client.API, ident map[string]any) map[string]any {
	g := map[string]any{"api": string(api), "turns": w.cfg.Turns, "prompt": builtinPromptRule}
	if p := w.cfg.Paths.Prompt; p != "" {
		g["prompt"] = p
	}
	if w.cfg.samples() > 1 {
		g["sample_seed"] = sampleSeedRule
	}
	if api == client.APIGenerate {
		parser := w.cfg.ToolCallParser
		if parser == "" {
			parser, _ = ident["tool_call_parser"].(string)
		}
		if parser != "" {
			g["tool_call_parser"] = parser
		}
	}
	return g
}

// provenanceOf is prov, a server's provenance, with the dataset's id rule
// in its "gen" part, and without what cannot change its answers: --turns
// for a dataset without chat prompts (none this run reads, and no answer
// asked with turns), the tool-call parser for one without tool prompts. It is the provenance of the answers the server makes for
// the dataset, made once per server provenance.
func (ds *dsRun) provenanceOf(prov []byte) []byte {
	ds.provMu.Lock()
	defer ds.provMu.Unlock()
	if b, ok := ds.provs[string(prov)]; ok {
		return b
	}
	var p provenance
	if len(prov) == 0 || json.Unmarshal(prov, &p) != nil {
		return prov
	}
	if p.Gen == nil {
		p.Gen = map[string]any{}
	}
	p.Gen["id"] = ds.idRule
	if _, ok := p.Gen["prompt"]; ok && ds.promptRule != "" {
		p.Gen["prompt"] = ds.promptRule
	}
	if !ds.shapes[shapeChat] && !askedTurns(ds.makers.made) {
		delete(p.Gen, "turns")
	}
	if !ds.tools {
		delete(p.Gen, "tool_call_parser")
	}
	b, _ := json.Marshal(p)
	if ds.provs == nil {
		ds.provs = map[string][]byte{}
	}
	ds.provs[string(prov)] = b
	return b
}

// askedTurns reports whether some of made were asked with a --turns.
func askedTurns(made []store.Maker) bool {
	for _, mk := range made {
		var p provenance
		if json.Unmarshal(mk.Provenance, &p) == nil && p.Gen["turns"] != nil {
			return true
		}
	}
	return false
}

// saysAsked reports whether a provenance says how gen asked (its "gen"
// object): an older gendex's does not.
func saysAsked(prov []byte) bool {
	var p provenance
	return json.Unmarshal(prov, &p) == nil && p.Gen != nil
}

// ignoredInComparison are the settings a resume may change: the limit
// on new tokens changes only the answers it cuts (gen --redo truncated
// raises it), and gen clips it per prompt anyway.
var ignoredInComparison = map[string]bool{"sampling.max_new_tokens": true}

// flatten lists a JSON object's leaves by their dotted path.
func flatten(prefix string, v any, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			flatten(strings.TrimPrefix(prefix+"."+k, "."), e, out)
		}
	default:
		b, _ := json.Marshal(x)
		out[prefix] = string(b)
	}
}

// provenanceDiff says how two provenance objects differ, "" when they do
// not (the settings a resume may change aside): "sampling.temperature:
// 0.7 before, 0 now". What a record drew from a mixture ("drawn") is its
// own, not the run's: the mixtures' specs ("mix") are compared, and the
// samples per prompt ("samples", 1 where absent). A "gen"
// key one side lacks is unknown there (an
// older gendex did not record it): not a difference; nor are two prompt
// rules one of which extends the other (samePromptRule).
func provenanceDiff(then, now []byte) string {
	var a, b any
	if json.Unmarshal(then, &a) != nil || json.Unmarshal(now, &b) != nil {
		return ""
	}
	fa, fb := map[string]string{}, map[string]string{}
	flatten("", a, fa)
	flatten("", b, fb)
	for _, f := range []map[string]string{fa, fb} {
		if _, ok := f["samples"]; !ok {
			f["samples"] = "1" // one answer per prompt, as before --samples
		}
	}
	keys := map[string]bool{}
	for k := range fa {
		keys[k] = true
	}
	for k := range fb {
		keys[k] = true
	}
	var diffs []string
	for k := range keys {
		_, inA := fa[k]
		_, inB := fb[k]
		if ignoredInComparison[k] || fa[k] == fb[k] || strings.HasPrefix(k, "drawn.") || strings.HasPrefix(k, "gen.") && (!inA || !inB) ||
			k == "gen.prompt" && samePromptRule(unquote(fa[k]), unquote(fb[k])) {
			continue
		}
		diffs = append(diffs, fmt.Sprintf("%s: %s before, %s now", k, orUnset(fa[k]), orUnset(fb[k])))
	}
	sort.Strings(diffs)
	return strings.Join(diffs, "; ")
}

// unquote is the JSON string v as Go's ("" for none).
func unquote(v string) string {
	var s string
	json.Unmarshal([]byte(v), &s)
	return s
}

func orUnset(v string) string {
	if v == "" {
		return "unset (the server's default)"
	}
	return v
}

// describe says a provenance in a few words: the model and the sampling.
func describe(model string, prov []byte) string {
	var p provenance
	if json.Unmarshal(prov, &p) != nil {
		if model == "" {
			return "an unknown model, unknown sampling"
		}
		return "model " + model + ", unknown sampling"
	}
	s := fmt.Sprintf("model %v, sampling %s", p.Server["model"], p.Sampling)
	for _, k := range slices.Sorted(maps.Keys(p.Mix)) {
		s += fmt.Sprintf(", --mix %s=%s", k, p.Mix[k])
	}
	if p.Samples > 1 {
		s += fmt.Sprintf(", --samples %d", p.Samples)
	}
	return s
}

// checkProvenance stops the run, before the first request to server,
// when the answers it would make (prov, by model, with each dataset's id
// rule) are made in none of the ways of those already in a dataset of the
// run: other sampling, another server identity, or asked otherwise (the
// API, --turns, --id, --prompt, the tool-call parser). Lines without a
// provenance (another tool's, or written before gen wrote it) are
// compared by their model only; a provenance without "gen" (an older
// gendex's) on the rest, which is said. A
// dataset already made in several ways (--allow-mixed, or several
// servers) takes answers made in any of them. --allow-mixed lets any
// through ('gendex check' reports the dataset mixed).
func (w *writer) checkProvenance(server, model string, prov []byte) error {
	if w.cfg.AllowMixed {
		return nil
	}
	for _, ds := range w.sets {
		prov := ds.provenanceOf(prov)
		var byProv, byModel *store.Maker // the largest way that differs
		provSame, modelSame := false, false
		var unasked uint64 // answers whose provenance does not say how gen asked
		for i := range ds.makers.made {
			mk := &ds.makers.made[i]
			if mk.Provenance != nil && !saysAsked(mk.Provenance) {
				unasked += mk.Lines
			}
			switch {
			case mk.Provenance != nil:
				if provenanceDiff(mk.Provenance, prov) == "" {
					provSame = true
				} else if byProv == nil || mk.Lines > byProv.Lines {
					byProv = mk
				}
			case mk.Model != "" && model != "":
				if mk.Model == model {
					modelSame = true
				} else if byModel == nil || mk.Lines > byModel.Lines {
					byModel = mk
				}
			}
		}
		if unasked > 0 {
			w.ctl.once("unasked "+ds.Name, "gen: %s holds %d answers written by an older gendex, whose provenance does not say how they were asked (the API, --turns, --id, --prompt, the tool-call parser): those are unknown, not compared",
				filepath.Dir(ds.Raw), unasked)
		}
		var diff string
		var then *store.Maker
		switch {
		case byProv != nil && !provSame:
			then, diff = byProv, provenanceDiff(byProv.Provenance, prov)
		case byModel != nil && !modelSame:
			then, diff = byModel, fmt.Sprintf("server.model: %q before, %q now", byModel.Model, model)
		default:
			continue
		}
		if ds.promptClash != "" && strings.Contains(diff, "gen.prompt:") {
			diff += "; " + ds.promptClash
		}
		return &stopError{msg: fmt.Sprintf("%s holds %d answers made with %s; %s would answer the rest with %s (what differs: %s)",
			filepath.Dir(ds.Raw), sameWay(ds.makers.made, then), describe(then.Model, then.Provenance), server, describe(model, prov), diff),
			hint: "a resume keeps the run one run: give the same sampling, --mix, --samples, server, --api, --turns, --id, --prompt and --tool-call-parser as before, or --allow-mixed to answer the rest anyway ('gendex check' then reports the dataset as mixed), or --out DIR for a run of its own; nothing was sent"}
	}
	return nil
}

// sameWay counts the answer lines made as then was: by its model, with a
// provenance that differs from its in nothing compared (a record's own
// draw from a --mix aside).
func sameWay(made []store.Maker, then *store.Maker) uint64 {
	var n uint64
	for _, mk := range made {
		if mk.Model == then.Model && (mk.Provenance == nil) == (then.Provenance == nil) && provenanceDiff(mk.Provenance, then.Provenance) == "" {
			n += mk.Lines
		}
	}
	return n
}
