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
	// BuiltinIDs says the file's ids are read by the built-in rules
	// whatever path the index remembers for it (gen's own answer, error
	// and turn files): a remembered path is dropped and the file indexed
	// again. IDPath must then be empty.
	BuiltinIDs bool
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
	gone     []goneFile      // forgotten by CheckDisk, to be said (SayForgotten)
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
	// uncounted holds the streams this read touched whose record has no
	// completion count after it (id: the record's line), for their
	// warnings at the read's end (commit).
	uncounted map[string]int64
}

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
// start where the index stopped (see IndexWritten). Its steps: open the
// file, look it up in the index, stop if it is unchanged, forget it if it
// must be read again from its start, read and commit its new lines, then
// read again the files whose records its forgetting may have removed.
func (ix *Indexer) indexFile(ctx context.Context, src Source, mem *written) (FileResult, error) {
	res := FileResult{Source: src}
	if _, err := ParseIDPath(src.IDPath); err != nil {
		return res, err
	}
	f, fs, err := openSource(src.Path)
	if err != nil {
		return res, err
	}
	defer f.Close()

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
	if src.BuiltinIDs && src.IDPath != "" {
		return res, fmt.Errorf("%s: an id path for a file read by the built-in rules", src.Path)
	}
	sameIDPath := src.IDPath == state.IDPath || src.IDPath == "" && !src.BuiltinIDs
	sameShard := src.Shard.IsZero() || src.Shard.String() == state.Shard
	if known && state.ID != 0 && state.Dataset == src.Dataset && state.Stage == src.Stage && sameIDPath && sameShard &&
		state.Size == fs.size && state.ModTime == fs.mtime && state.Dev == fs.dev && state.Ino == fs.ino {
		err := ix.unchanged(ctx, src, &state, fs, selfUnread, unread, &res)
		return res, err
	}

	reason, err := reindexReason(f, src, &state, known, fs, sameIDPath, sameShard)
	if err != nil {
		return res, err
	}
	if reason != "" && sameIDPath && sameShard && state.Dataset == src.Dataset && state.Stage == src.Stage && state.IDPath != "" && src.IDPath == "" {
		// Replaced (another inode, cut, other first bytes): the path was
		// given for the file that is gone, not for this one.
		reason += fmt.Sprintf("; the --id path %s given for the old file is forgotten (give --id again if the new lines keep their ids there)", state.IDPath)
		state.IDPath = ""
	}
	if !known {
		state = store.FileState{Path: src.Path}
	}
	var siblings []store.FileState
	if reason != "" {
		if siblings, err = ix.forgetToReread(ctx, src, &state, reason, func() error { return ix.DB.View(view) }); err != nil {
			return res, err
		}
		res.Reindexed = reason
		unread = true
	}
	state.Dataset, state.Stage, state.Dev, state.Ino, state.ModTime = src.Dataset, src.Stage, fs.dev, fs.ino, fs.mtime
	if src.IDPath != "" || src.BuiltinIDs {
		state.IDPath = src.IDPath
	}
	if !src.Shard.IsZero() {
		state.Shard = src.Shard.String()
	}
	idPath, err := ParseIDPath(state.IDPath)
	if err != nil {
		return res, fmt.Errorf("%s: the id path the index remembers: %w", src.Path, err)
	}
	if mem != nil && !(reason == "" && state.Offset == mem.at && fs.size >= mem.at+int64(len(mem.data))) {
		mem = nil
	}
	if err := ix.indexNew(ctx, f, fs.size, src, idPath, &state, mem, &res); err != nil {
		return res, err
	}
	if unread {
		if err := ix.rereadForgotten(ctx, src, siblings, &res); err != nil {
			return res, err
		}
	}
	return res, ctx.Err()
}

// fileStat is what tells one version of a file from another: its size,
// modification time (ns), device and inode.
type fileStat struct {
	size, mtime int64
	dev, ino    uint64
}

// openSource opens the file at path, which must not be a directory, and
// returns it with its fileStat.
func openSource(path string) (*os.File, fileStat, error) {
	var fs fileStat
	f, err := os.Open(path)
	if err != nil {
		return nil, fs, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fs, err
	}
	if fi.IsDir() {
		f.Close()
		return nil, fs, fmt.Errorf("%s is a directory", path)
	}
	fs.size, fs.mtime = fi.Size(), fi.ModTime().UnixNano()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		fs.dev, fs.ino = uint64(st.Dev), st.Ino
	}
	return f, fs, nil
}

// unchanged fills res for a file the index has whole as it is (only a
// torn last line, if any, is left), marks it read if a run read it to its
// end and stopped before saying so (selfUnread), and reads again the
// forgotten files of its group when there are some (unread).
func (ix *Indexer) unchanged(ctx context.Context, src Source, state *store.FileState, fs fileStat, selfUnread, unread bool, res *FileResult) error {
	res.Unchanged = true
	res.Torn = int(fs.size - state.Offset)
	res.NextLine = state.Lines + 1
	if selfUnread { // read to its end by a run that stopped before saying so
		if err := ix.DB.Update(func(tx *store.Tx) error { return tx.MarkRead(src.Path) }); err != nil {
			return err
		}
	}
	if unread {
		return ix.rereadForgotten(ctx, src, nil, res)
	}
	return nil
}

// reindexReason says why a file the index knows (state; known says it
// has it) must be forgotten and read again from its start, "" when it
// need not: it is now read as another dataset, stage, id path or shard,
// or it was replaced, truncated, or its bytes changed under its offset
// (its first bytes, or those that end at its offset: see underOffsets).
func reindexReason(f *os.File, src Source, state *store.FileState, known bool, fs fileStat, sameIDPath, sameShard bool) (string, error) {
	switch {
	case !known || state.ID == 0:
		// nothing indexed from it: nothing to forget. ID 0 is also a file
		// forgotten earlier and not read since; it is read from the start.
	case state.Offset == 0 && state.Dataset == src.Dataset && state.Stage == src.Stage:
		// nothing read from it yet: nothing to forget
	case state.Dataset != src.Dataset || state.Stage != src.Stage:
		return fmt.Sprintf("now indexed as dataset %s, stage %s (was %s, %s)", src.Dataset, src.Stage, state.Dataset, state.Stage), nil
	case !sameIDPath:
		return mappingChange(src.IDPath, state.IDPath), nil
	case !sameShard:
		return fmt.Sprintf("it is now read for shard %s (was %q)", src.Shard, state.Shard), nil
	case state.Dev != fs.dev || state.Ino != fs.ino:
		return "the file was replaced by another (new inode)", nil
	case fs.size < state.Offset:
		return fmt.Sprintf("the file was truncated (%d bytes, %d were indexed)", fs.size, state.Offset), nil
	default:
		return underOffsets(f, state)
	}
	return "", nil
}

// forgetToReread makes the index forget the file of state for reason, with the
// files that repeat its ids (returned), reads its state again with view
// (now Ready, ID 0, Offset 0) and reports it as Reindexed.
func (ix *Indexer) forgetToReread(ctx context.Context, src Source, state *store.FileState, reason string, view func() error) ([]store.FileState, error) {
	// One transaction stores the file (and the files that repeat its
	// ids) reset and in phase Forgetting, then the old records go in
	// batches. A crash anywhere leaves a state the next run resumes.
	var siblings []store.FileState
	err := ix.DB.Update(func(tx *store.Tx) (err error) {
		siblings, err = tx.ForgetFile(state)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("forgetting %s: %w", src.Path, err)
	}
	var removed uint64
	err = ix.DB.FinishForgets(ctx, ix.ForgetBatch, func(_ string, n uint64, done bool) {
		if done {
			removed += n
		}
	})
	if err != nil {
		return nil, err
	}
	if err := view(); err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("%s; its records were removed and it is indexed again from the start", reason)
	if len(siblings) > 0 {
		msg = fmt.Sprintf("%s; %d records were removed and it is indexed again from the start, with %d other files that repeat its ids", reason, removed, len(siblings))
	}
	ix.report(Problem{Path: src.Path, Kind: Reindexed, Msg: msg})
	return siblings, nil
}

// indexNew reads the file's lines after state.Offset and commits them in
// batches, moving state on. The lines come from mem when it is not nil
// (they start where the index stopped and the file, size bytes now, holds
// them; it may hold more: the writer goes on, and the rest is read by the
// next call, as when a file grows while it is read), else from f.
func (ix *Indexer) indexNew(ctx context.Context, f *os.File, size int64, src Source, idPath IDPath, state *store.FileState, mem *written, res *FileResult) error {
	var r io.Reader = f
	var eofAt int64 = -1
	if mem != nil {
		r, eofAt = nil, size
	} else if _, err := f.Seek(state.Offset, io.SeekStart); err != nil {
		return err
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
		go sendParsed(pre, state.Lines, eofAt, parsed, stop)
	} else {
		free <- chunks.Get().(*chunk)
		free <- chunks.Get().(*chunk)
		var lr *lineReader
		if mem != nil { // the bytes just written: no read buffer taken from the pool (and lost)
			lr = memLineReader(mem.data, mem.at, eofAt)
		} else {
			lr = newLineReader(r, state.Offset)
		}
		go parseFile(ctx, lr, src, idPath, state.Lines, maxRecords, maxBytes, parsed, free, stop)
	}

	for c := range parsed {
		if c.err != nil {
			return fmt.Errorf("reading %s: %w", src.Path, c.err)
		}
		if c.last {
			state.Size = c.off + int64(c.torn)
			res.Torn, res.NextLine = c.torn, c.lines+1
		}
		if err := ix.commit(f, src, state, c, res); err != nil {
			return err
		}
		last := c.last
		free <- c
		if last {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// sendParsed sends the chunks parsed ahead in pre on parsed, their line
// numbers moved past base, the lines before them (commit moves the state
// on), until stop; the last is the file's end when pre ends at eofAt.
func sendParsed(pre *Parsed, base, eofAt int64, parsed chan<- *chunk, stop <-chan struct{}) {
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
