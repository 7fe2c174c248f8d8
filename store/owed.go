package store

import "fmt"

// The work a dataset still owes, one truth for every view (gen's lines and
// summary, watch, query progress and missing, the web view, a run's
// state): the prompts without an answer or a final error, the answers a
// redo is asking again, and the answers without a training record or
// exclusion, or with one built from an answer a redo replaced since
// (stale). Both redo counts are kept in Summary.Pending, moved in the
// transaction that moves what they count:
//
//	datasets/<name>/stale/   id -> empty: ids whose record or exclusion was built from a replaced answer
//	datasets/<name>/asking/  id -> empty: answers a redo is asking again and has not answered yet
//
// A stale mark stays while the id's record is gone (its file forgotten and
// read again, the mark counts again); export clears it once it took the
// record out of its file (Tx.ClearStale). An asking mark goes with the
// id's new answer (Tx.Replace), its final error, or its answer's removal.

var bucketAsking = []byte("asking")

// Pending counts what a redo leaves owed besides the stages' overlap.
type Pending struct {
	// Stale is how many ids have an answer and a record or exclusion built
	// from an earlier answer of theirs (|stale ∩ raw ∩ (tokenized ∪
	// excluded)|): each counts in MissingTokenized until export makes
	// its record again.
	Stale uint64 `json:"stale,omitempty"`
	// Asking is how many answers a redo is asking again and has not
	// answered again yet.
	Asking uint64 `json:"asking,omitempty"`
	// Choosing says a redo is still finding the answers it asks again
	// (gen --redo truncated on a large set decides as its feeder reads
	// the prompts: Tx.AddAsking): Asking counts those found so far, a
	// lower bound of the redo's work, and the answers owed are not known
	// until it has looked at every prompt (Tx.ChoseAsking).
	Choosing bool `json:"choosing,omitempty"`
}

// Owed is the work a dataset still owes (see Summary.Owed).
type Owed struct {
	// Answered is the prompts with an answer (Summary.Answers) but those
	// a redo is asking again; Failed those that failed for good and have
	// no answer since (Overlap.Failed). Answered + Failed + ToGo is the
	// prompts.
	Answered, Failed uint64
	// Prompts without an answer or a final error (MissingRaw).
	Prompts uint64
	// Redo is the answers a redo is asking again, not answered yet.
	Redo uint64
	// Records is the answers without a record or an exclusion, and those
	// whose record or exclusion is Stale.
	Records uint64
	// Stale is, of Records, those with a record or exclusion built from
	// an answer a redo replaced: `gendex export` makes them again.
	Stale uint64

	// RedoKnown is false while a redo is still finding the answers it asks
	// again (Pending.Choosing): Redo, and so ToGo, is then a lower bound.
	RedoKnown bool
}

// ToGo is the answers still to get: the prompts without one and the
// answers being asked again (a lower bound unless RedoKnown).
func (o Owed) ToGo() uint64 { return o.Prompts + o.Redo }

// Done reports whether nothing is owed: no answer to get, no record to
// make.
func (o Owed) Done() bool { return o.ToGo() == 0 && o.Records == 0 }

// Owed returns the work the dataset still owes: the one rule of "to go"
// and "missing" of every view. No count is ever below 0.
func (s Summary) Owed() Owed {
	answers := s.Answers()
	return Owed{Answered: answers - min(s.Pending.Asking, answers), Failed: s.Overlap.Failed, Prompts: s.MissingRaw(), Redo: s.Pending.Asking, Records: s.MissingTokenized(), Stale: s.Pending.Stale, RedoKnown: !s.Pending.Choosing}
}

// staleOf reports whether an id of membership m counts in Pending.Stale
// when it is marked stale.
func staleOf(m membership) bool { return m.has(Raw) && (m.has(Tokenized) || m.has(Excluded)) }

// moveMarks keeps Pending in step when id's membership of stage changes
// from before to after: a stale id counts only while it has an answer and
// a record or exclusion; an asking id leaves the set with its answer or
// its prompt (removed), or its final error (added).
func (d *dsTx) moveMarks(stage Stage, id []byte, before, after membership) error {
	switch stage {
	case Raw, Tokenized, Excluded:
		if d.staleB != nil && staleOf(before) != staleOf(after) && d.staleB.Get(id) != nil {
			if staleOf(after) {
				d.sum.Pending.Stale++
			} else if d.sum.Pending.Stale > 0 { // a file written before the counter: never below 0
				d.sum.Pending.Stale--
			}
		}
	}
	if (stage == Raw || stage == Prompts) && before.has(stage) && !after.has(stage) || stage == Errors && after.has(Errors) {
		return d.unask(id)
	}
	return nil
}

// markStale marks id stale (its record or exclusion was built from an
// answer replaced since); m is its membership now.
func (d *dsTx) markStale(id []byte, m membership) error {
	if d.staleB == nil {
		b, err := d.bucket.CreateBucketIfNotExists(bucketStale)
		if err != nil {
			return err
		}
		d.staleB = b
	}
	if d.staleB.Get(id) != nil {
		return nil
	}
	if staleOf(m) {
		d.sum.Pending.Stale++
	}
	return d.staleB.Put(id, []byte{})
}

// unmarkStale says id's record or exclusion is no longer stale; m is its
// membership now.
func (d *dsTx) unmarkStale(id []byte, m membership) error {
	if d.staleB == nil || d.staleB.Get(id) == nil {
		return nil
	}
	if staleOf(m) && d.sum.Pending.Stale > 0 {
		d.sum.Pending.Stale--
	}
	return d.staleB.Delete(id)
}

// A record or exclusion that names the answer it was built from
// (Record.From, its line's "answer_sum") is stale exactly when that is not
// its id's newest answer, whichever was indexed first: a fresh index of
// the files finds what the index that saw the redo found. One that names
// none (written by an older gendex) is judged by time, when an answer
// replaces another (staleBefore).

// staleByFrom reports whether id's record or exclusion naming its answer
// was built from another answer than the one whose line sum is answer;
// known is false when neither names its answer.
func (d *dsTx) staleByFrom(id []byte, answer uint32) (stale, known bool, err error) {
	for _, s := range []Stage{Tokenized, Excluded} {
		rec, err := d.stored(s, string(id))
		if err != nil {
			return false, false, err
		}
		stale, known = fromStale(rec, answer, stale, known)
	}
	return stale, known, nil
}

// fromStale folds rec, id's record or exclusion (nil: none), into stale
// and known: known once one names its answer, stale once one names
// another than the line whose sum is answer.
func fromStale(rec *Record, answer uint32, stale, known bool) (bool, bool) {
	if rec != nil && rec.HasFrom {
		return stale || rec.From != answer, true
	}
	return stale, known
}

// judgeFrom marks id stale, or not, by the answer its record or exclusion
// names, when it names one: id's answer is the line whose sum is answer.
func (d *dsTx) judgeFrom(id []byte, answer uint32) (known bool, err error) {
	stale, known, err := d.staleByFrom(id, answer)
	if err != nil || !known {
		return known, err
	}
	return true, d.setStale(id, stale)
}

// setStale marks id stale or not. An id already marked so costs one
// lookup: its membership is read only to move the Stale counter.
func (d *dsTx) setStale(id []byte, stale bool) error {
	if marked := d.staleB != nil && d.staleB.Get(id) != nil; marked == stale {
		return nil
	}
	m := d.membership(id, Raw) | d.membership(id, Tokenized) // Raw, Tokenized, Excluded
	if stale {
		return d.markStale(id, m)
	}
	return d.unmarkStale(id, m)
}

// judgeAdded judges the staleness of id (r.ID) by From once r was added to
// stage (before is id's membership before, answer its answer as Raw
// stores it when before has Raw: Tx.Add's lookup found both): an answer
// against its record's From, a record that names its answer against the
// answer. An id without both costs no read; a record added reads only the
// other of record and exclusion, and only when before says the id has one
// (r is the one just added: it is not read back).
func (d *dsTx) judgeAdded(stage Stage, id []byte, r *Record, before membership, answer []byte) error {
	switch {
	case stage == Raw && (before.has(Tokenized) || before.has(Excluded)):
		_, err := d.judgeFrom(id, r.Sum)
		return err
	case (stage == Tokenized || stage == Excluded) && r.HasFrom && answer != nil:
		raw := Record{ID: r.ID}
		if err := decodeRecord(answer, &raw); err != nil {
			return fmt.Errorf("dataset %q %s id %q: %w", d.sum.Dataset, Raw, r.ID, err)
		}
		stale, _ := fromStale(r, raw.Sum, false, false)
		other := Excluded
		if stage == Excluded {
			other = Tokenized
		}
		if before.has(other) {
			rec, err := d.stored(other, r.ID)
			if err != nil {
				return err
			}
			stale, _ = fromStale(rec, raw.Sum, stale, true)
		}
		return d.setStale(id, stale)
	}
	return nil
}

// unask takes id out of the answers a redo is asking again.
func (d *dsTx) unask(id []byte) error {
	if d.askingB == nil || d.askingB.Get(id) == nil {
		return nil
	}
	if d.sum.Pending.Asking > 0 {
		d.sum.Pending.Asking--
	}
	return d.askingB.Delete(id)
}

// staleBefore reports whether the record stage holds for id, if any, was
// made before an answer at time at: one without its own time was indexed
// before it (the caller adds the answer now); an exclusion's excluded_at
// is its own.
func (d *dsTx) staleBefore(stage Stage, id string, at int64) (bool, error) {
	rec, err := d.stored(stage, id)
	if rec == nil || err != nil {
		return false, err
	}
	return !rec.OwnTime || rec.Time < at, nil
}

// SetAsking says which answers of dataset a redo asks again, in place of
// any earlier set (an interrupted redo's): each of ids that has an answer
// and a prompt; the set is whole (Pending.Choosing false). It returns how
// many the earlier set still held.
func (tx *Tx) SetAsking(dataset string, ids []string) (earlier uint64, err error) {
	return tx.resetAsking(dataset, ids, false)
}

// StartAsking begins a redo that finds the answers it asks again as it
// goes: the earlier set (an interrupted redo's) is dropped, and dataset is
// choosing (Pending.Choosing) until ChoseAsking; AddAsking adds each
// answer found. It returns how many the earlier set still held.
func (tx *Tx) StartAsking(dataset string) (earlier uint64, err error) {
	return tx.resetAsking(dataset, nil, true)
}

// AddAsking adds to the answers of dataset a redo asks again each of ids
// that has an answer and a prompt, and returns how many it added.
func (tx *Tx) AddAsking(dataset string, ids []string) (added int, err error) {
	d, err := tx.dataset(dataset)
	if err != nil {
		return 0, err
	}
	before := d.sum.Pending.Asking
	err = d.addAsking(ids)
	return int(d.sum.Pending.Asking - before), err
}

// ChoseAsking says the redo StartAsking began has found every answer it
// asks again: Pending.Asking is its whole set, less those answered since.
func (tx *Tx) ChoseAsking(dataset string) error {
	d, err := tx.dataset(dataset)
	if err != nil {
		return err
	}
	d.sum.Pending.Choosing = false
	return nil
}

func (tx *Tx) resetAsking(dataset string, ids []string, choosing bool) (earlier uint64, err error) {
	d, err := tx.dataset(dataset)
	if err != nil {
		return 0, err
	}
	earlier = d.sum.Pending.Asking
	if d.askingB != nil {
		if err := d.bucket.DeleteBucket(bucketAsking); err != nil {
			return 0, fmt.Errorf("dataset %q: %w", dataset, err)
		}
		d.askingB = nil
	}
	d.sum.Pending.Asking = 0
	d.sum.Pending.Choosing = choosing
	return earlier, d.addAsking(ids)
}

// addAsking marks each of ids that has an answer and a prompt as asked
// again.
func (d *dsTx) addAsking(ids []string) (err error) {
	for _, id := range ids {
		k := []byte(id)
		if d.get(Raw, k) == nil || d.get(Prompts, k) == nil {
			continue
		}
		if d.askingB == nil {
			if d.askingB, err = d.bucket.CreateBucketIfNotExists(bucketAsking); err != nil {
				return fmt.Errorf("dataset %q: %w", d.sum.Dataset, err)
			}
		}
		if d.askingB.Get(k) == nil {
			if err := d.askingB.Put(k, []byte{}); err != nil {
				return err
			}
			d.sum.Pending.Asking++
		}
	}
	return nil
}

// Asking calls fn with each answer of dataset a redo is asking again, in
// id order.
func (v *View) Asking(dataset string, fn func(id string) error) error {
	b := v.datasetBucket(dataset)
	if b == nil {
		return nil
	}
	ab := b.Bucket(bucketAsking)
	if ab == nil {
		return nil
	}
	return ab.ForEach(func(k, _ []byte) error { return fn(string(k)) })
}
