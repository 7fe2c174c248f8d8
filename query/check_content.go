package query

import (
	"fmt"
	"hash/fnv"
	"strings"

	"gendex/store"
)

// judge makes the content checks of one answer, over every assistant turn
// its record holds: a turn is empty when it has neither text (beyond
// white space) nor a tool call; <think> markers in a turn's text while its
// reasoning is kept apart. It returns what it found of the answer, with
// its distinct texts (prompt counts them towards repeated_text).
func (rs *recordStats) judge(a CheckedAnswer) judged {
	empty, think := len(a.Turns) == 0, false
	var seen []uint64 // this answer's texts, each counted once
	for _, t := range a.Turns {
		if strings.TrimSpace(t.Text) == "" {
			empty = empty || t.Calls == 0
			continue
		}
		if t.Reasoning != "" && (strings.Contains(t.Text, "<think>") || strings.Contains(t.Text, "</think>")) {
			think = true
		}
		h := fnv.New64a()
		h.Write([]byte(t.Text))
		if sum := h.Sum64(); !containsSum(seen, sum) {
			seen = append(seen, sum)
		}
	}
	if empty {
		rs.empty++
	}
	if think {
		rs.think++
	}
	return judged{empty: empty, think: think, texts: seen}
}

// judged is the content checks' finding on one answer: an empty turn,
// <think> markers, and the hashes of its distinct texts.
type judged struct {
	empty, think bool
	texts        []uint64
}

// repeatedIDs are the ids of the answers that hold a text repeated_text
// counts (rs.textsOf, kept when the walk lists them).
func (rs *recordStats) repeatedIDs() []string {
	at := repeatAt(rs.prompts)
	var ids []string
	for _, a := range rs.textsOf {
		for _, sum := range a.texts {
			if rs.texts[sum] >= at {
				ids = append(ids, a.id)
				break
			}
		}
	}
	return ids
}

func containsSum(sums []uint64, s uint64) bool {
	for _, x := range sums {
		if x == s {
			return true
		}
	}
	return false
}

// repeatAt is how many prompts with one answer text make it a sign of a
// broken template or server: at least 3, and more than 1% of the prompts
// with a record.
func repeatAt(prompts uint64) uint64 { return max(3, prompts/100+1) }

// promptTexts is what the walk keeps of the prompt whose answers it is
// reading: a dataset's samples (gen --samples) come one after the other
// in key order, each sample a unit of its prompt.
type promptTexts struct {
	id      string
	texts   []uint64 // every distinct text of its answers so far
	first   []uint64 // its first answer's texts
	answers int      // its answers read
	alike   bool     // every answer so far has the first's texts
}

// count counts the texts of the answer unit (a unit's key) towards
// repeated_text and samples_alike: a text counts once per prompt,
// however many of its samples hold it (a prompt's samples alike are
// samples_alike's, not a sign of a broken server: repeated_text counts
// prompts), and each answer holding a repeated text counts.
func (rs *recordStats) count(unit string, texts []uint64) {
	id, _ := store.SplitUnit(unit)
	p := &rs.prompt
	if p.answers == 0 || p.id != id {
		rs.endPrompt()
		*p = promptTexts{id: id, first: texts, alike: true}
		rs.prompts++
	} else if p.alike && !sameSums(p.first, texts) {
		p.alike = false
	}
	p.answers++
	for _, sum := range texts {
		rs.textAnswers[sum]++
		if !containsSum(p.texts, sum) {
			p.texts = append(p.texts, sum)
			rs.texts[sum]++
		}
	}
}

// endPrompt counts the prompt the walk leaves towards samples_alike: two
// or more samples, each with the same texts (none: not alike).
func (rs *recordStats) endPrompt() {
	p := &rs.prompt
	if p.answers >= 2 && p.alike && len(p.first) > 0 {
		rs.alikePrompts++
		rs.alikeAnswers += uint64(p.answers)
	}
	*p = promptTexts{}
}

// sameSums reports whether a and b hold the same texts.
func sameSums(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for _, s := range a {
		if !containsSum(b, s) {
			return false
		}
	}
	return true
}

// content is the content checks' findings.
func (rs *recordStats) content(dir string) []finding {
	if !rs.read {
		if rs.records == 0 {
			return nil
		}
		return []finding{{reason: ReasonNotRead, detail: "the content checks were not made: " + rs.why}}
	}
	var fs []finding
	if rs.think > 0 {
		fs = append(fs, finding{reason: ReasonThink, blocks: true, count: rs.think,
			detail: "answers with <think> markers in the content of a turn while its reasoning is kept apart",
			fix:    "serve with the model's --reasoning-parser, then " + redoFix(ReasonThink, dir)})
	}
	if rs.empty > 0 {
		fs = append(fs, finding{reason: ReasonEmpty, blocks: true, count: rs.empty,
			detail: "records of answers with an assistant turn that has neither text nor a tool call",
			fix:    redoFix(ReasonEmpty, dir)})
	}
	var same, texts, most uint64
	at := repeatAt(rs.prompts)
	for sum, n := range rs.texts {
		if n >= at {
			same += rs.textAnswers[sum]
			texts++
			most = max(most, n)
		}
	}
	if same > 0 {
		fs = append(fs, finding{reason: ReasonRepeated, blocks: true, count: same,
			detail: fmt.Sprintf("answers sharing one text with %d or more prompts (%d texts, the most repeated by %d prompts): a broken template or server?", at-1, texts, most),
			fix:    "check the server's chat template, then " + redoFix(ReasonRepeated, dir)})
	}
	if rs.alikePrompts > 0 {
		prompts := fmt.Sprintf("%d prompts", rs.alikePrompts)
		if rs.alikePrompts == 1 {
			prompts = "1 prompt"
		}
		fs = append(fs, finding{reason: ReasonSamplesAlike, count: rs.alikeAnswers,
			detail: "answers of " + prompts + " whose samples all gave one text, every turn (greedy sampling: temperature 0?): copies, not variety",
			fix:    fmt.Sprintf("ask with a temperature above 0 (or a --mix): gendex gen --server URL --samples %d --temperature 0.8 --out NEWDIR %s", max(rs.samples, 2), quoteArg(dir))})
	}
	return fs
}

// redoFix is the fix that asks again the answers reason counts in dir:
// check --ids lists them into FILE, gen --redo FILE asks them of the
// server at URL.
func redoFix(reason, dir string) string {
	d := quoteArg(dir)
	return "gendex check --ids " + reason + " " + d + " > FILE; gendex gen --server URL --redo FILE " + d
}
