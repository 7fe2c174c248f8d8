package export

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"gendex/ingest"
	"gendex/store"
)

// Config says what records export writes and how.
type Config struct {
	Format           Format
	IncludeTruncated bool // export finish_reason length answers instead of excluding them
	MaxLen           int  // exclude records longer than this (0: no limit); see decide
	KeepReasoning    bool // conversations: an assistant turn carries reasoning_content
	// Tokenizer tokenizes prompts for the ids format when neither the
	// answer (prompt_ids) nor the prompt (input_ids) has their ids; nil
	// leaves such answers for a run with one.
	Tokenizer Tokenizer
	// FlushBytes is how much is buffered before one write and fsync of
	// tokenized.jsonl (default 8 MiB; of excluded.jsonl once a quarter of
	// it is exclusions); ChunkSize how many answers are read, sorted
	// by file and offset, at a time (default 8,192: answers that come
	// out of order do so within a few hundred lines, and each entry in
	// memory is ~350 bytes).
	FlushBytes int
	ChunkSize  int
	Now        func() time.Time
	// Logf receives warnings and a progress line every 10 s; nil drops them.
	Logf func(format string, a ...any)
}

// Dataset is one dataset to export.
type Dataset struct {
	Name string
	// Out is the folder export writes tokenized.jsonl and excluded.jsonl in.
	Out string
	// Sources are the dataset's stage files found in the folders given;
	// each is indexed to its end before anything is decided.
	Sources []ingest.Source
}

// Tokenized and Excluded are export's outputs in Dataset.Out.
func (d Dataset) Tokenized() string { return filepath.Join(d.Out, "tokenized.jsonl") }
func (d Dataset) Excluded() string  { return filepath.Join(d.Out, "excluded.jsonl") }

// Find lists the datasets under paths (each a dataset root or a dataset
// folder, as ingest.Discover reads them), in name order. A dataset's
// outputs go beside its first raw_responses file, or to outDir/<dataset>
// when outDir is set. Datasets with no raw_responses file are left out.
//
// An export's records are those in its own output folder: the
// tokenized* and excluded* files of the folders given count only when
// that folder is the output folder, and with outDir, those of
// outDir/<dataset> count. Records elsewhere never stand in for them.
func Find(paths []string, outDir string) ([]Dataset, error) {
	byName := map[string]*Dataset{}
	for _, p := range paths {
		srcs, err := ingest.Discover(p, "", nil)
		if err != nil {
			return nil, err
		}
		for _, s := range srcs {
			d := byName[s.Dataset]
			if d == nil {
				d = &Dataset{Name: s.Dataset}
				byName[s.Dataset] = d
			}
			d.Sources = append(d.Sources, s)
			if s.Stage == store.Raw && d.Out == "" {
				d.Out = filepath.Dir(s.Path)
			}
		}
	}
	var abs string
	if outDir != "" {
		var err error
		if abs, err = filepath.Abs(outDir); err != nil {
			return nil, err
		}
	}
	var out []Dataset
	for _, d := range byName {
		if d.Out == "" {
			continue
		}
		if abs != "" {
			d.Out = filepath.Join(abs, d.Name)
		}
		srcs := d.Sources[:0]
		for _, s := range d.Sources {
			if !isOutput(s.Stage) || filepath.Dir(s.Path) == d.Out {
				srcs = append(srcs, s)
			}
		}
		d.Sources = srcs
		if abs != "" {
			own, err := outputFiles(d.Out, d.Name)
			if err != nil {
				return nil, err
			}
			d.Sources = append(d.Sources, own...)
		}
		out = append(out, *d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// isOutput reports whether a stage is one of export's outputs.
func isOutput(s store.Stage) bool { return s == store.Tokenized || s == store.Excluded }

// outputFiles lists the tokenized* and excluded* files already in the
// output folder dir, if it exists.
func outputFiles(dir, dataset string) ([]ingest.Source, error) {
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []ingest.Source
	for _, e := range entries { // in name order
		if st, ok := ingest.StageOf(e.Name()); ok && !e.IsDir() && isOutput(st) {
			out = append(out, ingest.Source{Path: filepath.Join(dir, e.Name()), Dataset: dataset, Stage: st})
		}
	}
	return out, nil
}

// Result is what one dataset's export did.
type Result struct {
	Dataset     string
	Todo        int // answers with neither a record nor an exclusion at the start
	Records     int
	Excluded    map[string]int // by reason
	Left        [numLeft]int
	BadPrompts  []string // the first few bad prompt lines, file:line: why
	LenUnknown  int      // records written without a token count to check --max-len against
	Unmatched   int      // earlier turns whose output_ids were not found in the prompt ids
	AnswerBytes int64    // answer lines read
}

// LeftNoPrompt, LeftNeedsServer and LeftBadPrompt count the answers left
// for a later run, by why.
func (r *Result) LeftNoPrompt() int    { return r.Left[leftNoPrompt] }
func (r *Result) LeftNeedsServer() int { return r.Left[leftNeedsServer] }
func (r *Result) LeftBadPrompt() int   { return r.Left[leftBadPrompt] }

// Exporter writes training records for datasets, through Indexer, into
// the index DB that Indexer writes.
type Exporter struct {
	Ix *ingest.Indexer
	Config
}

// Export writes a record or an exclusion for every answer of d that has
// neither, and indexes them. The crash protocol: every FlushBytes, one
// write and fsync of tokenized.jsonl, then (see flush) of excluded.jsonl,
// then both are indexed; the next run first indexes both to their ends and cuts a torn
// last line, so whatever the moment of a crash, each answer ends with
// exactly one record or one exclusion. When ctx is done it stops after
// writing what it has decided and returns ctx.Err(). The index must hold
// no records or exclusions of d from another folder than d.Out (else an
// *ElsewhereError, before anything is written).
func (x *Exporter) Export(ctx context.Context, d Dataset) (Result, error) {
	res := Result{Dataset: d.Name, Excluded: map[string]int{}}
	c := &x.Config
	if c.FlushBytes <= 0 {
		c.FlushBytes = 8 << 20
	}
	if c.ChunkSize <= 0 {
		c.ChunkSize = 8192
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if err := x.checkPlace(d); err != nil {
		return res, err
	}
	if err := os.MkdirAll(d.Out, 0o755); err != nil {
		return res, fmt.Errorf("output folder: %w", err)
	}
	out := &outputs{
		tokSrc: ingest.Source{Path: d.Tokenized(), Dataset: d.Name, Stage: store.Tokenized},
		excSrc: ingest.Source{Path: d.Excluded(), Dataset: d.Name, Stage: store.Excluded},
	}
	out.tokBuf = make([]byte, 0, c.FlushBytes+1<<20)
	var err error
	if out.tok, err = ingest.OpenOutput(out.tokSrc.Path); err != nil {
		return res, err
	}
	defer out.tok.Close()
	if out.exc, err = ingest.OpenOutput(out.excSrc.Path); err != nil {
		return res, err
	}
	defer out.exc.Close()
	defer out.stop() // before the files close
	if err := x.reconcile(d, out); err != nil {
		return res, err
	}
	if fi, err := out.tok.Stat(); err == nil {
		out.tokEnd = fi.Size()
	}
	todo, paths, err := x.todo(d.Name)
	if err != nil {
		return res, err
	}
	defer todo.close()
	res.Todo = todo.n
	if todo.n == 0 {
		return res, nil
	}
	if err := todo.rewind(); err != nil {
		return res, err
	}
	x.start(out, c.FlushBytes+1<<20)
	var prefetch *cachedTokenizer
	if c.Format == IDs && c.Tokenizer != nil {
		prefetch = &cachedTokenizer{t: c.Tokenizer}
		c.Tokenizer = prefetch
		defer func() { c.Tokenizer = prefetch.t }()
	}
	// finish writes what is decided and indexes it all.
	finish := func() error {
		if err := x.flush(out, true); err != nil {
			return err
		}
		if err := out.stop(); err != nil {
			return err
		}
		return x.index(out)
	}
	read, closeReaders := x.reader(d.Name, paths, false)
	defer closeReaders()
	// A helper goroutine decides each chunk from its end, with readers
	// of its own, while this one decides it from its start; they meet
	// where they meet (see split). Not while prompts are tokenized ahead:
	// the prefetch cache is this goroutine's.
	var help *helper
	if prefetch == nil {
		hread, closeHelper := x.reader(d.Name, paths, true)
		defer closeHelper()
		help = &helper{x: x, read: hread, res: Result{Excluded: map[string]int{}}}
		defer help.wait() // before its readers close
	}
	chunk := make([]entry, c.ChunkSize)
	var keys []placeKey
	done, lastLog := 0, c.Now()
	progress := func(n int) {
		before := done
		done += n
		if c.Logf != nil && done/1024 != before/1024 {
			if now := c.Now(); now.Sub(lastLog) >= 10*time.Second {
				lastLog = now
				c.Logf("export: %s: %d/%d answers: %d records, %d excluded, %d left", d.Name, done, res.Todo,
					res.Records, sum(res.Excluded), res.Left[0]+res.Left[1]+res.Left[2])
			}
		}
	}
	for {
		n, err := todo.next(chunk)
		if err != nil {
			return res, fmt.Errorf("reading the todo list: %w", err)
		}
		if n == 0 {
			break
		}
		es := chunk[:n]
		keys = sortByPlace(es, keys)
		var sp split
		sp.reset(len(es))
		helped := help != nil && len(es) >= 2
		if helped {
			help.start(ctx, es, &sp)
		}
		for i := 0; ; i++ {
			k, ok := sp.front()
			if !ok {
				break
			}
			if i%prefetchWindow == 0 && prefetch != nil && prefetch.due() { // no helper: k == i
				if err := prefetch.fetch(ctx, x, es[i:min(i+prefetchWindow, len(es))], read); err != nil {
					return res, err
				}
			}
			if ctx.Err() != nil {
				help.wait() // what it decided is not written: exported next run
				if err := finish(); err != nil {
					return res, err
				}
				return res, ctx.Err()
			}
			if err := x.one(ctx, &es[k], read, &out.tokBuf, &out.excBuf, &res); err != nil {
				return res, err
			}
			if len(out.tokBuf)+len(out.excBuf) >= c.FlushBytes {
				if err := x.flush(out, false); err != nil {
					return res, err
				}
			}
			progress(1)
		}
		if !helped {
			continue
		}
		// The two met: every entry of the chunk is decided.
		if err := help.wait(); err != nil {
			return res, err
		}
		if err := x.take(out, help, &res); err != nil {
			return res, err
		}
		progress(len(help.ends))
	}
	return res, finish()
}

// reader returns a reader of the lines of dataset's files (paths by file
// id) and a function that closes the files it opened. A reader is used by
// one goroutine; back: it reads lines mostly in decreasing offsets.
func (x *Exporter) reader(dataset string, paths map[uint32]string, back bool) (reader, func()) {
	readers := map[uint32]*lineReader{}
	read := func(r *store.Record) ([]byte, string, error) {
		lr := readers[r.File]
		if lr == nil {
			path, ok := paths[r.File]
			if !ok {
				return nil, "", fmt.Errorf("file %d of dataset %s is not in the index; run gendex ingest on its folder, then export", r.File, dataset)
			}
			var err error
			if lr, err = openReader(path); err != nil {
				return nil, "", err
			}
			lr.back = back
			readers[r.File] = lr
		}
		line, err := lr.line(r)
		return line, lr.path, err
	}
	return read, func() {
		for _, r := range readers {
			r.close()
		}
	}
}

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
		if len(res.BadPrompts) < 5 {
			res.BadPrompts = append(res.BadPrompts, b)
		}
	}
	res.Records += r.Records
	res.LenUnknown += r.LenUnknown
	res.Unmatched += r.Unmatched
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

// reader returns the line a record points at, and its file's path.
type reader func(*store.Record) ([]byte, string, error)

// decideEntry reads an answer (and, when it is needed, its prompt) and
// decides it, appending a record to dst. n is the answer's size.
func (x *Exporter) decideEntry(ctx context.Context, e *entry, read reader, dst []byte) (o outcome, n int, err error) {
	line, path, err := read(&e.rec)
	if err != nil {
		return o, 0, err
	}
	// The answer's line is valid until the next read of its file; the
	// prompt lives in another file, with its own reader.
	j := &job{id: e.id, rec: &e.rec, line: line, path: path, dst: dst, entry: e, read: read}
	o, err = x.decide(ctx, j)
	if j.promptErr != nil {
		return o, len(line), j.promptErr
	}
	return o, len(line), err
}

// prompt reads and parses the answer's prompt; else it says why not, and
// where is what is wrong with a bad prompt line.
func (j *job) prompt() (p *prompt, where place, why leftWhy, ok bool) {
	e := j.entry
	if !e.hasPrompt {
		return nil, place{}, leftNoPrompt, false
	}
	pl, ppath, err := j.read(&e.prompt)
	if err != nil {
		j.promptErr = err
		return nil, place{}, leftBadPrompt, false
	}
	if err := j.p.parse(pl); err != nil {
		return nil, place{note: fmt.Sprintf("%s:%d: %v", ppath, e.prompt.Line, err)}, leftBadPrompt, false
	}
	return &j.p, place{path: ppath, line: e.prompt.Line}, 0, true
}

// place is a prompt's file:line (the file's base name), made into text
// only when a message needs it; or, when note is set, that note.
type place struct {
	path string
	line int64
	note string
}

func (p place) String() string {
	if p.note != "" || p.path == "" {
		return p.note
	}
	return filepath.Base(p.path) + ":" + strconv.FormatInt(p.line, 10)
}

// one decides one answer and appends its record to tok or its exclusion
// to exc, and counts it in res.
func (x *Exporter) one(ctx context.Context, e *entry, read reader, tok, exc *[]byte, res *Result) error {
	o, n, err := x.decideEntry(ctx, e, read, *tok)
	if err != nil {
		return err
	}
	res.AnswerBytes += int64(n)
	switch {
	case o.left:
		res.Left[o.why]++
		if o.why == leftBadPrompt && len(res.BadPrompts) < 5 {
			res.BadPrompts = append(res.BadPrompts, o.note)
		}
	case o.record != nil:
		*tok = o.record
		res.Records++
		if o.lenUnknown {
			res.LenUnknown++
		}
		res.Unmatched += o.unmatched
	default:
		*exc = exclusionLine(*exc, e.id, o.reason, o.detail, x.Now())
		res.Excluded[o.reason]++
	}
	return nil
}

// reconcile indexes every stage file of d to its end, export's outputs
// last, and cuts a torn last line of an output (export is their only
// writer: a torn line is one an earlier run did not finish).
func (x *Exporter) reconcile(d Dataset, out *outputs) error {
	for _, src := range d.Sources {
		if src.Path == out.tokSrc.Path || src.Path == out.excSrc.Path {
			continue
		}
		res, err := x.Ix.IndexFile(context.Background(), src)
		if err != nil {
			return err
		}
		if res.Torn > 0 && x.Logf != nil {
			x.Logf("warning: %s:%d: last line has no newline; it is left out until it has one", src.Path, res.NextLine)
		}
	}
	for _, o := range []struct {
		f   *os.File
		src ingest.Source
	}{{out.tok, out.tokSrc}, {out.exc, out.excSrc}} {
		res, err := x.Ix.IndexFile(context.Background(), o.src)
		if err != nil {
			return err
		}
		if res.Torn == 0 {
			continue
		}
		fi, err := o.f.Stat()
		if err != nil {
			return err
		}
		if err := o.f.Truncate(fi.Size() - int64(res.Torn)); err != nil {
			return fmt.Errorf("cutting the torn last line of %s: %w", o.src.Path, err)
		}
		if err := o.f.Sync(); err != nil {
			return err
		}
		if x.Logf != nil {
			x.Logf("warning: %s:%d: cut an unfinished last line (%d bytes) left by an earlier run; its answer is exported again", o.src.Path, res.NextLine, res.Torn)
		}
	}
	return nil
}

// todo lists, in one read transaction, the raw answers of dataset with
// neither a tokenized nor an excluded record, with their prompts' records,
// and returns the paths of the files they live in. The walk is one merge
// of the raw and prompts stages (in id order) with View.Missing, not a
// lookup per answer.
func (x *Exporter) todo(dataset string) (*spill, map[uint32]string, error) {
	sp, err := newSpill()
	if err != nil {
		return nil, nil, err
	}
	paths := map[uint32]string{}
	err = x.Ix.DB.View(func(v *store.View) error {
		// The walk reads every page of three stages: they leave the
		// process's memory as it goes, within the indexer's budget.
		v.KeepMappedUnder(x.Ix.ReleaseAbove)
		path := func(id uint32) {
			if _, ok := paths[id]; !ok {
				if p, ok := v.FilePath(id); ok {
					paths[id] = p
				}
			}
		}
		raws, stopRaws := iter.Pull(records(v, dataset, store.Raw))
		defer stopRaws()
		prompts, stopPrompts := iter.Pull(records(v, dataset, store.Prompts))
		defer stopPrompts()
		var p store.Record
		pok := false
		first := true
		return v.Missing(dataset, store.Raw, func(id string) error {
			e := entry{id: id}
			for {
				r, ok := raws()
				if !ok {
					return fmt.Errorf("dataset %s: raw answer %q is missing from its own stage", dataset, id)
				}
				if r.ID == id {
					e.rec = r
					break
				}
			}
			path(e.rec.File)
			if first {
				p, pok = prompts()
				first = false
			}
			for pok && p.ID < id {
				p, pok = prompts()
			}
			if pok && p.ID == id {
				e.prompt, e.hasPrompt = p, true
				path(p.File)
			}
			return sp.add(&e)
		}, store.Tokenized, store.Excluded)
	})
	if err != nil {
		sp.close()
		return nil, nil, err
	}
	return sp, paths, nil
}

// records is the records of a dataset's stage in id order, as an iterator.
func records(v *store.View, dataset string, stage store.Stage) iter.Seq[store.Record] {
	return func(yield func(store.Record) bool) {
		v.Each(dataset, stage, func(r *store.Record) error {
			if !yield(*r) {
				return errStop
			}
			return nil
		})
	}
}

var errStop = errors.New("stop")
