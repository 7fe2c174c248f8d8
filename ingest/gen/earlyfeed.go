package gen

// A large --redo truncated (redofeed.go) knows whether it has anything to
// ask only once its feeder has read every prompt. Run again after it
// finished, as users do to check, it has nothing; yet it connected first
// and read the prompts only then, so with the server gone (the GPUs
// released once the job is done) it waited for a server that never came.
// So when such a redo has no prompt to ask at its start, the feeder (and
// its sweepers) start while the servers are awaited (feedEarly): the
// prompts it finds wait in the jobs channel for the workers, which start
// once a server is up (generate), and a run whose feeder read every
// prompt and found nothing ends as a small redo's does, "nothing to do",
// with no server (connect returns errNothingFed), and says it so when a
// server was up before the feeder ended (fedNothing). While the feeder has
// found work and no server is up, the run waits as any run does (its row
// says waiting). Exactly once is as before: the feeder marks an answer it
// asks again before it gives it out, whoever takes it and whenever.

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// errNothingFed is connect's answer when the feeder, started before a
// server was up (feedEarly), read every prompt and gave out none.
var errNothingFed = errors.New("every prompt read, none to ask")

// earlyFeed is the state of a feeder that may start before connect.
type earlyFeed struct {
	once sync.Once
	done chan struct{} // closed when the feeder has ended (its sweepers too)
	// idle, when not nil, is closed when the feeder has read every prompt,
	// the run not stopped, and given out none (fed).
	idle chan struct{}
	fed  atomic.Bool // the feeder chose a prompt to ask
}

// startFeed makes the jobs and results channels and starts the feeder,
// once: from feedEarly, or from generate.
func (r *run) startFeed() {
	r.early.once.Do(func() {
		r.jobs = make(chan job, r.cfg.Concurrency)
		r.results = make(chan result, r.cfg.Concurrency)
		r.early.done = make(chan struct{})
		idle := r.early.idle
		go func() {
			defer close(r.early.done)
			r.feed()
			if idle != nil && !r.early.fed.Load() && !r.ctl.stopping() && !r.choosing() {
				close(idle)
			}
		}()
	})
}

// feedEarly starts the feeder before the servers are awaited when the run
// has no prompt to ask at its start (todo) but a redo still to decide as
// the feeder reads (choosing), and its "nothing to do" would need no
// server (checkKindIdle): so a redo with nothing left ends without one.
func (r *run) feedEarly(todo int64) {
	if todo != 0 || !r.choosing() || r.idleAsksServer() {
		return
	}
	r.early.idle = make(chan struct{})
	r.startFeed()
}

// idleAsksServer reports whether a run with nothing to do asks a server
// first (checkKindIdle): a dataset holds the simulator's answers and the
// servers are not the built-in simulator.
func (r *run) idleAsksServer() bool {
	if r.cfg.Simulator {
		return false
	}
	for _, ds := range r.sets {
		if ds.makers.simulated > 0 {
			return true
		}
	}
	return false
}

// notConnected ends a run whose connect returned err: with nothing to do
// when the early feeder found nothing (errNothingFed); otherwise the
// feeder, if started, is stopped and waited for.
func (r *run) notConnected(err error) (*Summary, error) {
	if errors.Is(err, errNothingFed) {
		r.ctl.cancelReqs() // the waits for the servers end
		sum, err := r.nothingToDo()
		if sum != nil {
			sum.Elapsed = time.Since(r.ctl.started)
		}
		return sum, err
	}
	if r.early.done != nil {
		r.ctl.abort(err)
		<-r.early.done
	}
	return &Summary{Elapsed: time.Since(r.ctl.started)}, err
}

// fedNothing reports whether the early feeder read every prompt and
// found none to ask, once it has ended (it has, once the workers have).
func (r *run) fedNothing() bool {
	if r.early.idle == nil {
		return false
	}
	<-r.early.done
	select {
	case <-r.early.idle:
		return true
	default:
		return false
	}
}

// nothingFed is closed when the early feeder found nothing to ask
// (nil, never, without one): connect's wait ends then.
func (r *run) nothingFed() <-chan struct{} {
	return r.early.idle
}
