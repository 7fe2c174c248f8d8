package query

import (
	"encoding/json"
	"strings"

	"gendex/store"
)

// A prompt rule gen records ("gen.prompt") may be an earlier one extended
// ("E; else P"): gen extends a dataset's rule only when no prompt line is
// read elsewhere by the two (the lines E could not read, read at the
// --prompt P that names their key). The answers of E and of "E; else P"
// are then one way, named by the widest rule.

// promptRuleElse joins the steps of an extended prompt rule, as gen
// writes it.
const promptRuleElse = "; else "

// promptRulePrefix reports whether rule a's steps start rule b's.
func promptRulePrefix(a, b string) bool {
	return a == b || strings.HasPrefix(b, a+promptRuleElse)
}

// widestPromptRules maps each prompt rule of the dataset's answers to the
// one widest rule that extends it (none when it has two: rules that are
// no one way).
func widestPromptRules(v *store.View, name string) map[string]string {
	var rules []string
	_ = v.Files(func(f store.FileState) error {
		if f.Dataset == name && f.Stage == store.Raw {
			for _, m := range f.Makers {
				if r := promptRuleOf(m.Provenance); r != "" && !containsString(rules, r) {
					rules = append(rules, r)
				}
			}
		}
		return nil
	})
	widest := map[string]string{}
	for _, a := range rules {
		var wider []string // the rules extending a that none extends
		for _, b := range rules {
			if promptRulePrefix(a, b) && !extendedBy(b, rules) {
				wider = append(wider, b)
			}
		}
		if len(wider) == 1 {
			widest[a] = wider[0]
		}
	}
	return widest
}

// extendedBy reports whether another of rules extends rule.
func extendedBy(rule string, rules []string) bool {
	for _, r := range rules {
		if r != rule && promptRulePrefix(rule, r) {
			return true
		}
	}
	return false
}

// promptRuleOf is a provenance's "gen.prompt" ("" for none).
func promptRuleOf(prov []byte) string {
	var p struct {
		Gen struct {
			Prompt string `json:"prompt"`
		} `json:"gen"`
	}
	if json.Unmarshal(prov, &p) != nil {
		return ""
	}
	return p.Gen.Prompt
}

// widenPromptRule is prov with its prompt rule the widest that extends
// it (widestPromptRules), as check counts its way.
func widenPromptRule(prov []byte, widest map[string]string) []byte {
	r := promptRuleOf(prov)
	if w := widest[r]; w == "" || w == r {
		return prov
	}
	var p map[string]any
	if json.Unmarshal(prov, &p) != nil {
		return prov
	}
	p["gen"].(map[string]any)["prompt"] = widest[r]
	b, _ := json.Marshal(p)
	return b
}

// askedAgree reports whether the "gen" parts of provenances (JSON
// objects) agree on every key both have, as gen compares them: a key one
// lacks (--turns on answers of text prompts, which it cannot change) is
// no difference.
func askedAgree(parts map[string]bool) bool {
	var seen []map[string]json.RawMessage
	for p := range parts {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(p), &m) != nil {
			return len(parts) < 2
		}
		for _, o := range seen {
			for k, v := range m {
				if w, ok := o[k]; ok && string(w) != string(v) {
					return false
				}
			}
		}
		seen = append(seen, m)
	}
	return true
}
