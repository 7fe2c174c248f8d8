package gen

// gen --export: the training records made while answers arrive.
//
// A worker decides an answer's record or exclusion (export.DecideLine,
// the decision `gendex export` makes from the files) from the raw line it
// built and the prompt line it was fed, and sends both in one result. The
// writer appends them to tokenized.jsonl or excluded.jsonl in the same
// flush as the raw line and after it (the order of write): turns, raw,
// errors, tokenized, excluded, each written, fsynced and indexed. So a
// record never reaches the disk before its answer.
//
// Before the first request, catchUp runs export on each dataset: its
// outputs are indexed to their ends and a torn last line cut, and every
// answer without a record or an exclusion gets one (answers written by a
// run without --export, or by one killed between an answer's write and its
// record's). Whatever the moment of a crash, the next run leaves exactly
// one record or one exclusion per answer.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"gendex/ingest"
	"gendex/ingest/export"
	"gendex/ingest/gen/client"
	"gendex/store"
)

// exportOut is a dataset's --export outputs and what went into them. The
// counts are kept by catchUp and then by the writer goroutine alone; they
// are read after it ends.
type exportOut struct {
	tok, exc         ingest.Source
	tokFile, excFile *os.File
	catchUpDone      bool // the next catchUp is the final pass (redo.go)
	exportCounts
	reasons map[string]int64 // exclusions by reason
}

// exportCounts counts records, exclusions and answers left; and truncated,
// the answers cut at the token limit (finish_reason length), counted with
// or without --export: take sees every raw line the run writes (ownLimit:
// of those, the ones cut at their prompt's own max_new_tokens).
type exportCounts struct{ records, excluded, left, truncated, ownLimit int64 }

// catchUp gives every answer of ds that has neither a record nor an
// exclusion its record or exclusion, through export's own path, before
// the run's first request (and before it connects: tok waits for a
// server only if a prompt must be tokenized).
func (w *writer) catchUp(ctx context.Context, ds *dsRun, tok export.Tokenizer) error {
	e := &ds.exp
	x := &export.Exporter{Ix: w.ix, Config: *w.cfg.Export}
	x.Tokenizer = tok
	x.Logf = w.ctl.logf
	d := export.Dataset{Name: ds.Name, Out: filepath.Dir(ds.Raw)}
	if err := x.CheckPlace(d); err != nil { // before the outputs are created
		return fmt.Errorf("--export: %s: making the records of answers written earlier: %w", ds.Name, err)
	}
	// Held, and locked, from here to the run's end (the catch-up export
	// writes through them): a second writer (an export of the same folder)
	// fails at its start, not gen in the middle, and gen never finds its
	// own lock taken.
	for _, o := range []struct {
		f   **os.File
		src ingest.Source
	}{{&e.tokFile, e.tok}, {&e.excFile, e.exc}} {
		if *o.f != nil {
			continue // the final pass (redo): held since the start
		}
		var err error
		if *o.f, err = openOwn(w.ctl, o.src.Path, ingest.OpenOutput); err != nil {
			return err
		}
	}
	d.Held = &export.HeldOutputs{Tokenized: e.tokFile, Excluded: e.excFile}
	res, err := x.Export(ctx, d)
	e.tokFile, e.excFile = d.Held.Tokenized, d.Held.Excluded // a rewrite replaces them
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("--export: %s: making the records of answers written earlier: %w", ds.Name, err)
	}
	e.records += int64(res.Records)
	var excluded int64
	reasons := map[string]int64{}
	for reason, n := range res.Excluded {
		excluded += int64(n)
		reasons[reason] += int64(n)
		e.excluded += int64(n)
		e.reasons[reason] += int64(n)
	}
	left := res.LeftNoPrompt() + res.LeftNeedsServer() + res.LeftBadPrompt()
	e.left += int64(left)
	if res.Todo > 0 {
		what := "answers written earlier had no record"
		if ds.exp.catchUpDone {
			what = "answers asked again (--redo) get their records"
		}
		w.ctl.logf("gen: --export: %s: %d %s: %d records, %d excluded%s, %d left",
			ds.Name, res.Todo, what, res.Records, excluded, reasonsText(reasons), left)
	}
	ds.exp.catchUpDone = true
	if res.LeftBadPrompt() > 0 {
		w.ctl.logf("gen: --export: %s: %d answers left: their prompt lines are not prompts (%s)", ds.Name, res.LeftBadPrompt(), strings.Join(res.BadPrompts, "; "))
	}
	if res.LeftNoPrompt() > 0 {
		w.ctl.logf("gen: --export: %s: %d answers left: their prompts are not in the index", ds.Name, res.LeftNoPrompt())
	}
	return err
}

// firstServer is the tokenizer of catchUp, which runs before the run
// connects: the first --server, waited for (up to WaitReady) the first
// time a prompt must be tokenized, and only then.
func (w *writer) firstServer() export.Tokenizer {
	c := client.New(w.cfg.Servers[0], client.Options{APIKey: w.cfg.APIKey, HTTP: w.cfg.HTTP, Model: w.cfg.Model, Concurrency: 16})
	return &lazyServer{c: c, wait: w.cfg.WaitReady, logf: w.ctl.logf}
}

// lazyServer tokenizes on one server, once it is ready.
type lazyServer struct {
	c    *client.Client
	wait time.Duration
	logf func(string, ...any)
	once sync.Once
	err  error
}

func (t *lazyServer) ready(ctx context.Context) error {
	t.once.Do(func() {
		t.logf("gen: --export: earlier answers need their prompts tokenized: waiting for %s", t.c.Server())
		ctx, cancel := context.WithTimeout(ctx, t.wait)
		defer cancel()
		t.err = t.c.WaitReady(ctx, nil)
	})
	return t.err
}

func (t *lazyServer) TokenizeMessages(ctx context.Context, msgs []client.Message) ([]int, error) {
	if err := t.ready(ctx); err != nil {
		return nil, err
	}
	return t.c.TokenizeMessages(ctx, msgs)
}

func (t *lazyServer) TokenizeText(ctx context.Context, text string) ([]int, error) {
	if err := t.ready(ctx); err != nil {
		return nil, err
	}
	return t.c.TokenizeText(ctx, text)
}

// decideExport decides, under x (--export; nil: nothing), the record or
// exclusion of res's raw line, the answer to p; ctx is the requests'.
func decideExport(ctx context.Context, x *export.Config, res *result, p *Prompt) {
	if x == nil {
		return
	}
	d, err := x.DecideLine(ctx, p.unitKey(), res.line, res.ds.Raw, p.Raw, p.Path, p.Line)
	if err != nil { // gen gives DecideLine no tokenizer: not expected
		d = export.Decision{Left: err.Error()}
	}
	res.exp = d
}

// exportBufs is one flush's records and exclusions of a dataset.
type exportBufs struct {
	tok, exc []byte
	exportCounts
	reasons map[string]int64
}

// take adds res's record or exclusion to b, and counts it when cut.
func (b *exportBufs) take(ctl *control, res *result) {
	if res.truncated {
		b.truncated++
	}
	if res.ownLimit {
		b.ownLimit++
	}
	d := &res.exp
	switch {
	case d.Left != "":
		b.left++
		ctl.once("export left "+res.ds.Name+"\x00"+d.Left, "gen: --export: %s: an answer has no record yet: %s", res.ds.Name, d.Left)
	case d.Reason != "":
		b.exc = append(b.exc, d.Line...)
		b.excluded++
		if b.reasons == nil {
			b.reasons = map[string]int64{}
		}
		b.reasons[d.Reason]++
	case d.Line != nil:
		b.tok = append(b.tok, d.Line...)
		b.records++
	}
}

// flushExport writes b's records, then its exclusions (each written,
// fsynced and indexed), after the raw lines they belong to. The files are
// open since catchUp.
func (w *writer) flushExport(ds *dsRun, b *exportBufs) error {
	e := &ds.exp
	if err := w.flushFile(e.tokFile, e.tok, b.tok); err != nil {
		return err
	}
	if err := w.flushFile(e.excFile, e.exc, b.exc); err != nil {
		return err
	}
	e.records += b.records
	e.excluded += b.excluded
	e.left += b.left
	e.truncated += b.truncated
	e.ownLimit += b.ownLimit
	for reason, n := range b.reasons {
		e.reasons[reason] += n
	}
	return nil
}

// reasonsText is " (length 3, abort 1)", by reason; "" for none.
func reasonsText(m map[string]int64) string {
	var parts []string
	for reason, n := range m {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", reason, n))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	sort.Strings(parts)
	return " (" + strings.Join(parts, ", ") + ")"
}

// exportText is a dataset's status under --export, from the index:
// ", 950 records, 12 excluded".
func exportText(s store.Summary) string {
	return fmt.Sprintf(", %d records, %d excluded", s.Stage(store.Tokenized).Records, s.Excluded())
}

// addExport adds the datasets' --export counts, and the answers cut at
// the token limit, to sum.
func (w *writer) addExport(sum *Summary) {
	for _, ds := range w.sets {
		sum.Records += ds.exp.records
		sum.Excluded += ds.exp.excluded
		sum.ExportLeft += ds.exp.left
		sum.Truncated += ds.exp.truncated
		sum.TruncatedOwnLimit += ds.exp.ownLimit
	}
}
