package gen

// A redo of a conversation answered turn by turn: whether it is asked
// again (from its first cut turn on, or where a redo of it stopped), and
// which of its recorded turns the new one keeps.

import (
	"encoding/json"

	"gendex/ingest"
	"gendex/store"
)

// chooseConversation tells whether ds's redo asks again the conversation rec, answered
// turn by turn, when its first cut turn (an earlier turn's record, or the
// last asked turn, in the conversation's line) is cut below maxNew, unless
// its line is a redo's with a limit of this run's or more; or when a redo
// stopped in the middle of it (a turn newer than the line). The index
// decides first; the line is read only for a conversation that may be.
func (rc *redoChooser) chooseConversation(v *store.View, ds *dsRun, rec *store.Record, files turnFiles, maxNew int64, own bool) (bool, error) {
	below := func(n int64) bool { return n < 0 || maxNew < 0 || n < maxNew }
	cut, atLimit, halfDone := false, false, false
	for i := 1; ; i++ {
		t, ok, err := v.Get(ds.Name, store.Turns, ingest.TurnID(rec.ID, i))
		if err != nil {
			return false, err
		}
		if !ok {
			break
		}
		// A turn newer than the conversation's line: a redo of it was
		// stopped between its turns; it goes on.
		halfDone = halfDone || t.Time > rec.Time
		if t.Finish == "length" && !cut && !atLimit {
			cut, atLimit = below(t.CompletionTokens), !below(t.CompletionTokens)
		}
	}
	if !cut && !atLimit && !halfDone && rec.Finish != "length" {
		return false, nil
	}
	line := readLine(v, rec, files)
	if !halfDone && redoneAt(line, maxNew) {
		ds.redo.done.Add(1)
		return false, nil
	}
	if !cut && !atLimit && rec.Finish == "length" {
		n := lastTurnTokens(line)
		cut, atLimit = below(n), !below(n)
	}
	switch {
	case cut || halfDone:
		ds.redo.conversations.Add(1)
		return true, nil
	case atLimit && own:
		ds.redo.ownLimit.Add(1)
	case atLimit:
		ds.redo.atLimit.Add(1)
	}
	return false, nil
}

// lastTurnTokens returns the completion tokens of the last asked turn of a
// conversation line (store.Unknown when the line does not say).
func lastTurnTokens(line []byte) int64 {
	var l struct {
		Turns []struct {
			Asked            *bool  `json:"asked"`
			CompletionTokens *int64 `json:"completion_tokens"`
		} `json:"turns"`
	}
	if json.Unmarshal(line, &l) != nil {
		return store.Unknown
	}
	for i := len(l.Turns) - 1; i >= 0; i-- {
		if t := l.Turns[i]; t.Asked == nil || *t.Asked {
			if t.CompletionTokens == nil {
				return store.Unknown
			}
			return *t.CompletionTokens
		}
	}
	return store.Unknown
}

// keepTurn reports whether a redo of a conversation keeps its recorded
// turn t (the turns before t kept; keptRedo: one of them was a redo's),
// rather than ask the conversation again from t: a turn cut below this
// run's limit is asked again (unless a redo of this limit wrote it), and
// after a turn asked again, so is every turn a redo did not write (its
// context changed). --redo FILE keeps only the turns this redo wrote (a
// resumed one's: with its tag, see redolist.go).
func (rc *redoChooser) keepTurn(ds *dsRun, t turnAnswer, keptRedo bool) bool {
	red := rc.cfg.Redo
	if red == nil {
		return true
	}
	if !red.Truncated {
		return t.redo && t.redoTag != "" && ds.redo != nil && t.redoTag == ds.redo.tag
	}
	if keptRedo && !t.redo {
		return false
	}
	if t.end.FinishReason != "length" {
		return true
	}
	maxNew := int64(-1)
	if rc.cfg.Sampling.MaxNewTokens != nil {
		maxNew = int64(*rc.cfg.Sampling.MaxNewTokens)
	}
	if t.redo && (maxNew < 0 || t.redoLimit >= maxNew) {
		return true // this redo's own
	}
	n := t.counts[1]
	return n >= 0 && maxNew >= 0 && n >= maxNew // cut at this limit: asked again, cut the same
}
