package export

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
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
	// ExcludeToolStops excludes a tool conversation gen stopped where the
	// model departed from the data (ReasonToolStop) instead of making its
	// record, which ends with the model's own turn.
	ExcludeToolStops bool
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
	// Held, when set, are Tokenized() and Excluded() already opened and
	// locked by the caller (ingest.OpenOutput), which keeps them after
	// Export returns: gen --export holds its outputs from before its
	// catch-up export to its end, so no moment lies between the two in
	// which its own lock could be found taken. Nil: Export opens, locks and
	// closes them itself.
	Held *HeldOutputs
}

// HeldOutputs are a dataset's export outputs, opened and locked.
type HeldOutputs struct{ Tokenized, Excluded *os.File }

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
		if abs, err = ingest.CanonicalPath(outDir); err != nil {
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
	OwnTurns    int      // earlier turns put in the records as the model's own ids (turnloss.go)
	AnswerBytes int64    // answer lines read
	// Unwritten: an error stopped the export before all it had decided
	// was written, so Records and Excluded count decisions, not lines.
	Unwritten bool
}

// then adds to r, a pass that stopped at an error after writing what it
// had decided, the pass after it: r's records and exclusions are written,
// and next's todo list holds the answers r left.
func (r *Result) then(next *Result) {
	r.Todo = r.Records + sum(r.Excluded) + next.Todo
	r.Records += next.Records
	for reason, n := range next.Excluded {
		r.Excluded[reason] += n
	}
	r.Left, r.BadPrompts = next.Left, next.BadPrompts
	r.LenUnknown += next.LenUnknown
	r.OwnTurns += next.OwnTurns
	r.AnswerBytes += next.AnswerBytes
	r.Unwritten = r.Unwritten || next.Unwritten
}

// noteBadPrompt keeps note (a bad prompt line's file:line: why) among
// the first few BadPrompts, once: the samples of one prompt (gen
// --samples) share its line, and the message names each line once.
func (r *Result) noteBadPrompt(note string) {
	if len(r.BadPrompts) < 5 && !slices.Contains(r.BadPrompts, note) {
		r.BadPrompts = append(r.BadPrompts, note)
	}
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
	specs map[uint32]ingest.IDPath // the answer files' mappings, by file id (set by todo)
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
	reread := map[string]bool{}
	var total Result
	for i := 0; ; i++ {
		res, err := x.export(ctx, d)
		if i == 0 {
			total = res
		} else {
			total.then(&res)
		}
		// A line that is not the one the index holds: its file changed
		// under its offsets in a way the disk check cannot see (an index
		// written before the end of what was read was kept). What was
		// decided before it is written; the file is forgotten and read
		// again, once, and the rest is exported from it.
		var ch *ChangedError
		if !errors.As(err, &ch) || reread[ch.Path] {
			return total, err
		}
		reread[ch.Path] = true
		if err := x.Ix.ForgetChanged(ctx, ch.Path, ch.Line); err != nil {
			return total, err
		}
	}
}

// export is one pass of Export.
func (x *Exporter) export(ctx context.Context, d Dataset) (Result, error) {
	res := Result{Dataset: d.Name, Excluded: map[string]int{}}
	c := &x.Config
	c.defaults()
	if err := x.CheckPlace(d); err != nil {
		return res, err
	}
	out, closeOut, err := x.openOutputs(d)
	if err != nil {
		return res, err
	}
	defer closeOut()
	defer out.stop() // before the files close
	if err := x.reconcile(d, out); err != nil {
		return res, err
	}
	if _, err := x.dropStale(ctx, &d, out); err != nil {
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
	err = x.decideAll(ctx, d.Name, out, todo, paths, prefetch, &res)
	return res, err
}

// defaults fills in the settings left zero.
func (c *Config) defaults() {
	if c.FlushBytes <= 0 {
		c.FlushBytes = 8 << 20
	}
	if c.ChunkSize <= 0 {
		c.ChunkSize = 8192
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// openOutputs makes d's output folder and opens (or takes, when d holds
// them) its tokenized.jsonl and excluded.jsonl, locked; closeOut closes
// the files it opened.
func (x *Exporter) openOutputs(d Dataset) (out *outputs, closeOut func(), err error) {
	if err := os.MkdirAll(d.Out, 0o755); err != nil {
		return nil, nil, fmt.Errorf("output folder: %w", err)
	}
	out = &outputs{
		tokSrc: ingest.Source{Path: d.Tokenized(), Dataset: d.Name, Stage: store.Tokenized},
		excSrc: ingest.Source{Path: d.Excluded(), Dataset: d.Name, Stage: store.Excluded},
	}
	out.tokBuf = make([]byte, 0, x.FlushBytes+1<<20)
	if d.Held != nil {
		out.tok, out.exc = d.Held.Tokenized, d.Held.Excluded
		return out, func() {}, nil
	}
	if out.tok, err = ingest.OpenOutput(out.tokSrc.Path); err != nil {
		return nil, nil, err
	}
	if out.exc, err = ingest.OpenOutput(out.excSrc.Path); err != nil {
		out.tok.Close()
		return nil, nil, err
	}
	return out, func() { out.exc.Close(); out.tok.Close() }, nil
}

// decideAll decides every answer of the todo list, chunk by chunk,
// writes what it decides to out, and indexes it (see Export).
func (x *Exporter) decideAll(ctx context.Context, dataset string, out *outputs, todo *spill, paths map[uint32]string,
	prefetch *cachedTokenizer, res *Result) error {
	c := &x.Config
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
	read, closeReaders := x.reader(dataset, paths, false)
	defer closeReaders()
	// A helper goroutine decides each chunk from its end, with readers
	// of its own, while this one decides it from its start; they meet
	// where they meet (see split). Not while prompts are tokenized ahead:
	// the prefetch cache is this goroutine's.
	var help *helper
	if prefetch == nil {
		hread, closeHelper := x.reader(dataset, paths, true)
		defer closeHelper()
		help = &helper{x: x, read: hread, res: Result{Excluded: map[string]int{}}}
		defer help.wait() // before its readers close
	}
	// stopAt writes what was decided before err (the helper's too), so
	// that the counts are of what was written, and returns err.
	stopAt := func(err error, sp *split, helped bool) error {
		if helped {
			sp.reset(0) // the helper takes no more
			help.wait() // its error, if any, comes after err
			if e := x.take(out, help, res); e != nil {
				res.Unwritten = true
				return err
			}
		}
		if e := finish(); e != nil {
			res.Unwritten = true
		}
		return err
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
				c.Logf("export: %s: %d/%d answers: %d records, %d excluded, %d left", dataset, done, res.Todo,
					res.Records, sum(res.Excluded), res.Left[0]+res.Left[1]+res.Left[2])
			}
		}
	}
	for {
		n, err := todo.next(chunk)
		if err != nil {
			return fmt.Errorf("reading the todo list: %w", err)
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
					return stopAt(err, &sp, helped)
				}
			}
			if ctx.Err() != nil {
				help.wait() // what it decided is not written: exported next run
				if err := finish(); err != nil {
					return err
				}
				return ctx.Err()
			}
			if err := x.one(ctx, &es[k], read, &out.tokBuf, &out.excBuf, res); err != nil {
				return stopAt(err, &sp, helped)
			}
			if len(out.tokBuf)+len(out.excBuf) >= c.FlushBytes {
				if err := x.flush(out, false); err != nil {
					res.Unwritten = true
					return err
				}
			}
			progress(1)
		}
		if !helped {
			continue
		}
		// The two met: every entry of the chunk is decided.
		if err := help.wait(); err != nil {
			return stopAt(err, &sp, helped)
		}
		if err := x.take(out, help, res); err != nil {
			res.Unwritten = true
			return err
		}
		progress(len(help.ends))
	}
	if err := finish(); err != nil {
		res.Unwritten = true
		return err
	}
	return nil
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
	j := &job{id: e.id, rec: &e.rec, line: line, path: path, spec: x.specs[e.rec.File], dst: dst, entry: e, read: read}
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
		if o.why == leftBadPrompt {
			res.noteBadPrompt(o.note)
		}
	case o.record != nil:
		*tok = o.record
		res.Records++
		if o.lenUnknown {
			res.LenUnknown++
		}
		res.OwnTurns += o.ownTurns
	default:
		*exc = exclusionLine(*exc, e.id, e.rec.Samples, o.reason, o.detail, x.Now(), e.rec.Sum)
		res.Excluded[o.reason]++
	}
	return nil
}
