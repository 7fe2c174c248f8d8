package gen

// A tool conversation's steps kept as they are answered (toolturns.go):
// each step that does not end the conversation is written to turns.jsonl
// as it is answered, keyed ID#n in the turns stage like a plain
// conversation's turn (turns.go):
//
//	{"id":ID,"turn":n,"output_ids":[...],"text":...,"tool_calls":[...],...,
//	 "server":...,"user_turn":u,"results":[...]}
//
// (its answer object in the conversation line, after the id and its
// number; no "prompt_ids", no "turns": how many steps a conversation takes
// is the model's). The calls keep the ids they were sent back with (the
// server's, or "call_<n>_<k>"). When the feeder sends a tool conversation,
// it reads the steps the index holds (ID#1, #2, ... up to the first
// missing) and takes each again, in order, as if just answered: the same
// pairing gives back the same history (the model's turns, their call ids,
// the results paired to them), checked against the step's recorded
// user_turn and results, and the worker asks from the first step not
// recorded. A step whose line is indexed is never asked again; a redo
// keeps the recorded steps as it keeps a conversation's turns (keepTurn).

import (
	"fmt"
	"slices"

	"gendex/ingest"
	"gendex/ingest/gen/client"
	"gendex/store"
)

// recordedTools returns the state of p's tool conversation: its steps the
// index holds, read from their lines and taken again. An error says which
// line is wrong and what to do; the conversation cannot go on from it (the
// state returned then only says whether it is counted as half done).
func (cv *conversations) recordedTools(ds *dsRun, p *Prompt, files turnFiles, redo bool) (*toolConv, error) {
	tc := newToolConv(p)
	if len(tc.segs) == 0 {
		return tc, nil // an error line, from the worker
	}
	type at struct {
		rec  store.Record
		path string
	}
	var found []at
	if err := cv.db.View(func(v *store.View) error {
		for i := 1; ; i++ {
			rec, ok, err := v.Get(ds.Name, store.Turns, ingest.TurnID(p.unitKey(), i))
			if err != nil || !ok {
				return err
			}
			path, ok := v.FilePath(rec.File)
			if !ok {
				return fmt.Errorf("step %d of %s: its file (id %d) is no longer in the index; run 'gendex ingest' on the dataset", i, p.ID, rec.File)
			}
			found = append(found, at{rec, path})
		}
	}); err != nil {
		return tc, err
	}
	// A redone conversation has its answer: not counted as half done
	// (countHalfDone) until its new steps come.
	tc.counted = len(found) > 0 && !redo
	keptRedo := false
	for i, a := range found {
		n := i + 1
		line, where, err := readTurnLine(files, a.rec, a.path, n)
		if err != nil {
			return tc, err
		}
		var l turnFields
		t, err := l.read(line, where, n)
		if err != nil {
			return tc, err
		}
		if l.UserTurn == nil {
			return tc, fmt.Errorf("%s holds turn %d of a conversation without tools, but the prompt has tools now (was the prompt changed? move turns.jsonl away to start the conversation over)", where, n)
		}
		if redo && !cv.keepTurn(ds, t, keptRedo) {
			break // asked again from this step on (redo.go)
		}
		keptRedo = keptRedo || t.redo
		if err := tc.retake(&l, t); err != nil {
			return tc, fmt.Errorf("%s: step %d: %v (was the prompt changed? move turns.jsonl away to start the conversation over)", where, n, err)
		}
	}
	return tc, nil
}

// retake takes a recorded step again (l, its line's members; t, its
// answer): the history goes on as when it was answered.
func (tc *toolConv) retake(l *turnFields, t turnAnswer) error {
	res := &client.Result{Text: l.Text, ToolCalls: l.ToolCalls, FinishReason: l.FinishReason}
	over := tc.take(res)
	s := &tc.steps[len(tc.steps)-1]
	switch {
	case over:
		return fmt.Errorf("the recorded step ends the conversation")
	case s.user != *l.UserTurn || !slices.Equal(s.results, l.Results):
		return fmt.Errorf("recorded for user turn %d with results %v, it answers user turn %d with results %v now", *l.UserTurn+1, l.Results, s.user+1, s.results)
	}
	s.res, s.t = nil, t
	return nil
}
