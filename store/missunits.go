package store

import (
	"bytes"
	"encoding/json"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// samplesOf is the samples per prompt of dataset bucket b (Summary.Samples),
// 1 when its counters cannot be read.
func samplesOf(b *bolt.Bucket) int {
	var s Summary
	if val := b.Get(keyStats); val == nil || json.Unmarshal(val, &s) != nil {
		return 1
	}
	return int(s.Samples())
}

// missingUnits is Missing for a dataset of more than one sample per
// prompt, where a prompt's key and its units' keys differ (UnitID): each
// prompt of `of` Prompts stands for its n units, each missing unit is
// named (its key), and a unit of another stage is in Prompts when its
// prompt is. One lookup per key and stage, not a merge: a prompt's units
// are not in key order.
func missingUnits(v *View, b *bolt.Bucket, of Stage, n int, fn func(id string) error, in []Stage) error {
	src := b.Bucket(stageBuckets[of])
	others := make([]*bolt.Bucket, len(in))
	for i, s := range in {
		others[i] = b.Bucket(stageBuckets[s])
	}
	holds := func(key []byte) bool {
		for i, ob := range others {
			k := key
			if in[i] == Prompts {
				k = unitPrompt(key)
			}
			if ob != nil && ob.Get(k) != nil {
				return true
			}
		}
		return false
	}
	c := src.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if err := v.step(); err != nil {
			return err
		}
		units := []string{string(k)}
		if of == Prompts && len(in) > 0 { // with no stage to look in, the prompts themselves
			units = units[:0]
			for s := range n {
				units = append(units, UnitID(string(k), s))
			}
		}
		for _, u := range units {
			if !holds([]byte(u)) {
				if err := fn(u); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// keyWalk is a walk over increasing keys, taken one at a time: a
// follower of a stage, or a unitWalk.
type keyWalk interface {
	key() []byte // the next key, nil at the end
	take(k []byte) bool
}

// unitWalk walks the unit keys (UnitID) of a prompts stage, n per prompt,
// in key order: a prompt's units sort after it and before the next prompt
// (no id holds UnitSep), so sorting each prompt's own keys is enough.
type unitWalk struct {
	c     *bolt.Cursor
	n     int
	units [][]byte // the current prompt's units not taken yet, sorted
}

func newUnitWalk(b *bolt.Bucket, n int) *unitWalk {
	w := &unitWalk{n: n}
	if b != nil {
		w.c = b.Cursor()
		k, _ := w.c.First()
		w.fill(k)
	}
	return w
}

// fill makes the prompt k's units the walk's next keys.
func (w *unitWalk) fill(k []byte) {
	w.units = w.units[:0]
	if k == nil {
		return
	}
	for s := range w.n {
		w.units = append(w.units, []byte(UnitID(string(k), s)))
	}
	slices.SortFunc(w.units, bytes.Compare)
}

func (w *unitWalk) key() []byte {
	if len(w.units) == 0 {
		return nil
	}
	return w.units[0]
}

func (w *unitWalk) take(k []byte) bool {
	if len(w.units) == 0 || !bytes.Equal(w.units[0], k) {
		return false
	}
	if w.units = w.units[1:]; len(w.units) == 0 {
		next, _ := w.c.Next()
		w.fill(next)
	}
	return true
}
