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

// feeder turns prompt lines into jobs. It owns the reading of every
// dataset's prompts files: before the run, their lines' shapes, id and
// prompt rules (scanPrompts, checkIDRule, choosePromptRules, sayShapes);
// during it, the walk that skips the prompts answered or failed for good
// and sends the others, parsed by the run's prompt rule, to the workers
// (a conversation with its recorded turns), starting early when a redo
// may have nothing to ask (earlyfeed.go); at its end, what it could not
// send (leftUnsent). It never writes an answer nor the index: it sends
// jobs, and to the writer the final errors of prompts it cannot read;
// --redo's choice, and the marks of the answers asked again, are the
// redo chooser's (redo). The run builds it (newRun), hands it the
// datasets once reconciled (prepare) and starts it (generate).
type feeder struct {
	ctl  *control
	cfg  *Config // read only
	db   *store.DB
	sets []*dsRun // the run's datasets, in feeding order (prepare)

	redo  redoChoice // which answers are asked again (redo.go)
	convs convReader // a conversation's recorded turns (turns.go, toolsteps.go)

	jobs    chan<- job    // to the workers; closed once every prompt is read
	results chan<- result // the final errors of prompts the feeder cannot send
	// prompts counts the prompts fed as token ids (the asker's: the
	// size of the run's requests, limit.go); nil: none are counted.
	prompts *promptTally

	// first is closed when the feeder has given out its first prompt
	// (firstFed): a sweeper waits for it.
	first             chan struct{}
	firstOnce, fedOne sync.Once
	early             earlyFeed // when it starts before a server is up (earlyfeed.go)
}

// redoChoice is what the feeder asks of --redo's choice as it reads the
// prompts (redofeed.go).
type redoChoice interface {
	// askAgain tells whether rec, ds's answer to a prompt read, is asked
	// again (files nil: a look that decides nothing).
	askAgain(v *store.View, ds *dsRun, rec *store.Record, prompt []byte, files turnFiles) (bool, error)
	// markFound marks in the index the answers just decided to ask again,
	// before they are sent.
	markFound(ds *dsRun, ids []string) error
	// chose ends the choice in ds once every prompt of it is read.
	chose(ds *dsRun)
	// choosing reports whether a dataset still finds what it asks again.
	choosing() bool
}

// convReader gives the feeder the state of a conversation asked turn by
// turn (or step by step, with tools): its turns the index holds.
type convReader interface {
	recorded(ds *dsRun, p *Prompt, files turnFiles, redo bool) (*conv, error)
	recordedTools(ds *dsRun, p *Prompt, files turnFiles, redo bool) (*toolConv, error)
}

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
func (fe *feeder) feed() {
	var sweeps sync.WaitGroup
	defer func() {
		sweeps.Wait()
		for _, ds := range fe.sets {
			ds.fed.Store(!fe.ctl.stopping())
		}
		close(fe.jobs)
	}()
	files := turnFiles{}
	defer files.close()
	for _, ds := range fe.sets {
		var own sync.WaitGroup // the dataset's sweepers
		for _, path := range ds.Prompts {
			if err := fe.feedFile(ds, path, files, &own); err != nil {
				fe.feedFailed(path, err)
				sweeps.Go(own.Wait)
				return
			}
		}
		sweeps.Go(func() { own.Wait(); fe.redo.chose(ds) }) // every prompt of it read: a redo's choice is whole (redofeed.go)
	}
}

// firstFed is closed once the feeder has given the workers a prompt.
func (fe *feeder) firstFed() chan struct{} {
	fe.firstOnce.Do(func() { fe.first = make(chan struct{}) })
	return fe.first
}

// feedFailed ends the run on a prompts file the feeder could not read.
func (fe *feeder) feedFailed(path string, err error) {
	if !fe.ctl.stopping() {
		fe.ctl.abort(fmt.Errorf("reading %s: %w", path, err))
	}
}

// feedBatch is how many prompt lines the feeder looks up in one read
// transaction of the index (one a line cost gen ~4% of its CPU against a
// zero-latency server). What the index says of a line cannot change while
// the lines before it in its batch are sent: only this run answers the
// dataset (its files are locked), and only the prompts it sent.
const feedBatch = 128

// feedLine is one prompt line read ahead, at arena[start:end]: units
// are its samples to send (toSendUnits).
type feedLine struct {
	start, end int
	n          int64
	id         string
	units      []unitSend
}

// unitSend is a sample of a prompt to send, and whether it is an answer
// asked again (--redo).
type unitSend struct {
	sample int
	redo   bool
}

func (fe *feeder) feedFile(ds *dsRun, path string, files turnFiles, sweeps *sync.WaitGroup) error {
	var state store.FileState
	if err := fe.db.View(func(v *store.View) (err error) {
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
	f, err := openOwn(fe.ctl, path, os.Open)
	if err != nil {
		return err
	}
	from, line, err := fe.skipTo(ds, f, state, idPath)
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
			case <-fe.firstFed():
			case <-mainDone:
			case <-fe.ctl.stop.Done():
			}
			own := turnFiles{}
			defer own.close()
			if err := fe.feedRange(ds, path, f, 0, from, 1, state, idPath, own); err != nil {
				fe.feedFailed(path, err)
			}
		}()
	}
	return fe.feedRange(ds, path, f, from, state.Offset, line, state, idPath, files)
}

// feedRange sends the unanswered prompts among the lines of f (path,
// as the index knows it by state) in [from, to), the first of them
// line number first.
func (fe *feeder) feedRange(ds *dsRun, path string, f *os.File, from, to, first int64, state store.FileState, idPath ingest.IDPath, files turnFiles) error {
	batch := make([]feedLine, 0, feedBatch)
	var arena []byte
	_, err := ingest.ReadLines(io.NewSectionReader(f, from, to-from), func(line []byte, n int64) error {
		if fe.ctl.stopping() {
			return errStop
		}
		n += first - 1
		batch = append(batch, feedLine{start: len(arena), end: len(arena) + len(line), n: n})
		arena = append(arena, line...)
		if len(batch) < feedBatch {
			return nil
		}
		err := fe.feedLines(ds, path, state, idPath, files, batch, arena)
		batch, arena = batch[:0], arena[:0]
		return err
	})
	if err == nil {
		err = fe.feedLines(ds, path, state, idPath, files, batch, arena)
	}
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// feedLines sends the unanswered prompts among lines (of the file path,
// as the index knows it by state, its ids at idPath), looked up in one
// read transaction.
func (fe *feeder) feedLines(ds *dsRun, path string, state store.FileState, idPath ingest.IDPath, files turnFiles, lines []feedLine, arena []byte) error {
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
	if err := fe.db.View(func(v *store.View) error {
		for i := range lines {
			if l := &lines[i]; l.id != "" {
				var err error
				if l.units, err = fe.toSendUnits(v, ds, state, l.id, l.n, arena[l.start:l.end], files); err != nil {
					return err
				}
				for _, u := range l.units {
					if u.redo && ds.redo.asGoes {
						found = append(found, store.UnitID(l.id, u.sample))
					}
				}
			}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := fe.redo.markFound(ds, found); err != nil {
		return err
	}
	for _, l := range lines {
		if fe.ctl.stopping() {
			return errStop
		}
		if len(l.units) == 0 {
			continue
		}
		if err := fe.feedPrompt(ds, path, files, arena[l.start:l.end], l.id, l.n, l.units); err != nil {
			return err
		}
	}
	return nil
}

// toSendUnits is the samples of the prompt id at line n of the file
// (state), the prompt line line, that are to be asked (toSend, each
// unit), each saying whether it is asked again (--redo); none when it is
// not the first line with its id.
func (fe *feeder) toSendUnits(v *store.View, ds *dsRun, state store.FileState, id string, n int64, line []byte, files turnFiles) (units []unitSend, err error) {
	p, ok, err := v.Get(ds.Name, store.Prompts, id)
	if err != nil || !ok || p.File != state.ID || p.Line != n {
		return nil, err // not the first line with this id
	}
	for s := range fe.cfg.samples() {
		send, again, err := fe.toSend(v, ds, store.UnitID(id, s), line, files)
		if err != nil {
			return nil, err
		}
		if send {
			units = append(units, unitSend{s, again})
		}
	}
	return units, nil
}

// toSend tells whether the unit key (a prompt's id, or its sample's:
// store.UnitID) of the prompt line line is to be asked: it has no answer
// (or one to redo: askAgain, which reads lines through files; nil:
// decides none) and no final error (or --retry-errors).
func (fe *feeder) toSend(v *store.View, ds *dsRun, key string, line []byte, files turnFiles) (send, redo bool, err error) {
	if raw, done, _ := v.Get(ds.Name, store.Raw, key); done {
		send, err = fe.redo.askAgain(v, ds, &raw, line, files)
		return send, send, err
	}
	if _, failed, _ := v.Get(ds.Name, store.Errors, key); failed && !fe.cfg.RetryErrors {
		return false, false, nil
	}
	return true, false, nil
}

// feedPrompt sends the samples units of the prompt line (id, at line n
// of path) to the workers, each a job of its own, with its recorded
// turns when it is asked turn by turn.
func (fe *feeder) feedPrompt(ds *dsRun, path string, files turnFiles, line []byte, id string, n int64, units []unitSend) error {
	if !fe.early.fed.Load() {
		fe.early.fed.Store(true) // the run has work (earlyfeed.go)
	}
	p, err := fe.parsePrompt(line, id, n)
	if (errors.Is(err, errNoPrompt) || errors.Is(err, errManyPrompts)) && ds.scan != nil {
		ds.scan.unsent.Add(1) // failed for its shape, said before the first request: no errors.jsonl line
		return nil
	}
	if err != nil {
		for _, us := range units {
			u := &Prompt{ID: id, Sample: us.sample, Samples: fe.cfg.samples()}
			if err := fe.feedResult(errorLine(ds, u, 0, fmt.Sprintf("%s:%d: %v", path, n, err), "", 0)); err != nil {
				return err
			}
		}
		return nil
	}
	p.Path = path // a refusal names it (promptfit.go)
	if fe.cfg.Export != nil {
		p.Raw = bytes.Clone(line)
	}
	for _, us := range units {
		q := p
		if fe.cfg.samples() > 1 {
			q = p.forSample(us.sample, fe.cfg.samples())
		}
		if err := fe.feedUnit(ds, files, q, us.redo); err != nil {
			return err
		}
	}
	return nil
}

// feedUnit sends p, one unit of a prompt, to the workers.
func (fe *feeder) feedUnit(ds *dsRun, files turnFiles, p *Prompt, redo bool) error {
	p.mix = fe.cfg.Mix.draw(ds.Name, p.ID, p.Sample, mixSeed(fe.cfg.Sampling))
	j := job{ds: ds, p: p, redo: redo}
	if fe.cfg.Turns == TurnsAll && p.Tools != nil {
		tc, err := fe.convs.recordedTools(ds, p, files, redo) // asked step by step (toolturns.go)
		if err != nil {
			res := errorLine(ds, p, 0, err.Error(), "", 0)
			res.closes = tc.counted
			fe.results <- res
			return nil
		}
		j.tc = tc
	} else if fe.cfg.Turns == TurnsAll && p.Turns >= 2 {
		c, err := fe.convs.recorded(ds, p, files, redo)
		if err != nil {
			res := errorLine(ds, p, 0, err.Error(), "", 0)
			res.closes = c.counted
			return fe.feedResult(res)
		}
		j.conv = c
	}
	if fe.prompts != nil {
		fe.prompts.note(len(p.InputIDs))
	}
	select {
	case fe.jobs <- j:
		fe.fedOne.Do(func() { close(fe.firstFed()) })
		if ds.scan != nil {
			ds.scan.fed.Add(1)
		}
		return nil
	case <-fe.ctl.stop.Done():
		return errStop
	}
}

// feedResult gives the writer a line the feeder made (a prompt's final
// error), unless the run stops first: the writer may not run yet
// (feedEarly), and the prompt, left without its line, is asked by the
// next run.
func (fe *feeder) feedResult(res result) error {
	select {
	case fe.results <- res:
		return nil
	case <-fe.ctl.stop.Done():
		return errStop
	}
}
