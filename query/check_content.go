package query

import (
	"fmt"
	"hash/fnv"
	"strings"
)

// judge makes the content checks of one answer, over every assistant turn
// its record holds: a turn is empty when it has neither text (beyond
// white space) nor a tool call; <think> markers in a turn's text while its
// reasoning is kept apart; and each distinct text of a turn counts once
// for the answer towards repeated_text. It returns what it found of the
// answer.
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
			rs.texts[sum]++
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
	at := repeatAt(rs.records)
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
// broken template or server: at least 3, and more than 1% of the records.
func repeatAt(records uint64) uint64 { return max(3, records/100+1) }

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
	at := repeatAt(rs.records)
	for _, n := range rs.texts {
		if n >= at {
			same += n
			texts++
			most = max(most, n)
		}
	}
	if same > 0 {
		fs = append(fs, finding{reason: ReasonRepeated, blocks: true, count: same,
			detail: fmt.Sprintf("answers sharing one text with %d or more prompts (%d texts, the most repeated %d times): a broken template or server?", at-1, texts, most),
			fix:    "check the server's chat template, then " + redoFix(ReasonRepeated, dir)})
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
