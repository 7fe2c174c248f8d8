package gen

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"
)

// control is what every part of a run shares and nothing else: the log,
// the two stops and the start time. A part holds a *control, never the
// *run; it may log, ask whether the run is stopping and abort it, and no
// more.
type control struct {
	log      io.Writer // safe for concurrent use (syncWriter or liveLog)
	saidOnce sync.Map
	started  time.Time

	stop       context.Context // done: send nothing new (interrupt or failure)
	reqs       context.Context // done: abandon requests in flight
	cancelReqs context.CancelFunc
	failOnce   sync.Once
	fail       context.CancelCauseFunc
}

// abort ends the run with err (the first one wins).
func (c *control) abort(err error) {
	c.failOnce.Do(func() {
		c.fail(err)
		c.cancelReqs()
	})
}

// stopping says the run sends nothing new (an interrupt or a failure).
func (c *control) stopping() bool { return c.stop.Err() != nil }

func (c *control) logf(format string, a ...any) {
	fmt.Fprintf(c.log, format+"\n", a...)
}

// once logs a message the first time key is seen.
func (c *control) once(key, format string, a ...any) {
	if _, seen := c.saidOnce.LoadOrStore(key, true); !seen {
		c.logf(format, a...)
	}
}

// said marks key as said, so a later once(key) says nothing.
func (c *control) said(key string) { c.saidOnce.Store(key, true) }
