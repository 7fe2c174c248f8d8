package export

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"
)

// split is how a chunk's entries are shared between the exporter, which
// takes them from the start, and its helper, which takes them from the
// end: lo is the exporter's next, hi the end of what is left (one word, so
// that each takes an entry with one compare-and-swap).
type split struct{ v atomic.Uint64 }

func (s *split) reset(n int) { s.v.Store(uint64(n)) }

// front takes the first entry left, back the last; ok is false when none is.
func (s *split) front() (int, bool) {
	for {
		v := s.v.Load()
		lo, hi := v>>32, v&0xffffffff
		if lo >= hi {
			return 0, false
		}
		if s.v.CompareAndSwap(v, (lo+1)<<32|hi) {
			return int(lo), true
		}
	}
}

func (s *split) back() (int, bool) {
	for {
		v := s.v.Load()
		lo, hi := v>>32, v&0xffffffff
		if lo >= hi {
			return 0, false
		}
		if s.v.CompareAndSwap(v, lo<<32|(hi-1)) {
			return int(hi - 1), true
		}
	}
}

// helper decides entries of a chunk from its end, in a goroutine of its
// own, into buffers of its own, while the exporter decides from the start;
// the exporter then takes its records and exclusions in the chunk's order
// (see take). Deciding an answer reads only the answer, its prompt
// (through the helper's own reader) and the Config, so two run at once.
type helper struct {
	x        *Exporter
	read     reader
	tok, exc []byte
	// ends[j] is where the j-th entry decided ends in tok and exc (the
	// entries are decided last first).
	ends []span
	res  Result // its counts, added to the exporter's by take
	err  error
	done chan struct{} // nil: not running
}

type span struct{ tok, exc int }

// start decides entries from the end of es (taken from sp) in a new
// goroutine until none is left, or ctx is done.
func (h *helper) start(ctx context.Context, es []entry, sp *split) {
	h.tok, h.exc, h.ends, h.err = h.tok[:0], h.exc[:0], h.ends[:0], nil
	clear(h.res.Excluded)
	h.res = Result{Excluded: h.res.Excluded, BadPrompts: h.res.BadPrompts[:0]}
	h.done = make(chan struct{})
	go func() {
		defer close(h.done)
		for ctx.Err() == nil {
			k, ok := sp.back()
			if !ok {
				return
			}
			if h.err = h.x.one(ctx, &es[k], h.read, &h.tok, &h.exc, &h.res); h.err != nil {
				sp.reset(0) // the exporter takes no more
				return
			}
			h.ends = append(h.ends, span{len(h.tok), len(h.exc)})
		}
	}()
}

// wait waits for the goroutine, if one runs, and returns its error.
func (h *helper) wait() error {
	if h == nil || h.done == nil {
		return nil
	}
	<-h.done
	h.done = nil
	return h.err
}

// take adds what h decided to the buffers, in the chunk's order (the
// reverse of h's), and to the counts, flushing as the exporter's own
// records do.
func (x *Exporter) take(out *outputs, h *helper, res *Result) error {
	for j := len(h.ends) - 1; j >= 0; j-- {
		var from span
		if j > 0 {
			from = h.ends[j-1]
		}
		to := h.ends[j]
		out.tokBuf = append(out.tokBuf, h.tok[from.tok:to.tok]...)
		out.excBuf = append(out.excBuf, h.exc[from.exc:to.exc]...)
		if len(out.tokBuf)+len(out.excBuf) >= x.FlushBytes {
			if err := x.flush(out, false); err != nil {
				return err
			}
		}
	}
	r := &h.res
	res.AnswerBytes += r.AnswerBytes
	for i := range res.Left {
		res.Left[i] += r.Left[i]
	}
	for _, b := range r.BadPrompts {
		res.noteBadPrompt(b)
	}
	res.Records += r.Records
	res.LenUnknown += r.LenUnknown
	res.OwnTurns += r.OwnTurns
	for reason, n := range r.Excluded {
		res.Excluded[reason] += n
	}
	return nil
}

// placeKey is an entry's answer's file and offset, and the entry's index.
type placeKey struct {
	file   uint32
	i      int32
	offset int64
}

// sortByPlace sorts es by their answers' files and offsets: it sorts small
// keys, then moves each entry once (an entry is large). keys is reused.
func sortByPlace(es []entry, keys []placeKey) []placeKey {
	keys = keys[:0]
	for i := range es {
		keys = append(keys, placeKey{es[i].rec.File, int32(i), es[i].rec.Offset})
	}
	slices.SortFunc(keys, func(a, b placeKey) int {
		if c := cmp.Compare(a.file, b.file); c != 0 {
			return c
		}
		return cmp.Compare(a.offset, b.offset)
	})
	// Position j takes es[keys[j].i]: follow each cycle of the
	// permutation, marking the keys done with i = -1.
	for j := range keys {
		if keys[j].i < 0 || int(keys[j].i) == j {
			continue
		}
		tmp := es[j]
		at := j
		for {
			from := int(keys[at].i)
			keys[at].i = -1
			if from == j {
				es[at] = tmp
				break
			}
			es[at] = es[from]
			at = from
		}
	}
	return keys
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
