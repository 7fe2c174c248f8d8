package gen

// --redo truncated on a large set: the answers to ask again are found as
// the feeder reads the prompts, not before the first request. Deciding
// them first walked every answer (and read each cut one's line), minutes
// at millions of answers while every GPU of the run waited.
//
// Up to Config.RedoUpfront answers (the run's datasets together), the whole set
// is decided first, as before (pickRedo): its counts are said at once and
// a redo with nothing left says "nothing to do" without a server. Above
// it, each dataset's redo is asGoes: the feeder (and the sweeper of the
// lines before where it starts, feed.go) decides each answered prompt as
// it reads it (cutToAsk, the rule pickRedo applies), with the answer
// files held open for the line it reads of a cut answer, and marks those
// it asks again in the index (store.Tx.AddAsking) before it sends them,
// so an answer's mark is always in before its new answer replaces it.
// The index says the dataset is choosing (store.Pending.Choosing) from
// the run's start (store.Tx.StartAsking, which drops an interrupted
// redo's marks: the run finds them again) until the feeder has read every
// prompt (store.Tx.ChoseAsking); until then the answers the redo asks
// again, and so what is to go, are not known, and every view says so.
// A run killed at any moment and started again with the same --redo asks
// each answer once: the decision reads only the index and the lines, and
// an answer asked again is a redo's line at this limit once answered.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"

	"gendex/store"
)

// redoAsGoes tells whether the run's --redo truncated finds its answers as
// the feeder goes (more than Config.RedoUpfront answers), and marks its datasets
// so.
func (rc *redoChooser) redoAsGoes(v *store.View) bool {
	var answers uint64
	for _, ds := range rc.sets {
		if s, err := v.Summary(ds.Name); err == nil {
			answers += s.Stage(store.Raw).Records
		}
	}
	if answers <= rc.cfg.RedoUpfront {
		return false
	}
	for _, ds := range rc.sets {
		ds.redo.asGoes = true
	}
	return true
}

// maxNewTokens is this run's --max-new-tokens, -1 without one.
func (rc *redoChooser) maxNewTokens() int64 {
	if n := rc.cfg.Sampling.MaxNewTokens; n != nil {
		return int64(*n)
	}
	return -1
}

// cutToAsk tells whether --redo truncated asks again rec, an answer of
// ds, and counts in ds.redo why not: cut at the limit, or answered again
// by a redo already. Its line is read (from files, which keeps the files
// open) only for a cut answer.
func (rc *redoChooser) cutToAsk(v *store.View, ds *dsRun, rec *store.Record, prompt []byte, files turnFiles, maxNew int64) (bool, error) {
	conv := isConversation(v, ds.Name, rec.ID)
	if !conv && rec.Finish != "length" {
		return false, nil
	}
	maxNew, own := rc.limitFor(v, ds, rec.ID, prompt, files, maxNew)
	switch {
	case conv:
		return rc.chooseConversation(v, ds, rec, files, maxNew, own)
	case maxNew >= 0 && rec.CompletionTokens >= maxNew && own:
		ds.redo.ownLimit.Add(1)
	case maxNew >= 0 && rec.CompletionTokens >= maxNew:
		ds.redo.atLimit.Add(1)
	case redoneAt(readLine(v, rec, files), maxNew):
		ds.redo.done.Add(1)
	default:
		return true, nil
	}
	return false, nil
}

// askAgain tells whether rec, the answer ds holds for a prompt the feeder
// reads, is asked again by this run's --redo: from the set decided first,
// or, asGoes, decided now (counted; the caller marks it, markFound).
// files nil is a look that decides nothing (skipTo's probe): an answer of
// an asGoes redo is then not to send.
func (rc *redoChooser) askAgain(v *store.View, ds *dsRun, rec *store.Record, prompt []byte, files turnFiles) (bool, error) {
	switch s := ds.redo; {
	case s == nil:
		return false, nil
	case !s.asGoes:
		return s.ids[rec.ID], nil
	case files == nil:
		return false, nil
	}
	return rc.cutToAsk(v, ds, rec, prompt, files, rc.maxNewTokens())
}

// markFound marks in the index the answers of ds the feeder has just
// decided to ask again (asGoes), before it sends them.
func (rc *redoChooser) markFound(ds *dsRun, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	err := rc.db.Update(func(tx *store.Tx) error {
		_, err := tx.AddAsking(ds.Name, ids)
		return err
	})
	if err != nil {
		return fmt.Errorf("marking the answers --redo asks again: %w", err)
	}
	ds.redo.asked.Add(int64(len(ids)))
	return nil
}

// chose ends an asGoes redo's choice in ds once the feeder has read every
// prompt of it (the run not stopped): the index holds its whole set, and
// its counts are said.
func (rc *redoChooser) chose(ds *dsRun) {
	s := ds.redo
	if s == nil || !s.asGoes || rc.ctl.stopping() {
		return
	}
	if err := rc.db.Update(func(tx *store.Tx) error { return tx.ChoseAsking(ds.Name) }); err != nil {
		rc.ctl.abort(fmt.Errorf("%s: ending the choice of the answers --redo asks again: %w", ds.Name, err))
		return
	}
	s.chosen.Store(true)
	rc.sayRedoSet(ds, "every prompt read: ")
}

// choosing reports whether a dataset of the run is still finding the
// answers its redo asks again.
func (rc *redoChooser) choosing() bool {
	for _, ds := range rc.sets {
		if ds.redo != nil && ds.redo.asGoes && !ds.redo.chosen.Load() {
			return true
		}
	}
	return false
}

// toGoPart is the live line's "to go": while a redo is still finding the
// answers it asks again (not known), the count so far, said as such.
func toGoPart(left uint64, known bool) part {
	if !known {
		return part{text: fmt.Sprintf(", >=%d to go (not known yet: the redo is still reading the prompts for cut answers)", left),
			short: fmt.Sprintf(", >=%d to go", left)}
	}
	return part{text: fmt.Sprintf(", %d to go", left)}
}

// etaKnown is etaText, unknown while what is to go is not known.
func etaKnown(left uint64, r store.Rate, known bool) string {
	if !known {
		return "ETA unknown"
	}
	return etaText(left, r)
}

// doneParts are a dataset's live counts, out of its prompts: "12/500
// answered" (answers only: a redo's answers asked again are to go; the
// word goes first on a narrow terminal), "(2.6% done)" (answered or failed
// for good), "3 failed" (for good, no answer since; none said when 0)
// and "485 to go". While its redo is still finding the answers it asks
// again (not known), answered is at most what the index says so far, to
// go at least, and the ETA is unknown.
func doneParts(o store.Owed, total uint64, eta string) (liveLine, string) {
	answered, left := min(o.Answered, total), min(o.ToGo(), total)
	at, atLeast := "", ""
	if !o.RedoKnown {
		at, atLeast, eta = "<=", ">=", "ETA unknown"
	}
	pct := fmt.Sprintf("%.1f%%", 100*float64(total-left)/float64(max(total, 1)))
	l := liveLine{
		{text: fmt.Sprintf(" %s%d/%d answered", at, answered, total), short: fmt.Sprintf(" %s%d/%d", at, answered, total)},
		{text: " (" + pct + " done)", drop: 4}, // never shortened: a bare % would read as answered's
	}
	if o.Failed > 0 {
		l = append(l, part{text: fmt.Sprintf(", %d failed", o.Failed), short: fmt.Sprintf(", %d fail", o.Failed), drop: 2})
	}
	return append(l, part{text: fmt.Sprintf(", %s%d to go", atLeast, left), drop: 5}), eta
}

// limitFor is the limit the prompt id of ds is asked with: its prompt
// line's own max_new_tokens (own; prompt is the line when the feeder has
// it, else it is read through the index, files keeping its file open),
// else the run's, maxNew (-1: none).
func (rc *redoChooser) limitFor(v *store.View, ds *dsRun, id string, prompt []byte, files turnFiles, maxNew int64) (limit int64, own bool) {
	if prompt == nil {
		p, ok, err := v.Get(ds.Name, store.Prompts, store.PromptID(store.Raw, id)) // a sample's prompt
		if err != nil || !ok {
			return maxNew, false
		}
		prompt = readLine(v, &p, files)
	}
	if n, ok := promptLimit(prompt); ok {
		return n, true
	}
	return maxNew, false
}

// promptLimit is a prompt line's own max_new_tokens: its top-level key,
// else its sampling_params' (as parsePrompt takes them).
func promptLimit(line []byte) (int64, bool) {
	if !bytes.Contains(line, []byte(`"max_new_tokens"`)) {
		return 0, false
	}
	var l struct {
		MaxNewTokens   *int64 `json:"max_new_tokens"`
		SamplingParams struct {
			MaxNewTokens *int64 `json:"max_new_tokens"`
		} `json:"sampling_params"`
	}
	if json.Unmarshal(line, &l) != nil {
		return 0, false
	}
	if n := cmp.Or(l.MaxNewTokens, l.SamplingParams.MaxNewTokens); n != nil && *n >= 0 {
		return *n, true
	}
	return 0, false
}
