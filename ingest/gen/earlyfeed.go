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

// startFeed starts the feeder, once: from feedEarly, or from generate.
func (fe *feeder) startFeed() {
	fe.early.once.Do(func() {
		fe.early.done = make(chan struct{})
		idle := fe.early.idle
		go func() {
			defer close(fe.early.done)
			fe.feed()
			if idle != nil && !fe.early.fed.Load() && !fe.ctl.stopping() && !fe.redo.choosing() {
				close(idle)
			}
		}()
	})
}

// feedEarly starts the feeder before the servers are awaited when the run
// has no prompt to ask at its start (todo) but a redo still to decide as
// the feeder reads (choosing), and its "nothing to do" would need no
// server (checkKindIdle): so a redo with nothing left ends without one.
func (fe *feeder) feedEarly(todo int64) {
	if todo != 0 || !fe.redo.choosing() || fe.idleAsksServer() {
		return
	}
	fe.early.idle = make(chan struct{})
	fe.startFeed()
}

// idleAsksServer reports whether a run with nothing to do asks a server
// first (checkKindIdle): a dataset holds the simulator's answers and the
// servers are not the built-in simulator.
func (fe *feeder) idleAsksServer() bool {
	if fe.cfg.Simulator {
		return false
	}
	for _, ds := range fe.sets {
		if ds.makers.simulated > 0 {
			return true
		}
	}
	return false
}

// abortEarly ends the run with err, the servers not connected, and waits
// for the feeder if it started early (feedEarly).
func (fe *feeder) abortEarly(err error) {
	if fe.early.done != nil {
		fe.ctl.abort(err)
		<-fe.early.done
	}
}

// fedNothing reports whether the early feeder read every prompt and
// found none to ask, once it has ended (it has, once the workers have).
func (fe *feeder) fedNothing() bool {
	if fe.early.idle == nil {
		return false
	}
	<-fe.early.done
	select {
	case <-fe.early.idle:
		return true
	default:
		return false
	}
}

// nothingFed is closed when the early feeder found nothing to ask
// (nil, never, without one): connect's wait ends then.
func (fe *feeder) nothingFed() <-chan struct{} {
	return fe.early.idle
}
