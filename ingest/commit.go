package ingest

import (
	"errors"
	"fmt"
	"gendex/store"
	"os"
	"sort"
)

// Committing a parsed batch of a file's lines: its records stored, the
// file's state moved past them, in one transaction.

const headBytes = 4096

// commit indexes a chunk and moves the file's offset past it, in one
// transaction, then reports the chunk's problems.
func (ix *Indexer) commit(f *os.File, src Source, state *store.FileState, c *chunk, res *FileResult) error {
	start := state.Offset
	var t commitTally
	tailLen, tailSum, err := tailSum(f, c.off)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src.Path, err)
	}
	shard, err := store.ParseShard(state.Shard)
	if err != nil {
		return fmt.Errorf("%s: the shard the index remembers: %w", src.Path, err)
	}
	err = ix.DB.Update(func(tx *store.Tx) error {
		t = commitTally{problems: t.problems[:0]}
		st := *state
		if st.ID == 0 { // a new file: give it its id first
			if err := tx.PutFile(&st); err != nil {
				return err
			}
		}
		var at []uint32 // where the chunk's makers are among the file's
		st.Makers, at = c.makers.addTo(append([]store.Maker(nil), st.Makers...), nil)
		for i := range c.recs {
			if p := &c.recs[i]; p.maker > 0 {
				p.rec.Maker = at[p.maker-1]
			}
			if i%releaseCheck == releaseCheck-1 && ix.ReleaseAbove > 0 {
				if err := tx.ReleaseMappedAbove(ix.ReleaseAbove); err != nil {
					return err
				}
			}
			if err := t.put(tx, src, &st, shard, &c.recs[i]); err != nil {
				return err
			}
		}
		if err := t.fileState(f, &st, c); err != nil {
			return err
		}
		st.TailLen, st.TailSum = tailLen, tailSum
		if err := tx.PutFile(&st); err != nil {
			return err
		}
		if c.eof {
			// Read to its end: if it was forgotten, it is whole again.
			if err := tx.MarkRead(src.Path); err != nil {
				return err
			}
		}
		*state = st
		return nil
	})
	if err != nil {
		return fmt.Errorf("indexing %s: %w", src.Path, err)
	}
	if ix.ReleaseAbove > 0 {
		if err := ix.DB.ReleaseMappedAbove(ix.ReleaseAbove); err != nil {
			return err
		}
	}
	for _, p := range c.problems {
		ix.report(p)
	}
	for _, p := range t.problems {
		ix.report(p)
	}
	ix.noteStreams(src, &t, res, c.last)
	res.Added += t.added
	res.Duplicates += t.dups
	res.Skipped += countSkips(c.problems) + t.refused
	res.Unknown += countKind(c.problems, NoTokens) + int(t.unknown)
	res.Bytes += state.Offset - start
	return nil
}

// A commitTally is what one commit's transaction did with a chunk's
// records.
type commitTally struct {
	added, dups, errDups, refused int
	unknown                       int64 // stream records without a count, net of merges
	problems                      []Problem
	// streams are the stream records this commit left, each with or
	// without a completion count (streamSeen).
	streams []*store.Record
}

// streamSeen notes a stream record as this commit leaves it.
func (t *commitTally) streamSeen(r *store.Record) { t.streams = append(t.streams, r) }

// noteStreams keeps in res the streams of this read whose record has no
// completion count after the commit, and at the read's end (last) warns
// of each at its record's line, as every line without a count is warned
// of. (A stream's count comes with a later chunk, when it comes: so only
// once the read's chunks are merged; a chunk a later read appends may
// still bring it.)
func (ix *Indexer) noteStreams(src Source, t *commitTally, res *FileResult, last bool) {
	for _, r := range t.streams {
		if r.CompletionTokens >= 0 {
			delete(res.uncounted, r.ID)
			continue
		}
		if res.uncounted == nil {
			res.uncounted = map[string]int64{}
		}
		res.uncounted[r.ID] = r.Line
	}
	if !last {
		return
	}
	ids := make([]string, 0, len(res.uncounted))
	for id := range res.uncounted {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return res.uncounted[ids[i]] < res.uncounted[ids[j]] })
	for _, id := range ids {
		ix.report(Problem{Path: src.Path, Line: res.uncounted[id], Kind: NoTokens,
			Msg: fmt.Sprintf("no chunk of stream %q read so far has its usage (stream_options.include_usage off, or the stream cut); indexed with its tokens unknown", id)})
	}
	res.uncounted = nil
}

// put stores one parsed line's record in tx (unless it is another
// shard's): merged into its stream's record, replacing the record of its
// id (redo), or added; a duplicate or an unstorable record is counted and
// its problem kept.
func (t *commitTally) put(tx *store.Tx, src Source, st *store.FileState, shard store.Shard, p *pending) error {
	if !shard.IsZero() && !shard.Has(store.PromptID(p.stage, p.rec.ID)) {
		return nil // another shard's
	}
	p.rec.File = st.ID
	if p.chunk {
		old, err := tx.Merge(src.Dataset, p.stage, &p.rec)
		if err != nil {
			return err
		}
		if old != nil {
			t.unknown += unknownOf(&p.rec) - unknownOf(old)
			t.streamSeen(&p.rec)
			return nil
		}
	}
	if p.redo {
		old, err := tx.Replace(src.Dataset, p.stage, &p.rec)
		if errors.Is(err, store.ErrUnstorable) { // Replace changed nothing
			t.refused++
			t.problems = append(t.problems, Problem{Path: src.Path, Line: p.rec.Line, Kind: Unstorable, Msg: err.Error() + "; line skipped"})
			return nil
		}
		if err != nil {
			return err
		}
		if old != nil {
			st.Replacing++
			st.CountAnswer(&p.rec, 1)
			if old.File == st.ID {
				st.Replaced++
				st.CountAnswer(old, -1)
			} else {
				t.added++ // the id's record is now this file's
			}
			return nil
		}
	}
	first, err := tx.Add(src.Dataset, p.stage, &p.rec)
	if errors.Is(err, store.ErrUnstorable) { // Add changed nothing
		t.refused++
		t.problems = append(t.problems, Problem{Path: src.Path, Line: p.rec.Line, Kind: Unstorable, Msg: err.Error() + "; line skipped"})
		return nil
	}
	if err != nil {
		return err
	}
	if first == nil {
		t.added++
		st.CountAnswer(&p.rec, 1)
		if p.chunk {
			t.unknown += unknownOf(&p.rec)
			t.streamSeen(&p.rec)
		}
		return nil
	}
	if p.stage != src.Stage {
		t.errDups++
		return nil
	}
	t.dups++
	where, _ := tx.FilePath(first.File)
	t.problems = append(t.problems, Problem{Path: src.Path, Line: p.rec.Line, Kind: Duplicate,
		Msg: fmt.Sprintf("duplicate id %s (first at %s:%d); counted once", store.UnitName(p.rec.ID), where, first.Line)})
	return nil
}

// fileState moves the file's state past chunk c: its offset and lines,
// its counts (its makers are counted before its records are put), and the checksum of its first bytes while the
// file has fewer than headBytes summed.
func (t *commitTally) fileState(f *os.File, st *store.FileState, c *chunk) error {
	st.Offset, st.Lines = c.off, c.lines
	st.Records += uint64(t.added)
	st.Duplicates += uint64(t.dups)
	st.ErrorDuplicates += uint64(t.errDups)
	st.Skipped += uint64(countSkips(c.problems) + t.refused)
	st.Unknown += uint64(int64(countKind(c.problems, NoTokens)) + t.unknown)
	if st.HeadLen < headBytes && st.Offset > st.HeadLen {
		n := min(int64(headBytes), st.Offset)
		sum, err := headSum(f, n)
		if err != nil {
			return err
		}
		st.HeadLen, st.HeadSum = n, sum
	}
	return nil
}

// releaseCheck is how many records a commit adds between two checks of
// ReleaseAbove: a lookup may fault in 16 pages (64 KiB), so a check
// every 128 records of two lookups lets at most 16 MiB in between.
const releaseCheck = 128
