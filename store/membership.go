package store

import "strconv"

// overlapStages[s] is the stages that an Overlap counter moved by s reads
// besides s: when an id enters or leaves stage s, the counters move by
// the same amounts whatever the id's membership of the other stages
// (TestOverlapStages checks every case). Turns moves none.
var overlapStages = [numStages]membership{
	Prompts:   1<<Raw | 1<<Errors,
	Raw:       1<<Prompts | 1<<Errors | 1<<Tokenized | 1<<Excluded,
	Tokenized: 1<<Raw | 1<<Excluded,
	Errors:    1<<Prompts | 1<<Raw,
	Turns:     0,
	Excluded:  1<<Raw | 1<<Tokenized,
}

// membership reports which of the stages that matter when id enters or
// leaves stage (overlapStages) hold id, skipping stages that are empty;
// for the prompts stage, whether it holds the prompt of id, a unit.
func (d *dsTx) membership(id []byte, stage Stage) membership {
	m, _ := d.lookup(id, stage)
	return m
}

// lookup is membership that also returns id's answer as Raw stores it
// when Raw is one of the stages it looks in and holds id (nil
// otherwise), so that a caller needing the answer does not search for it
// again. The answer is valid until Raw changes.
func (d *dsTx) lookup(id []byte, stage Stage) (m membership, answer []byte) {
	for s := Stage(0); s < numStages; s++ {
		if !overlapStages[stage].has(s) || d.sum.Stages[s].Records == 0 {
			continue
		}
		key := id
		if s == Prompts {
			key = unitPrompt(id) // a unit's prompt
		}
		if v := d.get(s, key); v != nil {
			m |= 1 << s
			if s == Raw {
				answer = v
			}
		}
	}
	return m, answer
}

// sampled reports whether the dataset may hold units of samples above 0,
// given r, a record being added or removed: whether r or a record held
// names more than one sample (Summary.Samples). While none does, every
// prompt has one unit, its id, and the unit counters below stay as they
// are (Summary.Done empty).
func (d *dsTx) sampled(r *Record) bool { return r.Samples > 1 || d.sum.Samples() > 1 }

// outcomes returns the units of prompt p held in raw or errors, each with
// its membership of the two: the units of p sort right after it, so one
// cursor range per stage.
func (d *dsTx) outcomes(p []byte) map[string]membership {
	units := map[string]membership{}
	for _, s := range [...]Stage{Raw, Errors} {
		c := d.stages[s].Cursor() // not skipped when empty: its count may not be moved yet
		for k, _ := c.Seek(p); k != nil && isUnitOf(k, p); k, _ = c.Next() {
			units[string(k)] |= 1 << s
		}
	}
	return units
}

// moveUnits keeps the unit counters in step once id entered stage (sign
// +1) or left it (-1), in a sampled dataset; before is id's membership
// before the change, as lookup gave it, and r the record. A prompt moves
// the Overlap counters of each of its units but the one of its own key
// (which Add and remove moved) and counts itself in Summary.Done by the
// number of its units with an outcome; a unit that gains or loses its
// outcome moves its prompt from one count to the next.
func (d *dsTx) moveUnits(stage Stage, id []byte, r *Record, m membership, sign int) {
	if !d.sampled(r) {
		return
	}
	switch {
	case stage == Prompts:
		units := d.outcomes(id)
		for u, um := range units {
			if u == string(id) {
				continue
			}
			if sign > 0 {
				d.sum.Overlap.apply(um, um|1<<Prompts)
			} else {
				d.sum.Overlap.apply(um|1<<Prompts, um)
			}
		}
		d.done(len(units), sign)
	case answeredStages.has(stage) && m.has(Prompts) && m&answeredStages == 0:
		// id gained its first outcome (sign +1) or lost its last; the
		// other stage does not hold it.
		n := len(d.outcomes(unitPrompt(id)))
		if sign > 0 {
			d.done(n-1, -1)
			d.done(n, 1)
		} else {
			d.done(n+1, -1)
			d.done(n, 1)
		}
	}
}

// done moves Summary.Done's count of prompts with k units answered by
// sign; counts below 2 are not kept (Summary.PromptsDone).
func (d *dsTx) done(k, sign int) {
	if k >= 2 {
		d.sum.Done = bump(d.sum.Done, strconv.Itoa(k), uint64(sign))
	}
}
