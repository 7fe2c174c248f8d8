package store

import (
	"bytes"
	"encoding/binary"
)

// Speculative decoding in the index. Besides the per-stage counters
// (Stats.SpecRecords, SpecTokens, SpecVerify, SpecAccepted, SpecProposed)
// and the counts each record keeps (Record.SpecVerify, SpecAccepted,
// SpecProposed), a dataset has two buckets for the raw stage, maintained in
// the same transaction as the records, like hist and ts:
//
//	spechist/   accept length in hundredths (big-endian uint32 chunk) ->
//	            counts, encoded as hist's chunks: per answer that has a
//	            verify count and a completion count, round(100 ×
//	            completion / verify) (Record.SpecBin)
//	spects/     unix second (big-endian uint64) -> records, completion
//	            tokens and verify steps of those answers, varints
//
// A file written before them has neither bucket and no record with spec
// counts: it reads as having no speculative decoding data.
var (
	bucketSpecHist = []byte("spechist")
	bucketSpecTS   = []byte("spects")
)

// specSecond is one second of the spec answers: how many, their completion
// tokens and their verify steps.
type specSecond struct{ records, tokens, verify int64 }

func (v specSecond) encode() []byte {
	b := binary.AppendVarint(nil, v.records)
	b = binary.AppendVarint(b, v.tokens)
	return binary.AppendVarint(b, v.verify)
}

func decodeSpecSecond(b []byte) (v specSecond) {
	for _, dst := range []*int64{&v.records, &v.tokens, &v.verify} {
		x, n := binary.Varint(b)
		if n <= 0 {
			return specSecond{}
		}
		*dst, b = x, b[n:]
	}
	return v
}

// countSpec applies a raw record's spec counts to the transaction's spec
// histogram and seconds, with sign +1 or -1.
func (d *dsTx) countSpec(r *Record, sec, sign int64) {
	bin, ok := r.SpecBin()
	if !ok {
		return
	}
	d.specHist[bin] += sign
	v := d.specTS[sec]
	v.records += sign
	v.tokens += sign * r.CompletionTokens
	v.verify += sign * r.SpecVerify
	d.specTS[sec] = v
}

// flushSpec writes the transaction's spec histogram and seconds.
func flushSpec(d *dsTx) error {
	if err := addHist(d.bucket, bucketSpecHist, d.specHist); err != nil {
		return err
	}
	if len(d.specTS) > 0 {
		tb, err := d.bucket.CreateBucketIfNotExists(bucketSpecTS)
		if err != nil {
			return err
		}
		tb.FillPercent = 0.9
		for sec, delta := range d.specTS {
			if delta == (specSecond{}) {
				continue
			}
			k := u64key(uint64(sec))
			v := decodeSpecSecond(tb.Get(k))
			v.records += delta.records
			v.tokens += delta.tokens
			v.verify += delta.verify
			if v.records <= 0 {
				err = tb.Delete(k)
			} else {
				err = tb.Put(k, v.encode())
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// SpecHistogram calls fn, in increasing order of base, with the counts of
// a dataset's answers by accept length in hundredths (see
// Record.SpecBin): counts[i] answers have an accept length of
// (base+i)/100. Runs of zeros may be skipped; counts is reused.
func (v *View) SpecHistogram(name string, fn func(base int64, counts []int64)) {
	v.histogram(name, bucketSpecHist, fn)
}

// SpecWindow sums the raw stage's spec seconds with from <= second < to:
// the answers with a verify count and a completion count, their completion
// tokens and their verify steps.
func (v *View) SpecWindow(name string, from, to int64) (records, tokens, verify int64) {
	b := v.datasetBucket(name)
	if b == nil {
		return
	}
	tb := b.Bucket(bucketSpecTS)
	if tb == nil {
		return
	}
	hi := u64key(uint64(max(to, 0)))
	c := tb.Cursor()
	for k, val := c.Seek(u64key(uint64(max(from, 0)))); k != nil && bytes.Compare(k, hi) < 0; k, val = c.Next() {
		s := decodeSpecSecond(val)
		records += s.records
		tokens += s.tokens
		verify += s.verify
	}
	return
}
