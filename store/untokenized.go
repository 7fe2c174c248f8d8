package store

import (
	"bytes"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Untokenized is what the index holds of one id that has a prompt or a
// response and no tokenized record (see View.Untokenized).
type Untokenized struct {
	ID       string
	Prompt   bool // in the prompts stage
	Answered bool // in the raw stage
	// Excluded is the id's exclusion (reason in Finish, detail in
	// Message), or nil.
	Excluded *Record
	// Failed is the id's error record, or nil.
	Failed *Record
	// Stale reports that the id's tokenized record or exclusion was built
	// from an answer a redo replaced since (owed.go): listed although it
	// has a record.
	Stale bool
	// Turns is how many turns of the id's conversation are answered (keys
	// TurnID(id, n) in the turns stage). It is looked up only for an id
	// with no response, no error and no exclusion, and is 0 otherwise.
	Turns int
}

// follower is a cursor walked in step with an increasing sequence of keys.
type follower struct {
	c    *bolt.Cursor
	k, v []byte
}

func newFollower(b *bolt.Bucket) *follower {
	if b == nil {
		return &follower{}
	}
	f := &follower{c: b.Cursor()}
	f.k, f.v = f.c.First()
	return f
}

// at moves the cursor to the first key >= k and returns its value when
// that key is k. Keys asked must not decrease.
func (f *follower) at(k []byte) ([]byte, bool) {
	for f.k != nil && bytes.Compare(f.k, k) < 0 {
		f.k, f.v = f.c.Next()
	}
	if f.k != nil && bytes.Equal(f.k, k) {
		return f.v, true
	}
	return nil, false
}

func (f *follower) key() []byte { return f.k }

// take reports whether the cursor stands at k, and if so moves it on.
func (f *follower) take(k []byte) bool {
	if f.k == nil || !bytes.Equal(f.k, k) {
		return false
	}
	f.k, f.v = f.c.Next()
	return true
}

// Untokenized calls fn, in id order, for every id of a dataset's prompts
// (every unit of a prompt, UnitID, in a dataset of several samples per
// prompt) or raw stage that has no tokenized record, or an answer and a stale one
// (Untokenized.Stale), with what the index knows of
// why: its response, exclusion, error record and answered turns. It walks
// the keys of the prompts, raw, tokenized, excluded and errors stages
// together, each once, and seeks in the turns stage only for an id with
// no outcome at all: no line of any file is read. *Untokenized is reused
// between calls.
func (v *View) Untokenized(name string, fn func(u *Untokenized) error) error {
	b := v.datasetBucket(name)
	if b == nil {
		return nil
	}
	bucket := func(s Stage) *bolt.Bucket { return b.Bucket(stageBuckets[s]) }
	var prompts keyWalk = newFollower(bucket(Prompts))
	if n := samplesOf(b); n > 1 {
		prompts = newUnitWalk(bucket(Prompts), n) // each prompt's units, not its key alone
	}
	raw := newFollower(bucket(Raw))
	tok, excl, errs := newFollower(bucket(Tokenized)), newFollower(bucket(Excluded)), newFollower(bucket(Errors))
	stale := newFollower(b.Bucket(bucketStale))
	var turns *bolt.Cursor
	if tb := bucket(Turns); tb != nil {
		turns = tb.Cursor()
	}
	var u Untokenized
	var xr, fr Record
	for {
		// The next id of prompts ∪ raw.
		k := prompts.key()
		if k == nil || raw.k != nil && bytes.Compare(raw.k, k) < 0 {
			k = raw.k
		}
		if k == nil {
			return nil
		}
		k = bytes.Clone(k)
		inPrompts, inRaw := prompts.take(k), raw.take(k)
		_, isStale := stale.at(k)
		_, hasTok := tok.at(k)
		if hasTok && !(isStale && inRaw) {
			continue
		}
		u = Untokenized{ID: string(k), Prompt: inPrompts, Answered: inRaw, Stale: isStale && inRaw && hasTok}
		if val, ok := excl.at(k); ok {
			u.Stale = u.Stale || isStale && inRaw
			if err := decodeRecord(val, &xr); err != nil {
				return fmt.Errorf("dataset %q %s id %q: %w", name, Excluded, k, err)
			}
			xr.ID = u.ID
			u.Excluded = &xr
		}
		if val, ok := errs.at(k); ok {
			if err := decodeRecord(val, &fr); err != nil {
				return fmt.Errorf("dataset %q %s id %q: %w", name, Errors, k, err)
			}
			fr.ID = u.ID
			u.Failed = &fr
		}
		if !inRaw && u.Failed == nil && u.Excluded == nil && turns != nil {
			u.Turns = countTurns(turns, k)
		}
		if err := fn(&u); err != nil {
			return err
		}
	}
}

// countTurns counts the keys id#N (N decimal digits) of the turns stage.
func countTurns(c *bolt.Cursor, id []byte) int {
	prefix := append(bytes.Clone(id), '#')
	n := 0
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		if digits(k[len(prefix):]) {
			n++
		}
	}
	return n
}

func digits(b []byte) bool {
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return len(b) > 0
}
