package export

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"

	"gendex/ingest"
	"gendex/store"
)

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
	x.specs = map[uint32]ingest.IDPath{}
	err = x.Ix.DB.View(func(v *store.View) error {
		// The walk reads every page of three stages: they leave the
		// process's memory as it goes, within the indexer's budget.
		v.KeepMappedUnder(x.Ix.ReleaseAbove)
		path := func(id uint32) {
			if _, ok := paths[id]; !ok {
				if p, ok := v.FilePath(id); ok {
					paths[id] = p
					// The file's mapping (ingest --map): where its
					// answers keep their text.
					if fs, ok, _ := v.File(p); ok && fs.IDPath != "" {
						if m, err := ingest.ParseIDPath(fs.IDPath); err == nil {
							x.specs[id] = m
						}
					}
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
			pid := store.PromptID(store.Raw, id) // a sample's answer is its prompt's
			for pok && p.ID < pid {
				p, pok = prompts()
			}
			if pok && p.ID == pid {
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
