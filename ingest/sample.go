package ingest

import "gendex/store"

// unitOf makes rec, a line's record of an answer stage with the line's id,
// the record of its unit (store.UnitID) when the line names its "sample"
// (a whole number from 0), and keeps the samples per prompt the line
// names, max("samples", "sample"+1), when above 1 (store.Record.Samples;
// a count above store.MaxSamples is kept as one above it, for
// store.CheckRecord to refuse the line). A "sample" or "samples" that is
// no whole number (another tool's field of that name) is not read.
func unitOf(b []byte, f *fields, rec *store.Record) {
	n, hasN := decodeCount(val(b, f.samples))
	if !hasN || n < 0 {
		n = 0
	}
	if s, ok := decodeCount(val(b, f.sample)); ok && s >= 0 {
		s = min(s, store.MaxSamples)
		rec.ID = store.UnitID(rec.ID, int(s))
		n = max(n, s+1)
	}
	if n > 1 {
		rec.Samples = uint32(min(n, store.MaxSamples+1))
	}
}
