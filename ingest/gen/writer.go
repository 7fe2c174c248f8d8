package gen

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"gendex/ingest"
	"gendex/store"
)

// writer owns a run's output files (raw_responses, errors, turns, and
// under --export tokenized and excluded) and their records in the index.
// At the start it brings the index level with each dataset's files
// (settlePlaces, reconcile, countAnswerMakers), makes the records of
// earlier answers (catchUp; again in a redo's final pass); connect asks it
// whether a server's answers may join those written (checkServerKind,
// checkProvenance); then it appends every result to its file, fsyncs and
// indexes it (write), and counts it in its dataset. It sends no request
// but catchUp's tokenizing and never chooses what is asked: it writes the
// results it is given. Run builds it (newRun) and calls it.
type writer struct {
	ctl  *control
	cfg  *Config // read only
	db   *store.DB
	ix   *ingest.Indexer
	sets []*dsRun // the datasets reconcile opened (Run sets them once opened)
	// halfDone counts a dataset's conversations half done
	// (run.countHalfDone, turns.go).
	halfDone func(v *store.View, name string) (int64, error)
}

// write appends results to their files until results is closed: every
// FlushEvery (or 4 MiB), one write and an fsync per file, each file then
// indexed, in this order:
// turns.jsonl, raw_responses.jsonl, errors.jsonl, and under --export
// tokenized.jsonl and excluded.jsonl. A conversation's turn lines
// therefore reach the disk (and the index) no later than its raw line or
// its error: a worker sends them in turn order, and a flush writes the
// turns first; an answer's record comes with its raw line, and is written
// after it.
func (w *writer) write(results <-chan result) error {
	type bufs struct {
		raw, errs, turns                    []byte
		ok, failed, nTurns, tokens, unknown int64
		opens, closes                       int64
		exp                                 exportBufs
	}
	pending := map[*dsRun]*bufs{}
	size := 0
	tick := time.NewTicker(w.cfg.FlushEvery)
	defer tick.Stop()
	var failed error
	flush := func() {
		for ds, b := range pending {
			if failed == nil && len(b.turns) > 0 && ds.turnsFile == nil {
				ds.turnsFile, failed = openOwn(w.ctl, ds.Turns, ingest.OpenOutput)
			}
			if failed == nil {
				failed = w.flushFile(ds.turnsFile, ds.turns, b.turns)
			}
			if failed == nil {
				failed = w.flushFile(ds.rawFile, ds.raw, b.raw)
			}
			if failed == nil && len(b.errs) > 0 && ds.errFile == nil {
				ds.errFile, failed = openOwn(w.ctl, ds.Errors, ingest.OpenOutput)
			}
			if failed == nil {
				failed = w.flushFile(ds.errFile, ds.errs, b.errs)
			}
			if failed == nil {
				failed = w.flushExport(ds, &b.exp)
			}
			if failed == nil {
				now := time.Now()
				ds.ok.Add(b.ok)
				ds.failed.Add(b.failed)
				ds.turnsDone.Add(b.nTurns)
				ds.halfDone.Add(b.opens - b.closes)
				ds.tokens.Add(b.tokens)
				ds.unknown.Add(b.unknown)
				ds.rate.add(now, b.ok, b.tokens, b.unknown)
			}
			delete(pending, ds)
		}
		size = 0
		if failed != nil {
			w.ctl.abort(failed)
		}
	}
	for {
		select {
		case res, ok := <-results:
			if !ok {
				flush()
				return failed
			}
			b := pending[res.ds]
			if b == nil {
				b = &bufs{}
				pending[res.ds] = b
			}
			switch res.kind {
			case errLine:
				b.errs = append(b.errs, res.line...)
				b.failed++
			case turnLine:
				b.turns = append(b.turns, res.line...)
				b.nTurns++
				b.tokens += res.tokens
			default:
				b.raw = append(b.raw, res.line...) // every line ends with \n
				b.exp.take(w.ctl, &res)
				b.ok++
				b.tokens += res.tokens
				if res.unknown {
					b.unknown++
				}
			}
			if res.opens {
				b.opens++
			}
			if res.closes {
				b.closes++
			}
			size += len(res.line) + len(res.exp.Line)
			if size >= 4<<20 {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}

// afterSync, when set (by tests only), is called after each fsync of a
// flush with the file's path, before the file is indexed and before the
// next file is written; an error it returns fails the flush as a failed
// write would (the run stops and writes nothing more).
var afterSync func(path string) error

// flushFile writes data in one write, fsyncs, and indexes it from memory
// (gen is the file's only writer: ingest.Indexer.IndexWritten reads it
// back only when the index has not read the file up to this write).
func (w *writer) flushFile(f *os.File, src ingest.Source, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w (the answers not written will be asked for again on the next run)", src.Path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", src.Path, err)
	}
	if afterSync != nil {
		if err := afterSync(src.Path); err != nil {
			return err
		}
	}
	end, err := f.Seek(0, io.SeekCurrent) // an append leaves the offset at the end
	if err != nil {
		return err
	}
	_, err = w.ix.IndexWritten(context.Background(), src, data, end-int64(len(data)), nil)
	return err
}
