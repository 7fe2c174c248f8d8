package gen

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"gendex/ingest"
	"gendex/store"
)

// reconcile brings the index level with the dataset's files before the
// first request: prompts, every other stage file of the dataset
// (Dataset.Others) and gen's outputs (raw_responses, errors, turns)
// indexed to their ends, a torn last line of gen's own output files cut
// off, and the conversations left half done counted.
func (w *writer) reconcile(d Dataset) (*dsRun, error) {
	// gen's own files keep their ids at "id", whatever path was given
	// for the dataset's other files.
	ds := &dsRun{Dataset: d,
		raw:   ingest.Source{Path: d.Raw, Dataset: d.Name, Stage: store.Raw, BuiltinIDs: true},
		errs:  ingest.Source{Path: d.Errors, Dataset: d.Name, Stage: store.Errors, BuiltinIDs: true},
		turns: ingest.Source{Path: d.Turns, Dataset: d.Name, Stage: store.Turns, BuiltinIDs: true}, samples: w.cfg.samples()}
	ds.exp = exportOut{tok: ingest.Source{Path: d.Tokenized, Dataset: d.Name, Stage: store.Tokenized},
		exc: ingest.Source{Path: d.Excluded, Dataset: d.Name, Stage: store.Excluded}, reasons: map[string]int64{}}
	for _, p := range d.Prompts {
		res, err := w.ix.IndexFile(context.Background(), ingest.Source{Path: p, Dataset: d.Name, Stage: store.Prompts, Shard: w.cfg.Shard, IDPath: w.cfg.Paths.ID})
		if err != nil {
			return ds, err
		}
		if res.Torn > 0 {
			w.ctl.logf("warning: %s:%d: last line has no newline; that prompt is left out until it has one", p, res.NextLine)
		}
	}
	// The dataset's other stage files (shards written by other runs or
	// tools) count too: a prompt answered there is not asked again.
	for _, src := range d.Others {
		if w.cfg.Export != nil && (src.Path == d.Tokenized || src.Path == d.Excluded) {
			continue // --export's outputs: catchUp indexes them and cuts a torn line
		}
		res, err := w.ix.IndexFile(context.Background(), src)
		if err != nil {
			return ds, err
		}
		if res.Torn > 0 {
			w.ctl.logf("warning: %s:%d: last line has no newline; it is left out until it has one", src.Path, res.NextLine)
		}
	}
	if err := os.MkdirAll(filepath.Dir(d.Raw), 0o755); err != nil {
		return ds, fmt.Errorf("output folder: %w", err)
	}
	var err error
	if ds.rawFile, err = openOwn(w.ctl, d.Raw, ingest.OpenOutput); err != nil {
		return ds, err
	}
	type output struct {
		src ingest.Source
		f   *os.File
	}
	outputs := []output{{ds.raw, ds.rawFile}}
	if _, err := os.Stat(d.Errors); err == nil { // else created with the first error
		if ds.errFile, err = openOwn(w.ctl, d.Errors, ingest.OpenOutput); err != nil {
			return ds, err
		}
		outputs = append(outputs, output{ds.errs, ds.errFile})
	}
	if _, err := os.Stat(d.Turns); err == nil { // else created with the first turn
		if ds.turnsFile, err = openOwn(w.ctl, d.Turns, ingest.OpenOutput); err != nil {
			return ds, err
		}
		outputs = append(outputs, output{ds.turns, ds.turnsFile})
	}
	for _, out := range outputs {
		res, err := w.ix.IndexFile(context.Background(), out.src)
		if err != nil {
			return ds, err
		}
		if res.Torn > 0 {
			fi, err := out.f.Stat()
			if err != nil {
				return ds, err
			}
			if err := out.f.Truncate(fi.Size() - int64(res.Torn)); err != nil {
				return ds, fmt.Errorf("cutting the torn last line of %s: %w", out.src.Path, err)
			}
			if err := out.f.Sync(); err != nil {
				return ds, err
			}
			what := "its prompt"
			if out.src.Stage == store.Turns {
				what = "that turn"
			}
			w.ctl.logf("warning: %s:%d: cut an unfinished last line (%d bytes) left by an earlier run; %s will be answered again", out.src.Path, res.NextLine, res.Torn, what)
		}
	}
	var asked uint64
	err = w.db.View(func(v *store.View) error {
		s, err := v.Summary(d.Name)
		if err != nil {
			return err
		}
		if err := ds.checkSamples(s); err != nil {
			return err
		}
		asked = s.Asked
		s.Ask(ds.samples)
		ds.todo = int64(s.MissingRaw())
		if w.cfg.RetryErrors {
			ds.todo += int64(s.Overlap.ErrorsOpen) // an upper bound: errors whose prompt is gone are not sent
		}
		if w.cfg.Turns == TurnsAll && s.Stage(store.Turns).Records > 0 {
			n, err := w.halfDone(v, d.Name)
			ds.halfDone.Store(n)
			return err
		}
		return nil
	})
	if err == nil && asked != askedOf(ds.samples) {
		// Every reader counts the run's samples before its answers name
		// them (store.Summary.Asked).
		err = w.db.Update(func(tx *store.Tx) error { return tx.AskSamples(d.Name, ds.samples) })
	}
	return ds, err
}

// askedOf is store.Summary.Asked for a run of n samples per prompt.
func askedOf(n int) uint64 {
	if n > 1 {
		return uint64(n)
	}
	return 0
}

func (ds *dsRun) close() {
	for _, f := range []*os.File{ds.rawFile, ds.errFile, ds.turnsFile, ds.exp.tokFile, ds.exp.excFile} {
		if f != nil {
			f.Close()
		}
	}
}
