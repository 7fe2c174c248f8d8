package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"

	bolt "go.etcd.io/bbolt"
)

// PageRequest says which records of one dataset's stage a Page call walks.
type PageRequest struct {
	Dataset string
	Stage   Stage
	// After starts the walk at the first id above After ("" from the
	// first id); with Back, the walk goes down from the last id below
	// Before ("" from the last id).
	After, Before string
	Back          bool
	// Scan bounds the keys looked at (0: no bound), so a page filtered by
	// a rare finish reason costs at most Scan records, never the stage.
	Scan int
}

// PageEnd says where a Page walk stopped.
type PageEnd struct {
	// Last is the last id looked at: the next page starts after it (or,
	// walking back, before it).
	Last string
	// More reports whether keys remain past Last.
	More bool
	// Looked is how many keys the walk looked at.
	Looked int
}

// Page calls fn for the records of a stage in id order (reverse with
// Back), from where r says, until fn returns false, r.Scan keys were
// looked at, or the keys end. It walks keys from a cursor's Seek: a page
// costs what it shows (and what its filter skips), never a walk of the
// stage.
func (v *View) Page(r PageRequest, fn func(*Record) (bool, error)) (PageEnd, error) {
	var end PageEnd
	c := v.stageCursor(r.Dataset, r.Stage)
	if c == nil {
		return end, nil
	}
	k, val := pageStart(c, r)
	var rec Record
	for ; k != nil; k, val = pageNext(c, r.Back) {
		if r.Scan > 0 && end.Looked == r.Scan {
			end.More = true
			return end, nil
		}
		end.Looked++
		end.Last = string(k)
		if err := decodeRecord(val, &rec); err != nil {
			return end, fmt.Errorf("dataset %q %s id %q: %w", r.Dataset, r.Stage, k, err)
		}
		rec.ID = end.Last
		goOn, err := fn(&rec)
		if err != nil {
			return end, err
		}
		if !goOn {
			k, _ = pageNext(c, r.Back)
			end.More = k != nil
			return end, nil
		}
	}
	return end, nil
}

func pageStart(c *bolt.Cursor, r PageRequest) (k, val []byte) {
	if r.Back {
		if r.Before == "" {
			return c.Last()
		}
		k, _ = c.Seek([]byte(r.Before))
		if k == nil {
			return c.Last()
		}
		return c.Prev() // the first id below Before, whether Before is a key or not
	}
	if r.After == "" {
		return c.First()
	}
	k, val = c.Seek([]byte(r.After))
	if k != nil && bytes.Equal(k, []byte(r.After)) {
		return c.Next()
	}
	return k, val
}

func pageNext(c *bolt.Cursor, back bool) (k, val []byte) {
	if back {
		return c.Prev()
	}
	return c.Next()
}

// Sample returns up to n distinct records of a stage picked at random: each
// is the first id at or after a random key between the stage's first and
// last ids, so a sample costs n seeks whatever the stage's size. Ids are
// drawn evenly over the key space, not over the records: a stage whose ids
// crowd one part of that space is sampled more thinly there. A prompt's
// units (gen --samples: its samples' keys sort right after its id, in a
// sliver of the key space) count as one id: the draw then takes one of
// them at random, so every sample is drawn as often as sample 0.
func (v *View) Sample(dataset string, stage Stage, n int, rng *rand.Rand) ([]Record, error) {
	c := v.stageCursor(dataset, stage)
	if c == nil || n <= 0 {
		return nil, nil
	}
	first, _ := c.First()
	last, _ := c.Last()
	if first == nil {
		return nil, nil
	}
	first, last = bytes.Clone(first), bytes.Clone(last)
	seen := map[string]bool{}
	var out []Record
	for len(out) < n {
		k, val := c.Seek(keyBetween(first, last, rng))
		// A key drawn twice moves on to the next one not drawn yet
		// (wrapping around): at most n steps, and n distinct records
		// whenever the stage holds n.
		for steps := 0; k == nil || seen[string(k)]; steps++ {
			if steps > n {
				return out, nil // fewer than n records
			}
			if k, val = c.Next(); k == nil {
				k, val = c.First()
			}
		}
		k, val = oneUnit(c, k, val, seen, rng)
		seen[string(k)] = true
		rec := Record{}
		if err := decodeRecord(val, &rec); err != nil {
			return out, fmt.Errorf("dataset %q %s id %q: %w", dataset, stage, k, err)
		}
		rec.ID = string(k)
		out = append(out, rec)
	}
	return out, nil
}

// oneUnit returns, for a key k a sample drew (not seen yet), one of its
// prompt's units not seen yet, at random (k itself among them); the
// cursor is left past the prompt's units.
func oneUnit(c *bolt.Cursor, k, val []byte, seen map[string]bool, rng *rand.Rand) ([]byte, []byte) {
	p := bytes.Clone(unitPrompt(k))
	var keys, vals [][]byte
	for uk, uv := c.Seek(p); uk != nil && isUnitOf(uk, p); uk, uv = c.Next() {
		if !seen[string(uk)] {
			keys, vals = append(keys, bytes.Clone(uk)), append(vals, bytes.Clone(uv))
		}
	}
	if len(keys) == 0 { // not a unit key's prompt: k as drawn
		return k, val
	}
	i := rng.IntN(len(keys))
	return keys[i], vals[i]
}

// keyBetween returns a random key between lo and hi (lo <= hi) in byte
// order: the common prefix, a random byte between the two keys' bytes
// where they first differ, and after it random bytes within the two
// keys' bytes at each position (ids such as B1-00042 draw digits).
func keyBetween(lo, hi []byte, rng *rand.Rand) []byte {
	i := 0
	for i < len(lo) && i < len(hi) && lo[i] == hi[i] {
		i++
	}
	key := bytes.Clone(lo[:i])
	if i == len(hi) {
		return key // hi is a prefix of lo: lo == hi
	}
	var from byte
	if i < len(lo) {
		from = lo[i]
	}
	key = append(key, from+byte(rng.IntN(int(hi[i]-from)+1)))
	for j := i + 1; j < max(len(lo), len(hi)); j++ {
		a, b := byte(0), byte(255)
		if j < len(lo) && j < len(hi) {
			a, b = min(lo[j], hi[j]), max(lo[j], hi[j])
		}
		key = append(key, a+byte(rng.IntN(int(b-a)+1)))
	}
	return key
}

// stageCursor returns a cursor over a dataset's stage, or nil when it has
// no records.
func (v *View) stageCursor(dataset string, stage Stage) *bolt.Cursor {
	b := v.datasetBucket(dataset)
	if b == nil || stage >= numStages {
		return nil
	}
	sb := b.Bucket(stageBuckets[stage])
	if sb == nil {
		return nil
	}
	return sb.Cursor()
}
