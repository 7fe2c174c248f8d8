package gen

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"gendex/ingest"
	"gendex/store"
)

var errStop = errors.New("stop")

// feed sends every dataset's unanswered prompts, in file order, dataset
// after dataset without a pause between them; a conversation asked turn by
// turn goes with the turns the index holds (recorded).
// A large file's lines answered before are not walked before its first
// prompt to send: the feeder starts where the answers end (skipTo) and a
// sweeper goroutine walks the lines before that point once the first
// prompt is out (its unanswered ones go out then, beside the feeder's), so
// every line is still looked at once, by one of them. Two lines with one
// id are never both sent: only the first line of an id is (toSend), and
// it is in one of the two ranges.
func (r *run) feed() {
	var sweeps sync.WaitGroup
	defer func() {
		sweeps.Wait()
		for _, ds := range r.sets {
			ds.fed.Store(!r.ctl.stopping())
		}
		close(r.jobs)
	}()
	files := turnFiles{}
	defer files.close()
	for _, ds := range r.sets {
		var own sync.WaitGroup // the dataset's sweepers
		for _, path := range ds.Prompts {
			if err := r.feedFile(ds, path, files, &own); err != nil {
				r.feedFailed(path, err)
				sweeps.Go(own.Wait)
				return
			}
		}
		sweeps.Go(func() { own.Wait(); r.chose(ds) }) // every prompt of it read: a redo's choice is whole (redofeed.go)
	}
}

// firstFed is closed once the feeder has given the workers a prompt.
func (r *run) firstFed() chan struct{} {
	r.firstOnce.Do(func() { r.first = make(chan struct{}) })
	return r.first
}

// feedFailed ends the run on a prompts file the feeder could not read.
func (r *run) feedFailed(path string, err error) {
	if !r.ctl.stopping() {
		r.ctl.abort(fmt.Errorf("reading %s: %w", path, err))
	}
}

// feedBatch is how many prompt lines the feeder looks up in one read
// transaction of the index (one a line cost gen ~4% of its CPU against a
// zero-latency server). What the index says of a line cannot change while
// the lines before it in its batch are sent: only this run answers the
// dataset (its files are locked), and only the prompts it sent.
const feedBatch = 128

// feedLine is one prompt line read ahead, at arena[start:end].
type feedLine struct {
	start, end int
	n          int64
	id         string
	send, redo bool
}

func (r *run) feedFile(ds *dsRun, path string, files turnFiles, sweeps *sync.WaitGroup) error {
	var state store.FileState
	if err := r.db.View(func(v *store.View) (err error) {
		state, _, err = v.File(path)
		return err
	}); err != nil {
		return err
	}
	// The ids as the index reads them: under the path it keeps for the
	// file (ingest --id, gen --id), if any.
	idPath, err := ingest.ParseIDPath(state.IDPath)
	if err != nil {
		return fmt.Errorf("the id path the index keeps for it: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	from, line, err := r.skipTo(ds, f, state, idPath)
	if err != nil {
		f.Close()
		return err
	}
	if from == 0 {
		defer f.Close()
	} else {
		mainDone := make(chan struct{})
		defer close(mainDone)
		sweeps.Add(1)
		go func() { // the lines before from, meanwhile
			defer sweeps.Done()
			defer func() { <-mainDone; f.Close() }()
			select { // once the first prompt is out: the sweep is no hurry
			case <-r.firstFed():
			case <-mainDone:
			case <-r.ctl.stop.Done():
			}
			own := turnFiles{}
			defer own.close()
			if err := r.feedRange(ds, path, f, 0, from, 1, state, idPath, own); err != nil {
				r.feedFailed(path, err)
			}
		}()
	}
	return r.feedRange(ds, path, f, from, state.Offset, line, state, idPath, files)
}

// feedRange sends the unanswered prompts among the lines of f (path,
// as the index knows it by state) in [from, to), the first of them
// line number first.
func (r *run) feedRange(ds *dsRun, path string, f *os.File, from, to, first int64, state store.FileState, idPath ingest.IDPath, files turnFiles) error {
	batch := make([]feedLine, 0, feedBatch)
	var arena []byte
	_, err := ingest.ReadLines(io.NewSectionReader(f, from, to-from), func(line []byte, n int64) error {
		if r.ctl.stopping() {
			return errStop
		}
		n += first - 1
		batch = append(batch, feedLine{start: len(arena), end: len(arena) + len(line), n: n})
		arena = append(arena, line...)
		if len(batch) < feedBatch {
			return nil
		}
		err := r.feedLines(ds, path, state, idPath, files, batch, arena)
		batch, arena = batch[:0], arena[:0]
		return err
	})
	if err == nil {
		err = r.feedLines(ds, path, state, idPath, files, batch, arena)
	}
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// feedLines sends the unanswered prompts among lines (of the file path,
// as the index knows it by state, its ids at idPath), looked up in one
// read transaction.
func (r *run) feedLines(ds *dsRun, path string, state store.FileState, idPath ingest.IDPath, files turnFiles, lines []feedLine, arena []byte) error {
	for i := range lines {
		l := &lines[i]
		var rec store.Record
		_, err := ingest.NormalizeAt(arena[l.start:l.end], store.Prompts, idPath, &rec)
		switch {
		case errors.Is(err, ingest.ErrNoID):
			rec.ID = ingest.LineID(path, l.n)
		case err != nil:
			l.id = "" // invalid: the indexer has reported it
			continue
		}
		l.id = rec.ID
	}
	var found []string // answers an asGoes redo asks again (redofeed.go)
	if err := r.db.View(func(v *store.View) error {
		for i := range lines {
			if l := &lines[i]; l.id != "" {
				var err error
				if l.send, l.redo, err = r.toSend(v, ds, state, l.id, l.n, arena[l.start:l.end], files); err != nil {
					return err
				}
				if l.redo && ds.redo.asGoes {
					found = append(found, l.id)
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := r.markFound(ds, found); err != nil {
		return err
	}
	for _, l := range lines {
		if r.ctl.stopping() {
			return errStop
		}
		if !l.send {
			continue
		}
		if err := r.feedPrompt(ds, path, files, arena[l.start:l.end], l.id, l.n, l.redo); err != nil {
			return err
		}
	}
	return nil
}

// toSend tells whether the prompt id at line n of the file (state), the
// prompt line line, is to be asked: it is the first line with its id, and
// has no answer (or one to redo: askAgain, which reads lines through
// files; nil: decides none) and no final error (or --retry-errors).
func (r *run) toSend(v *store.View, ds *dsRun, state store.FileState, id string, n int64, line []byte, files turnFiles) (send, redo bool, err error) {
	p, ok, err := v.Get(ds.Name, store.Prompts, id)
	if err != nil || !ok || p.File != state.ID || p.Line != n {
		return false, false, err // not the first line with this id
	}
	if raw, done, _ := v.Get(ds.Name, store.Raw, id); done {
		send, err = r.askAgain(v, ds, &raw, line, files)
		return send, send, err
	}
	if _, failed, _ := v.Get(ds.Name, store.Errors, id); failed && !r.cfg.RetryErrors {
		return false, false, nil
	}
	return true, false, nil
}

// feedPrompt sends the prompt line (id, at line n of path) to the
// workers, with its recorded turns when it is asked turn by turn.
func (r *run) feedPrompt(ds *dsRun, path string, files turnFiles, line []byte, id string, n int64, redo bool) error {
	if !r.early.fed.Load() {
		r.early.fed.Store(true) // the run has work (earlyfeed.go)
	}
	p, err := r.parsePrompt(line, id, n)
	if (errors.Is(err, errNoPrompt) || errors.Is(err, errManyPrompts)) && ds.scan != nil {
		ds.scan.unsent.Add(1) // failed for its shape, said before the first request: no errors.jsonl line
		return nil
	}
	if err != nil {
		return r.feedResult(errorLine(ds, id, 0, fmt.Sprintf("%s:%d: %v", path, n, err), "", 0))
	}
	p.Path = path // a refusal names it (promptfit.go)
	if r.cfg.Export != nil {
		p.Raw = bytes.Clone(line)
	}
	j := job{ds: ds, p: p, redo: redo}
	if r.cfg.Turns == TurnsAll && p.Tools != nil {
		tc, err := r.talk.recordedTools(ds, p, files, redo) // asked step by step (toolturns.go)
		if err != nil {
			res := errorLine(ds, id, 0, err.Error(), "", 0)
			res.closes = tc.counted
			r.results <- res
			return nil
		}
		j.tc = tc
	} else if r.cfg.Turns == TurnsAll && p.Turns >= 2 {
		c, err := r.talk.recorded(ds, p, files, redo)
		if err != nil {
			res := errorLine(ds, id, 0, err.Error(), "", 0)
			res.closes = c.counted
			return r.feedResult(res)
		}
		j.conv = c
	}
	select {
	case r.jobs <- j:
		r.fedOne.Do(func() { close(r.firstFed()) })
		if ds.scan != nil {
			ds.scan.fed.Add(1)
		}
		return nil
	case <-r.ctl.stop.Done():
		return errStop
	}
}

// feedResult gives the writer a line the feeder made (a prompt's final
// error), unless the run stops first: the writer may not run yet
// (feedEarly), and the prompt, left without its line, is asked by the
// next run.
func (r *run) feedResult(res result) error {
	select {
	case r.results <- res:
		return nil
	case <-r.ctl.stop.Done():
		return errStop
	}
}
