package gen

import (
	"bytes"
	"errors"
	"io"
	"os"

	"gendex/ingest"
	"gendex/store"
)

// Where the feeder starts in a large prompts file. A resumed run's
// answers are mostly the file's first lines (gen sends in file order), so
// walking them before the first request would make every GPU of the run
// wait seconds per million answers at every restart. skipTo bisects the
// file instead, on lines whose place the index knows (a line is found in
// the index at its own offset, so its number is known too), for the first
// one still to send, within skipSlack; the feeder starts there at once,
// and a sweeper walks the lines before it meanwhile (feedFile), so no
// line is skipped: only the order in which they are looked at changes.

const (
	// skipMin is the smallest file bisected: below it, the walk from the
	// first line costs the feeder milliseconds.
	skipMin = 4 << 20
	// skipSlack is how close the bisection gets to the first line to send
	// (the feeder walks at most this much of answered lines first).
	skipSlack = 256 << 10
	// probeBytes is how much of the file one probe reads for a line the
	// index knows.
	probeBytes = 64 << 10
	// maxProbe bounds the lines one probe looks up.
	maxProbe = 64
)

// skipTo returns where the feeder starts in f (the prompts file as the
// index knows it by state, its ids at idPath): an offset and that line's
// number, (0, 1) for the first line.
func (fe *feeder) skipTo(ds *dsRun, f *os.File, state store.FileState, idPath ingest.IDPath) (from, line int64, err error) {
	from, line = 0, 1
	if state.Offset < skipMin {
		return from, line, nil
	}
	buf := make([]byte, probeBytes)
	lo, hi := int64(0), state.Offset
	for hi-lo > skipSlack {
		mid := lo + (hi-lo)/2
		at, n, send, found, err := fe.probe(ds, f, buf, mid, hi, state, idPath)
		switch {
		case err != nil:
			return 0, 1, err
		case !found || send:
			hi = mid
		default:
			lo, from, line = at, at, n
		}
	}
	return from, line, nil
}

// probe reads f from off for a line before end whose place the index
// knows, and tells whether it is to be sent; found is false when none of
// the lines read is such a line.
func (fe *feeder) probe(ds *dsRun, f *os.File, buf []byte, off, end int64, state store.FileState, idPath ingest.IDPath) (at, n int64, send, found bool, err error) {
	size, err := f.ReadAt(buf[:min(int64(len(buf)), end-off+1)], off-1) // from the byte before: is off a line's start?
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, false, false, err
	}
	b := buf[:size]
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return 0, 0, false, false, nil
	}
	type cand struct {
		at int64
		id string
	}
	var cands []cand
	for pos := off + int64(i); ; {
		b = b[i+1:]
		if i = bytes.IndexByte(b, '\n'); i < 0 || pos >= end || len(cands) == maxProbe {
			break
		}
		var rec store.Record
		if _, err := ingest.NormalizeAt(b[:i], store.Prompts, idPath, &rec); err == nil && rec.ID != "" {
			cands = append(cands, cand{pos, rec.ID})
		}
		pos += int64(i) + 1
	}
	err = fe.db.View(func(v *store.View) error {
		for _, c := range cands {
			p, ok, err := v.Get(ds.Name, store.Prompts, c.id)
			if err != nil {
				return err
			}
			if !ok || p.File != state.ID || p.Offset != c.at {
				continue // another shard's, or not the first line with its id
			}
			at, n, found = c.at, p.Line, true
			units, err := fe.toSendUnits(v, ds, state, c.id, p.Line, nil, nil) // a look: it decides no redo
			send = len(units) > 0
			return err
		}
		return nil
	})
	return at, n, send, found, err
}
