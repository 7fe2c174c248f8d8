package ingest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"gendex/store"
)

// Source is one input file and where its records go.
type Source struct {
	Path    string // absolute; the key the index remembers the file by
	Dataset string
	Stage   store.Stage // Prompts, Raw, Tokenized or Errors
	// IDPath is where the file's lines keep their id, a dotted path such as
	// "question_id" or "meta.uid" (see ParseIDPath). The index remembers it
	// with the file; empty means the path it remembers, or the default
	// rules for a file it has none for. A file indexed under another path is
	// forgotten and indexed again from its start, as when its dataset or
	// stage changes.
	IDPath string
	// Shard, when set, keeps of a file only the records of that shard's
	// prompts (a sharded gen's index holds its own); remembered with the
	// file like IDPath, and a file indexed under another shard is indexed
	// again.
	Shard store.Shard
}

// Indexer brings the new lines of files into the index. It is the one path
// every record takes, whether from `gendex ingest` or from gen.
type Indexer struct {
	DB *store.DB
	// Report receives every problem found; nil drops them.
	Report func(Problem)
	// A transaction is committed every BatchRecords lines or BatchBytes
	// bytes (defaults 32,768 and 64 MiB).
	BatchRecords int
	BatchBytes   int64
	// ForgetBatch is how many old records of a forgotten file are removed
	// per transaction (default store.DefaultForgetBatch).
	ForgetBatch int
	// ReleaseAbove, when above 0, keeps the index file's pages out of
	// the process's resident memory: every releaseCheck records a commit
	// adds, and once it is done, when the process's resident file pages
	// are above ReleaseAbove bytes, they are released
	// (store.Tx.ReleaseMappedAbove). Lookups of ids spread over a
	// large index otherwise leave most of its file counted in RSS (as
	// page cache it stays in memory either way).
	ReleaseAbove int64

	mu       sync.Mutex
	serverID map[string]bool // files whose ServerID warning was reported
}

// FileResult says what one IndexFile call did.
type FileResult struct {
	Source
	Unchanged  bool   // nothing to read
	Reindexed  string // why the file was indexed again from its start, if it was
	Added      int    // new records
	Duplicates int
	Skipped    int   // lines left out (invalid JSON, no id, not storable)
	Unknown    int   // records indexed without a token count (net: less stream records that got theirs)
	Bytes      int64 // bytes read
	Torn       int   // bytes of an unfinished last line, not indexed
	NextLine   int64 // the line number of that unfinished line
}

const headBytes = 4096

// commit indexes a chunk and moves the file's offset past it, in one
// transaction, then reports the chunk's problems.
func (ix *Indexer) commit(f *os.File, src Source, state *store.FileState, c *chunk, res *FileResult) error {
	start := state.Offset
	var added, dups, errDups, refused int
	var chunkUnknown int64 // stream records without a count, net of merges
	var txProblems []Problem
	shard, err := store.ParseShard(state.Shard)
	if err != nil {
		return fmt.Errorf("%s: the shard the index remembers: %w", src.Path, err)
	}
	err = ix.DB.Update(func(tx *store.Tx) error {
		added, dups, errDups, refused, txProblems = 0, 0, 0, 0, txProblems[:0]
		chunkUnknown = 0
		st := *state
		if st.ID == 0 { // a new file: give it its id first
			if err := tx.PutFile(&st); err != nil {
				return err
			}
		}
		for i := range c.recs {
			if i%releaseCheck == releaseCheck-1 && ix.ReleaseAbove > 0 {
				if err := tx.ReleaseMappedAbove(ix.ReleaseAbove); err != nil {
					return err
				}
			}
			p := &c.recs[i]
			if !shard.IsZero() && !shard.Has(store.PromptID(p.stage, p.rec.ID)) {
				continue // another shard's
			}
			p.rec.File = st.ID
			if p.chunk {
				old, err := tx.Merge(src.Dataset, p.stage, &p.rec)
				if err != nil {
					return err
				}
				if old != nil {
					chunkUnknown += unknownOf(&p.rec) - unknownOf(old)
					continue
				}
			}
			if p.redo {
				old, err := tx.Replace(src.Dataset, p.stage, &p.rec)
				if errors.Is(err, store.ErrUnstorable) { // Replace changed nothing
					refused++
					txProblems = append(txProblems, Problem{Path: src.Path, Line: p.rec.Line, Kind: Unstorable, Msg: err.Error() + "; line skipped"})
					continue
				}
				if err != nil {
					return err
				}
				if old != nil {
					st.Replacing++
					if old.File == st.ID {
						st.Replaced++
					} else {
						added++ // the id's record is now this file's
					}
					continue
				}
			}
			first, err := tx.Add(src.Dataset, p.stage, &p.rec)
			if errors.Is(err, store.ErrUnstorable) { // Add changed nothing
				refused++
				txProblems = append(txProblems, Problem{Path: src.Path, Line: p.rec.Line, Kind: Unstorable, Msg: err.Error() + "; line skipped"})
				continue
			}
			if err != nil {
				return err
			}
			if first == nil {
				added++
				if p.chunk {
					chunkUnknown += unknownOf(&p.rec)
				}
				continue
			}
			if p.stage != src.Stage {
				errDups++
				continue
			}
			dups++
			where, _ := tx.FilePath(first.File)
			txProblems = append(txProblems, Problem{Path: src.Path, Line: p.rec.Line, Kind: Duplicate,
				Msg: fmt.Sprintf("duplicate id %q (first at %s:%d); counted once", p.rec.ID, where, first.Line)})
		}
		st.Offset, st.Lines = c.off, c.lines
		st.Records += uint64(added)
		st.Duplicates += uint64(dups)
		st.ErrorDuplicates += uint64(errDups)
		st.Skipped += uint64(countSkips(c.problems) + refused)
		st.Unknown += uint64(int64(countKind(c.problems, NoTokens)) + chunkUnknown)
		st.Makers = c.makers.addTo(append([]store.Maker(nil), st.Makers...))
		if st.HeadLen < headBytes && st.Offset > st.HeadLen {
			n := min(int64(headBytes), st.Offset)
			sum, err := headSum(f, n)
			if err != nil {
				return err
			}
			st.HeadLen, st.HeadSum = n, sum
		}
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
	for _, p := range txProblems {
		ix.report(p)
	}
	res.Added += added
	res.Duplicates += dups
	res.Skipped += countSkips(c.problems) + refused
	res.Unknown += countKind(c.problems, NoTokens) + int(chunkUnknown)
	res.Bytes += state.Offset - start
	return nil
}

// releaseCheck is how many records a commit adds between two checks of
// ReleaseAbove: a lookup may fault in 16 pages (64 KiB), so a check
// every 128 records of two lookups lets at most 16 MiB in between.
const releaseCheck = 128

// report passes p on; a file's ServerID warning only the first time.
func (ix *Indexer) report(p Problem) {
	if p.Kind == ServerID {
		ix.mu.Lock()
		seen := ix.serverID[p.Path]
		if ix.serverID == nil {
			ix.serverID = map[string]bool{}
		}
		ix.serverID[p.Path] = true
		ix.mu.Unlock()
		if seen {
			return
		}
	}
	if ix.Report != nil {
		ix.Report(p)
	}
}

// IndexFile reads what is new in src.Path since the last call and indexes
// it, committing as it goes: after a crash the next call goes on from the
// last commit. A file that shrank, was replaced by another, or whose first
// bytes changed is forgotten and indexed again from the start, with a
// Reindexed problem. On ctx cancellation it commits what it has read and
// returns ctx.Err().
func (ix *Indexer) IndexFile(ctx context.Context, src Source) (FileResult, error) {
	return ix.indexFile(ctx, src, nil)
}

// indexFile is IndexFile, with the new lines taken from mem when they
// start where the index stopped (see IndexWritten).
func (ix *Indexer) indexFile(ctx context.Context, src Source, mem *written) (FileResult, error) {
	res := FileResult{Source: src}
	if _, err := ParseIDPath(src.IDPath); err != nil {
		return res, err
	}
	f, err := os.Open(src.Path)
	if err != nil {
		return res, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return res, err
	}
	if fi.IsDir() {
		return res, fmt.Errorf("%s is a directory", src.Path)
	}
	size, mtime := fi.Size(), fi.ModTime().UnixNano()
	var dev, ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		dev, ino = uint64(st.Dev), st.Ino
	}

	var state store.FileState
	var known, forgetting, unread, selfUnread bool
	view := func(v *store.View) (err error) {
		forgetting, unread, selfUnread = v.Forgetting(), v.HasUnread(), v.IsUnread(src.Path)
		state, known, err = v.File(src.Path)
		return err
	}
	if err := ix.DB.View(view); err != nil {
		return res, err
	}
	if forgetting {
		// An earlier run began to forget files and stopped: no line may be
		// read before their old records are gone.
		if err := ix.finishForgets(ctx); err != nil {
			return res, err
		}
		if err := ix.DB.View(view); err != nil {
			return res, err
		}
	}
	sameIDPath := src.IDPath == "" || src.IDPath == state.IDPath
	sameShard := src.Shard.IsZero() || src.Shard.String() == state.Shard
	if known && state.ID != 0 && state.Dataset == src.Dataset && state.Stage == src.Stage && sameIDPath && sameShard &&
		state.Size == size && state.ModTime == mtime && state.Dev == dev && state.Ino == ino {
		res.Unchanged = true
		res.Torn = int(size - state.Offset)
		res.NextLine = state.Lines + 1
		if selfUnread { // read to its end by a run that stopped before saying so
			if err := ix.DB.Update(func(tx *store.Tx) error { return tx.MarkRead(src.Path) }); err != nil {
				return res, err
			}
		}
		if unread {
			return res, ix.rereadForgotten(ctx, src, nil, &res)
		}
		return res, nil
	}

	reason := ""
	switch {
	case !known || state.ID == 0:
		// nothing indexed from it: nothing to forget. ID 0 is also a file
		// forgotten earlier and not read since; it is read from the start.
	case state.Offset == 0 && state.Dataset == src.Dataset && state.Stage == src.Stage:
		// nothing read from it yet: nothing to forget
	case state.Dataset != src.Dataset || state.Stage != src.Stage:
		reason = fmt.Sprintf("now indexed as dataset %s, stage %s (was %s, %s)", src.Dataset, src.Stage, state.Dataset, state.Stage)
	case !sameIDPath:
		reason = fmt.Sprintf("its ids are now read from %s (were from %s)", src.IDPath, idRules(state.IDPath))
	case !sameShard:
		reason = fmt.Sprintf("it is now read for shard %s (was %q)", src.Shard, state.Shard)
	case state.Dev != dev || state.Ino != ino:
		reason = "the file was replaced by another (new inode)"
	case size < state.Offset:
		reason = fmt.Sprintf("the file was truncated (%d bytes, %d were indexed)", size, state.Offset)
	case state.HeadLen > 0:
		sum, err := headSum(f, state.HeadLen)
		if err != nil {
			return res, err
		}
		if sum != state.HeadSum {
			reason = "the file's first bytes changed"
		}
	}
	if !known {
		state = store.FileState{Path: src.Path}
	}
	var siblings []store.FileState
	if reason != "" {
		// One transaction stores the file (and the files that repeat its
		// ids) reset and in phase Forgetting, then the old records go in
		// batches. A crash anywhere leaves a state the next run resumes.
		err := ix.DB.Update(func(tx *store.Tx) (err error) {
			siblings, err = tx.ForgetFile(&state)
			return err
		})
		if err != nil {
			return res, fmt.Errorf("forgetting %s: %w", src.Path, err)
		}
		var removed uint64
		err = ix.DB.FinishForgets(ctx, ix.ForgetBatch, func(_ string, n uint64, done bool) {
			if done {
				removed += n
			}
		})
		if err != nil {
			return res, err
		}
		if err := ix.DB.View(view); err != nil { // now Ready, ID 0, Offset 0
			return res, err
		}
		res.Reindexed = reason
		unread = true
		msg := fmt.Sprintf("%s; its records were removed and it is indexed again from the start", reason)
		if len(siblings) > 0 {
			msg = fmt.Sprintf("%s; %d records were removed and it is indexed again from the start, with %d other files that repeat its ids", reason, removed, len(siblings))
		}
		ix.report(Problem{Path: src.Path, Kind: Reindexed, Msg: msg})
	}
	state.Dataset, state.Stage, state.Dev, state.Ino, state.ModTime = src.Dataset, src.Stage, dev, ino, mtime
	if src.IDPath != "" {
		state.IDPath = src.IDPath
	}
	if !src.Shard.IsZero() {
		state.Shard = src.Shard.String()
	}
	idPath, err := ParseIDPath(state.IDPath)
	if err != nil {
		return res, fmt.Errorf("%s: the id path the index remembers: %w", src.Path, err)
	}

	// The new lines are data when they start where the index stopped and
	// the file holds them (it may hold more: the writer goes on; the rest
	// is read by the next call, as when a file grows while it is read).
	var r io.Reader = f
	var eofAt int64 = -1
	if mem != nil && reason == "" && state.Offset == mem.at && size >= mem.at+int64(len(mem.data)) {
		r, eofAt = nil, size
	} else {
		mem = nil
		if _, err := f.Seek(state.Offset, io.SeekStart); err != nil {
			return res, err
		}
	}
	maxRecords, maxBytes := ix.limits()
	// Lines parsed ahead are used when they are exactly these, read as
	// these would be.
	var pre *Parsed
	if p := mem.usable(); p != nil && p.src == src && p.idPath == state.IDPath {
		pre = p
	}

	// One goroutine reads and parses while this one commits, so parsing
	// the next batch overlaps the bbolt work (and fsync) of this one.
	parsed := make(chan *chunk, 1)
	free := make(chan *chunk, 2)
	stop := make(chan struct{})
	defer func() {
		close(stop)
		for { // the batches the parser no longer holds go back to the pool
			select {
			case c := <-free:
				chunks.Put(c)
			default:
				return
			}
		}
	}()
	if pre != nil {
		free = make(chan *chunk, len(pre.chunks))
		base := state.Lines // the lines before the parsed ones (commit moves state on)
		go func() {
			defer close(parsed)
			for _, c := range pre.chunks {
				c.lines += base
				for i := range c.recs {
					c.recs[i].rec.Line += base
				}
				for i := range c.problems {
					c.problems[i].Line += base
				}
				if c.last {
					c.eof = pre.end == eofAt
				}
				select {
				case parsed <- c:
				case <-stop:
					return
				}
			}
		}()
	} else {
		free <- chunks.Get().(*chunk)
		free <- chunks.Get().(*chunk)
		lr := newLineReader(r, state.Offset)
		if mem != nil {
			lr = memLineReader(mem.data, mem.at, eofAt)
		}
		go parseFile(ctx, lr, src, idPath, state.Lines, maxRecords, maxBytes, parsed, free, stop)
	}

	for c := range parsed {
		if c.err != nil {
			return res, fmt.Errorf("reading %s: %w", src.Path, c.err)
		}
		if c.last {
			state.Size = c.off + int64(c.torn)
			res.Torn, res.NextLine = c.torn, c.lines+1
		}
		if err := ix.commit(f, src, &state, c, &res); err != nil {
			return res, err
		}
		last := c.last
		free <- c
		if last {
			break
		}
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
	}
	if unread {
		if err := ix.rereadForgotten(ctx, src, siblings, &res); err != nil {
			return res, err
		}
	}
	return res, ctx.Err()
}

// finishForgets completes the removals an earlier run began.
func (ix *Indexer) finishForgets(ctx context.Context) error {
	return ix.DB.FinishForgets(ctx, ix.ForgetBatch, func(path string, _ uint64, done bool) {
		if done {
			ix.report(Problem{Path: path, Kind: Reindexed, Msg: "the removal of its old records, interrupted by an earlier run, is finished; it is indexed again from the start"})
		}
	})
}

// rereadForgotten indexes again the files whose duplicates may have pointed
// at records that were removed, so that no id is lost: siblings (forgotten
// with src just now) and every other file of src's dataset and stage group
// that an earlier run forgot and did not read again (store.View.Unread), if
// it still exists. Their counts are added to res.
func (ix *Indexer) rereadForgotten(ctx context.Context, src Source, siblings []store.FileState, res *FileResult) error {
	group := func(s store.Stage) bool {
		if src.Stage == store.Raw || src.Stage == store.Errors {
			return s == store.Raw || s == store.Errors
		}
		return s == src.Stage
	}
	seen := map[string]bool{src.Path: true}
	var todo []Source
	add := func(fs store.FileState) {
		if !seen[fs.Path] {
			seen[fs.Path] = true
			todo = append(todo, Source{Path: fs.Path, Dataset: fs.Dataset, Stage: fs.Stage})
		}
	}
	for _, sib := range siblings {
		add(sib)
	}
	err := ix.DB.View(func(v *store.View) error {
		return v.Unread(func(fs store.FileState) error {
			if fs.Dataset == src.Dataset && group(fs.Stage) {
				if _, err := os.Stat(fs.Path); err == nil {
					add(fs)
				}
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, sib := range todo {
		r, err := ix.IndexFile(ctx, sib)
		res.Added += r.Added
		res.Duplicates += r.Duplicates
		res.Skipped += r.Skipped
		res.Unknown += r.Unknown
		if err != nil {
			return err
		}
	}
	return nil
}

// idRules names where ids were read from under a stored id path.
func idRules(path string) string {
	if path == "" {
		return "custom_id or id"
	}
	return path
}

// LineID is the id given to a prompt line that has none: the file's name
// and the line number, e.g. "prompts.jsonl:17".
func LineID(path string, line int64) string {
	return fmt.Sprintf("%s:%d", filepath.Base(path), line)
}

func countSkips(ps []Problem) int {
	n := 0
	for _, p := range ps {
		if p.Kind.Skips() {
			n++
		}
	}
	return n
}

func countKind(ps []Problem, k Kind) int {
	n := 0
	for _, p := range ps {
		if p.Kind == k {
			n++
		}
	}
	return n
}

func headSum(f *os.File, n int64) (uint64, error) {
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	h := fnv.New64a()
	h.Write(buf)
	return h.Sum64(), nil
}
