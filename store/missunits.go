package store

import (
	"encoding/json"

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
		if of == Prompts {
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
