package export

import (
	"gendex/ingest"
	"gendex/store"
)

// AssistantTurn is one assistant turn of an answer, as export puts it in
// the answer's record: one for a single answer, one per turn of a
// conversation line, one per step of a tool conversation.
type AssistantTurn struct {
	Text      string // its content ("" when it has none)
	HasText   bool   // the answer has a text (its content may still be "")
	Reasoning string // its reasoning_content ("" when none)
	Calls     int    // the tool calls it makes
}

// ReadTurns reads an answer line as export reads it to make the answer's
// record: every assistant turn it holds, and the record's length in tokens
// as --max-len measures a conversations record (RecordTokens). rec is the
// line's index record (a single answer's counts are its), mapping its
// file's mapping (ingest --map; "" for none).
func ReadTurns(line []byte, rec *store.Record, mapping string) (turns []AssistantTurn, tokens int64, err error) {
	var m ingest.IDPath
	if mapping != "" {
		if m, err = ingest.ParseIDPath(mapping); err != nil {
			return nil, store.Unknown, err
		}
	}
	var pre *ingest.Answer // read once: parseAnswer then reads no field again
	if r, err := ingest.ReadAnswer(line, m); err == nil {
		pre = &r
	}
	a, err := parseAnswer(line, rec, m, pre)
	if err != nil {
		return nil, store.Unknown, err
	}
	turns = make([]AssistantTurn, len(a.turns))
	for i := range a.turns {
		t := &a.turns[i]
		calls, _ := ingest.ReadToolCalls(t.toolCalls) // checked as it was read
		turns[i] = AssistantTurn{Text: t.content(), HasText: t.text != nil || t.textRaw != nil, Reasoning: t.reasoning, Calls: len(calls)}
	}
	return turns, a.recordTokens(), nil
}

// recordTokens is the length in tokens of the record made of a: its last
// turn's prompt + completion tokens (the last turn's prompt holds every
// turn before it), store.Unknown when the answer does not say.
func (a *answer) recordTokens() int64 {
	last := a.turns[len(a.turns)-1]
	if last.promptTokens < 0 || last.completionTokens < 0 {
		return store.Unknown
	}
	return last.promptTokens + last.completionTokens
}
