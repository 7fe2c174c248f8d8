package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// View is a read-only snapshot of the index. Everything it returns is a copy.
type View struct {
	btx              *bolt.Tx
	skippedFromFiles bool // see DB.skippedFromFiles
	// keepUnder and walked: see KeepMappedUnder.
	keepUnder int64
	walked    int
	db        *DB // the handle it reads through (Runs: the runs it holds)
}

// KeepMappedUnder makes the view's walks (Each, Missing) keep the index's
// pages out of the process's resident memory: every 1,024 keys they walk,
// when the process's resident file pages (ResidentShared) are above n
// bytes, they release them (ReleaseMapped). A walk over every record of a
// large dataset otherwise leaves its pages counted in RSS. 0, the
// default, never releases.
func (v *View) KeepMappedUnder(n int64) { v.keepUnder = n }

// step counts one key walked and releases the map when KeepMappedUnder
// says so.
func (v *View) step() error {
	if v.keepUnder <= 0 {
		return nil
	}
	if v.walked++; v.walked%1024 != 0 {
		return nil
	}
	return releaseMappedAbove(v.btx, v.keepUnder)
}

func (v *View) datasetBucket(name string) *bolt.Bucket {
	ds := v.btx.Bucket(bucketDatasets)
	if ds == nil {
		return nil
	}
	return ds.Bucket([]byte(name))
}

// Datasets returns the names of all datasets, sorted.
func (v *View) Datasets() []string {
	ds := v.btx.Bucket(bucketDatasets)
	if ds == nil {
		return nil
	}
	var names []string
	c := ds.Cursor()
	for k, val := c.First(); k != nil; k, val = c.Next() {
		if val == nil {
			names = append(names, string(k))
		}
	}
	return names
}

// Writing reports whether the view is read by the process that holds the
// index for writing (gen, ingest: it answers questions on its socket), so
// that the files it writes may hold lines it has not committed yet.
func (v *View) Writing() bool { return v.db != nil && !v.db.bolt.IsReadOnly() }

// HasDataset reports whether name has been indexed.
func (v *View) HasDataset(name string) bool { return v.datasetBucket(name) != nil }

// Summary returns the counters of one dataset.
func (v *View) Summary(name string) (Summary, error) {
	s := Summary{Dataset: name}
	b := v.datasetBucket(name)
	if b == nil {
		return s, NotFound("no dataset %q in the index", name)
	}
	if val := b.Get(keyStats); val != nil {
		if err := readSummary(b, val, &s); err != nil {
			return s, fmt.Errorf("dataset %q: reading counters: %w", name, err)
		}
	}
	s.Dataset = name
	if v.skippedFromFiles {
		for st := range s.Stages {
			s.Stages[st].Skipped = 0
		}
		err := v.Files(func(fs FileState) error {
			if fs.Dataset == name && fs.Phase == PhaseReady && fs.Stage < numStages {
				s.Stages[fs.Stage].Skipped += fs.Skipped
			}
			return nil
		})
		if err != nil {
			return s, err
		}
	}
	return s, nil
}

// Histogram calls fn, in increasing order of base, with the counts of
// responses of a dataset by completion tokens: counts[i] responses have
// base+i tokens. Runs of zeros may be skipped; counts is reused.
func (v *View) Histogram(name string, fn func(base int64, counts []int64)) {
	v.histogram(name, bucketHist, fn)
}

// histogram reads a dataset's chunked histogram in bucket hist (see
// addHist) for Histogram and SpecHistogram.
func (v *View) histogram(name string, hist []byte, fn func(base int64, counts []int64)) {
	b := v.datasetBucket(name)
	if b == nil {
		return
	}
	hb := b.Bucket(hist)
	if hb == nil {
		return
	}
	var counts [histChunk]int64
	c := hb.Cursor()
	for k, val := c.First(); k != nil; k, val = c.Next() {
		clear(counts[:])
		decodeHistChunk(val, func(off, n int64) { counts[off] = n })
		fn(int64(binary.BigEndian.Uint32(k))*histChunk, counts[:])
	}
}

// Window sums the raw stage's per-second throughput buckets with
// from <= second < to.
func (v *View) Window(name string, from, to int64) (records, tokens, unknown int64) {
	b := v.datasetBucket(name)
	if b == nil {
		return
	}
	tb := b.Bucket(bucketTS)
	if tb == nil {
		return
	}
	hi := u64key(uint64(max(to, 0)))
	c := tb.Cursor()
	for k, val := c.Seek(u64key(uint64(max(from, 0)))); k != nil && bytes.Compare(k, hi) < 0; k, val = c.Next() {
		t := decodeTS(val)
		records += t.records
		tokens += t.tokens
		unknown += t.unknown
	}
	return
}

// FirstSecond returns the earliest second with a response in the raw
// stage's throughput buckets.
func (v *View) FirstSecond(name string) (int64, bool) {
	b := v.datasetBucket(name)
	if b == nil {
		return 0, false
	}
	tb := b.Bucket(bucketTS)
	if tb == nil {
		return 0, false
	}
	k, _ := tb.Cursor().First()
	if k == nil {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(k)), true
}

// Get returns the record of id in a dataset's stage.
func (v *View) Get(name string, stage Stage, id string) (Record, bool, error) {
	r := Record{ID: id}
	b := v.datasetBucket(name)
	if b == nil || stage >= numStages {
		return r, false, nil
	}
	sb := b.Bucket(stageBuckets[stage])
	if sb == nil {
		return r, false, nil
	}
	val := sb.Get([]byte(id))
	if val == nil {
		return r, false, nil
	}
	if err := decodeRecord(val, &r); err != nil {
		return r, false, fmt.Errorf("dataset %q %s id %q: %w", name, stage, id, err)
	}
	return r, true, nil
}

// Each calls fn for every record of a dataset's stage, in id order.
func (v *View) Each(name string, stage Stage, fn func(*Record) error) error {
	b := v.datasetBucket(name)
	if b == nil || stage >= numStages {
		return nil
	}
	sb := b.Bucket(stageBuckets[stage])
	if sb == nil {
		return nil
	}
	var r Record
	c := sb.Cursor()
	for k, val := c.First(); k != nil; k, val = c.Next() {
		if err := v.step(); err != nil {
			return err
		}
		if err := decodeRecord(val, &r); err != nil {
			return fmt.Errorf("dataset %q %s id %q: %w", name, stage, k, err)
		}
		r.ID = string(k)
		if err := fn(&r); err != nil {
			return err
		}
	}
	return nil
}

// Missing calls fn, in id order, for every id of stage `of` that has no
// record in any of the stages `in`: Missing(ds, Prompts, fn, Raw, Errors)
// lists the prompts not yet answered. In a dataset of several samples per
// prompt it names units (UnitID; SplitUnit): a prompt stands for each of
// its samples, in sample order (but with no stages in: the prompts), and
// a unit's prompt for it.
func (v *View) Missing(name string, of Stage, fn func(id string) error, in ...Stage) error {
	return v.missing(name, of, fn, true, in...)
}

// missing is Missing; with useHint false it never reads the dataset's
// missing-from hint (tests compare the two walks).
func (v *View) missing(name string, of Stage, fn func(id string) error, useHint bool, in ...Stage) error {
	b := v.datasetBucket(name)
	if b == nil {
		return nil
	}
	src := b.Bucket(stageBuckets[of])
	if src == nil {
		return nil
	}
	if n := samplesOf(b); n > 1 {
		return missingUnits(v, b, of, n, fn, in)
	}
	var others []*bolt.Cursor
	for _, s := range in {
		if ob := b.Bucket(stageBuckets[s]); ob != nil {
			others = append(others, ob.Cursor())
		}
	}
	// Every prompt below the hint has an answer or an error: start there.
	var from []byte
	if useHint && of == Prompts {
		from = v.missFrom(b, in)
	}
	// Walk every bucket in key order together: a merge, not a lookup per id.
	heads := make([][]byte, len(others))
	for i, c := range others {
		heads[i], _ = c.Seek(from)
	}
	c := src.Cursor()
	for k, _ := c.Seek(from); k != nil; k, _ = c.Next() {
		if err := v.step(); err != nil {
			return err
		}
		found := false
		for i, oc := range others {
			for heads[i] != nil && bytes.Compare(heads[i], k) < 0 {
				heads[i], _ = oc.Next()
			}
			if heads[i] != nil && bytes.Equal(heads[i], k) {
				found = true
			}
		}
		if !found {
			if err := fn(string(k)); err != nil {
				return err
			}
		}
	}
	return nil
}

// CountPrefix returns how many ids of a dataset's stage begin with prefix,
// and the first of them in id order. It walks only that range of keys:
// CountPrefix(ds, Raw, "raw_responses.jsonl:") counts the answers of that
// file indexed under their file and line.
func (v *View) CountPrefix(name string, stage Stage, prefix string) (n int64, first string, err error) {
	b := v.datasetBucket(name)
	if b == nil || stage >= numStages {
		return 0, "", nil
	}
	sb := b.Bucket(stageBuckets[stage])
	if sb == nil {
		return 0, "", nil
	}
	p := []byte(prefix)
	c := sb.Cursor()
	for k, _ := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, _ = c.Next() {
		if err := v.step(); err != nil {
			return n, first, err
		}
		if n == 0 {
			first = string(k)
		}
		n++
	}
	return n, first, nil
}

// missFrom returns the dataset's missing-from hint (see keyMissFrom) when
// the stages in hold both raw and errors, else nil: the first key.
func (v *View) missFrom(b *bolt.Bucket, in []Stage) []byte {
	var m membership
	for _, s := range in {
		m |= 1 << s
	}
	if m&answeredStages != answeredStages {
		return nil
	}
	var s Summary
	if val := b.Get(keyStats); val == nil || json.Unmarshal(val, &s) != nil {
		return nil
	}
	return readHint(b, &s)
}
