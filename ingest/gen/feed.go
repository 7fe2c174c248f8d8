package gen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"gendex/ingest"
	"gendex/store"
)

var errStop = errors.New("stop")

// feed sends every dataset's unanswered prompts, in file order, dataset
// after dataset without a pause between them; a conversation asked turn by
// turn goes with the turns the index holds (recorded).
func (r *run) feed() {
	defer close(r.jobs)
	files := turnFiles{}
	defer files.close()
	for _, ds := range r.sets {
		for _, path := range ds.Prompts {
			if err := r.feedFile(ds, path, files); err != nil {
				if !r.stopping() {
					r.abort(fmt.Errorf("reading %s: %w", path, err))
				}
				return
			}
		}
		ds.fed.Store(true)
	}
}

func (r *run) feedFile(ds *dsRun, path string, files turnFiles) error {
	var state store.FileState
	if err := r.db.View(func(v *store.View) (err error) {
		state, _, err = v.File(path)
		return err
	}); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = ingest.ReadLines(io.LimitReader(f, state.Offset), func(line []byte, n int64) error {
		if r.stopping() {
			return errStop
		}
		var rec store.Record
		_, err := ingest.Normalize(line, store.Prompts, &rec)
		switch {
		case errors.Is(err, ingest.ErrNoID):
			rec.ID = ingest.LineID(path, n)
		case err != nil:
			return nil // invalid: the indexer has reported it
		}
		send, redo := false, false
		if err := r.db.View(func(v *store.View) error {
			p, ok, err := v.Get(ds.Name, store.Prompts, rec.ID)
			if err != nil || !ok || p.File != state.ID || p.Line != n {
				return err // not the first line with this id
			}
			if _, done, _ := v.Get(ds.Name, store.Raw, rec.ID); done {
				send = ds.redo != nil && ds.redo.ids[rec.ID]
				redo = send
				return nil
			}
			if _, failed, _ := v.Get(ds.Name, store.Errors, rec.ID); failed && !r.cfg.RetryErrors {
				return nil
			}
			send = true
			return nil
		}); err != nil {
			return err
		}
		if !send {
			return nil
		}
		p, err := ParsePrompt(line, rec.ID, n)
		if err != nil {
			r.results <- r.errorLine(ds, rec.ID, 0, fmt.Sprintf("%s:%d: %v", path, n, err), "", 0)
			return nil
		}
		if r.cfg.Export != nil {
			p.Raw, p.Path = bytes.Clone(line), path
		}
		j := job{ds: ds, p: p, redo: redo}
		if r.cfg.Turns == TurnsAll && p.Turns >= 2 {
			c, err := r.recorded(ds, p, files, redo)
			if err != nil {
				res := r.errorLine(ds, rec.ID, 0, err.Error(), "", 0)
				res.closes = c.counted
				r.results <- res
				return nil
			}
			j.conv = c
		}
		select {
		case r.jobs <- j:
			return nil
		case <-r.stop.Done():
			return errStop
		}
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}
