package gen

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"gendex/store"
)

// The run's row in the index (store.Run, `gendex query runs`): stored
// when the run starts (waiting for a server), kept up to date by a
// tracker that looks every trackEvery (its state: running, waiting when
// no server is up, stalled when one holds requests and answers none; what
// it still owes; its answers, errors and last answer's time) and stores
// the row whenever that changed, and stored with how it ended as it ends.
// The process holds the row (store.DB.HoldRun) until then: a reader that
// finds a row that never said it ended, not held by the writer answering,
// knows the run is lost.

// trackEvery is how often the run's state is looked at (and stalls
// looked for): at most this often its row is stored.
const trackEvery = time.Second

// runRow keeps the run's row.
type runRow struct {
	mu  sync.Mutex
	row store.Run // as last queued
}

// beginRow stores the run's row, waiting (no server is known yet), and
// holds it.
func (m *monitor) beginRow() {
	host, _ := os.Hostname()
	m.row.row = store.Run{Start: m.run, Pid: os.Getpid(), Host: host, Kind: "gen", Command: m.cfg.Command,
		State: store.RunWaiting, Since: m.run}
	m.row.row.ToGo = toGoNow(m.db, m.sets)
	m.row.row.Datasets, m.row.row.AtStart = atStart(m.db, m.sets)
	m.db.HoldRun(&m.row.row)
	row := m.row.row
	m.add(pending{run: &row})
	if m.cfg.OnQuit != nil {
		m.cfg.OnQuit(m.quitNow)
	}
}

// quitNow stores the run's row as interrupted now, in its own transaction
// (not through the recorder's queue: the process exits right after).
func (m *monitor) quitNow() {
	m.row.mu.Lock()
	row := m.row.row
	if row.Ended() {
		m.row.mu.Unlock()
		return
	}
	row.End = time.Now().UnixMilli()
	row.Since = row.End
	row.State = store.RunInterrupted
	row.Detail = "quit at a second interrupt, without waiting for the answers in flight: the next run asks them again"
	m.counts(&row, nil)
	m.row.row = row
	m.row.mu.Unlock()
	m.db.Update(func(tx *store.Tx) error { return tx.PutRun(&row) })
}

// track starts the tracker of the run's state over p (connect's pool).
func (m *monitor) track(p *pool) {
	m.pool = p
	m.loops.Go(func() {
		t := time.NewTicker(min(trackEvery, max(min(m.cfg.StallAfter, m.cfg.ProbeEvery)/4, 10*time.Millisecond)))
		defer t.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case now := <-t.C:
				m.update(p, now)
			}
		}
	})
}

// update looks at the run now and queues its row when it changed.
func (m *monitor) update(p *pool, now time.Time) {
	stalled := m.checkStalls(p, now)
	state, detail := store.RunRunning, ""
	switch {
	case stalled != "":
		state, detail = store.RunStalled, stalled
	case p.upCount() == 0:
		state, detail = store.RunWaiting, "no server is up: waiting for one"
	}
	m.row.mu.Lock()
	defer m.row.mu.Unlock()
	row := m.row.row
	if row.Ended() {
		return
	}
	if row.State != state {
		row.Since = now.UnixMilli()
	}
	row.State, row.Detail = state, detail
	m.counts(&row, p)
	if sameRow(row, m.row.row) {
		return
	}
	m.row.row = row
	m.add(pending{run: &row})
}

// counts sets row's counts of the run: to go, answers, errors and the
// last answer's time.
func (m *monitor) counts(row *store.Run, p *pool) {
	var answers, errs int64
	for _, ds := range m.sets {
		answers += ds.ok.Load()
		errs += ds.failed.Load()
	}
	row.Answers, row.Errors = &answers, &errs
	row.ToGo = toGoNow(m.db, m.sets)
	if p != nil {
		for _, s := range p.servers {
			s.flights.mu.Lock()
			row.LastAnswer = max(row.LastAnswer, s.flights.lastAnswer)
			s.flights.mu.Unlock()
		}
	}
}

func sameRow(a, b store.Run) bool {
	eq := func(x, y *int64) bool { return x == nil && y == nil || x != nil && y != nil && *x == *y }
	return a.State == b.State && a.Detail == b.Detail && a.LastAnswer == b.LastAnswer &&
		eq(a.ToGo, b.ToGo) && eq(a.Answers, b.Answers) && eq(a.Errors, b.Errors)
}

// endRow queues the run's last row: ended now, finished, interrupted,
// refused (nothing sent: ErrRefused) or failed (err).
func (m *monitor) endRow(err error, sum *Summary) store.Run {
	m.row.mu.Lock()
	defer m.row.mu.Unlock()
	row := m.row.row
	row.End = time.Now().UnixMilli()
	row.Since = row.End
	row.State, row.Detail = store.RunFinished, ""
	switch {
	case errors.Is(err, context.Canceled):
		row.State = store.RunInterrupted
		if sum != nil && sum.GivenUp > 0 {
			row.Detail = counted(sum.GivenUp, "answer", "answers") + " in flight given up after --grace: the next run asks them again"
		}
	case errors.Is(err, ErrRefused):
		row.State, row.Detail = store.RunRefused, err.Error()
	case err != nil:
		row.State, row.Detail = store.RunFailed, err.Error()
	}
	var pl *pool
	if sum != nil {
		pl = m.pool
	}
	m.counts(&row, pl)
	m.row.row = row
	m.add(pending{run: &row})
	return row
}

// atStart is the names of sets and what the index holds of them now, as
// the run's row keeps them: a lost run's counts are read from the index
// against them (store.View.Runs). nil when the index cannot be read.
func atStart(db *store.DB, sets []*dsRun) (names []string, at *store.Tally) {
	for _, ds := range sets {
		names = append(names, ds.Name)
	}
	db.View(func(v *store.View) error { t := v.Tally(names); at = &t; return nil })
	return names, at
}

// toGoNow is what a run of sets still owes, from db's index now (toGo);
// nil when the index cannot be read.
func toGoNow(db *store.DB, sets []*dsRun) *int64 {
	var n int64
	known := false
	if err := db.View(func(v *store.View) error { n, known = toGo(v, sets); return nil }); err != nil || !known {
		return nil
	}
	return &n
}

// toGo is what the run still owes, the one count of it (the live line's
// "to go", its row's to_go): of its datasets, the prompts with neither an
// answer nor a final error and the answers a redo asks again
// (store.Owed.ToGo). known is false while a redo is still finding the
// answers it asks again: left is then a lower bound.
func toGo(v *store.View, sets []*dsRun) (left int64, known bool) {
	var n uint64
	known = true
	for _, ds := range sets {
		if s, err := ds.summary(v); err == nil {
			o := s.Owed()
			n += o.ToGo()
			known = known && o.RedoKnown
		}
	}
	return int64(n), known
}

// sayRow ends the run's summary with its row: how the index records it.
func (m *monitor) sayRow(row store.Run) {
	toGo := "unknown"
	if row.ToGo != nil {
		toGo = counted(*row.ToGo, "prompt", "prompts")
		if m.cfg.samples() > 1 {
			toGo = counted(*row.ToGo, "answer", "answers")
		}
	}
	if row.State == store.RunRefused {
		m.ctl.logf("gen: this run (pid %d, started %s) is recorded as refused: nothing was sent, and the same command is refused again: change it as said below ('gendex query runs' shows it)",
			row.Pid, time.UnixMilli(row.Start).UTC().Format(time.TimeOnly))
		return
	}
	m.ctl.logf("gen: this run (pid %d, started %s) is recorded as %s, %s to go: 'gendex query runs' shows it",
		row.Pid, time.UnixMilli(row.Start).UTC().Format(time.TimeOnly), row.State, toGo)
}

// stallText is the run's stall sentence while a server is stalled, ""
// otherwise (and without a monitor).
func (m *monitor) stallText() string {
	if m == nil {
		return ""
	}
	m.row.mu.Lock()
	defer m.row.mu.Unlock()
	if m.row.row.State != store.RunStalled {
		return ""
	}
	return m.row.row.Detail
}
