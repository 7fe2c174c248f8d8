package gen

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"

	"gendex/ingest/gen/client"
)

// aborter stops on the server the requests gen gives up, so that no GPU
// finishes an answer nobody will read: an attempt ended by
// --request-timeout (a stalled server's held requests too), by the run
// abandoning its requests (an interrupt past --grace, a fatal error), or
// by its server's retirement (it came back as another server:
// identity.go). Ending an attempt's context closes its connection (Go's
// transport never pools a connection whose request was canceled): vLLM
// and llama.cpp stop the request then, SGLang at its next look (every
// 4 s); on SGLang the request is also aborted at once by its rid
// (client.Abort), and the run waits for that abort (client.AbortTimeout)
// before it goes on or ends.
//
// It owns the attempts in flight (so a retirement can end those on its
// server), which servers refused an abort, and the counts the summary
// shows. It never retries a request nor decides what the asker does next;
// the zero value with ctl set is ready.
type aborter struct {
	ctl *control
	// noted is told of each request given up: its server, why (a
	// timeout, the run stopping, its server retired) and whether the
	// server was asked to stop it (the monitor's bursts.givenUp: one
	// event a burst); nil: none is.
	noted func(server, cause string, onServer bool)

	mu      sync.Mutex
	live    map[*attempt]struct{}
	refused map[*server]bool // took no abort from gen: not asked again

	// onServer counts the requests given up that the server was asked to
	// stop; closed those given up by closing their connection alone.
	onServer, closed atomic.Int64
}

// attempt is one request to s that gen may give up.
type attempt struct {
	s       *server
	ctx     context.Context
	cancel  context.CancelCauseFunc
	pending client.Pending // the generation request the server holds
}

// errRetiredMidway ends the attempts in flight on a retired server.
var errRetiredMidway = errors.New("its server came back as another server")

// begin starts an attempt on s under ctx; its request goes under the
// returned context, which ends with ctx or when s is retired.
func (ab *aborter) begin(ctx context.Context, s *server) (context.Context, *attempt) {
	at := &attempt{s: s}
	at.ctx, at.cancel = context.WithCancelCause(ctx)
	ab.mu.Lock()
	if ab.live == nil {
		ab.live = make(map[*attempt]struct{})
	}
	ab.live[at] = struct{}{}
	ab.mu.Unlock()
	return client.WithPending(at.ctx, &at.pending), at
}

// end ends at, whose request returned err. When gen ended it (its context
// ended first) while the server held its generation request, that request
// is given up on the server. It reports whether at was ended by its
// server's retirement (its prompt is then asked of another server).
func (ab *aborter) end(at *attempt, err error) (retired bool) {
	ab.mu.Lock()
	delete(ab.live, at)
	ab.mu.Unlock()
	givenUp := at.ctx.Err() != nil && err != nil
	cause := context.Cause(at.ctx)
	retired = errors.Is(cause, errRetiredMidway)
	at.cancel(nil)
	if rid := at.pending.RID(); givenUp && rid != "" {
		onServer := ab.stop(at.s, rid)
		if ab.noted != nil {
			ab.noted(at.s.name, givenUpCause(cause), onServer)
		}
	}
	return retired
}

// givenUpCause says why an attempt ended by cause was given up.
func givenUpCause(cause error) string {
	switch {
	case errors.Is(cause, errRetiredMidway):
		return "as its server retired"
	case errors.Is(cause, context.DeadlineExceeded):
		return "at --request-timeout"
	}
	return "as the run stopped"
}

// retire ends every attempt in flight on s: its answers would not be
// kept.
func (ab *aborter) retire(s *server) {
	ab.mu.Lock()
	defer ab.mu.Unlock()
	for at := range ab.live {
		if at.s == s {
			at.cancel(errRetiredMidway)
		}
	}
}

// stop gives up the request rid on s, whose connection is closed: it asks
// an SGLang server to abort it, once, unless s refused an abort before.
// A failed abort is said once per server and is not fatal. It reports
// whether the server took the abort.
func (ab *aborter) stop(s *server, rid string) (onServer bool) {
	c := s.client()
	ab.mu.Lock()
	refused := ab.refused[s]
	ab.mu.Unlock()
	if c == nil || !c.Flavor.CanAbort() || refused {
		ab.closed.Add(1)
		return false
	}
	// Not under the run's contexts: they may have ended (that is why).
	err := c.Abort(context.Background(), rid)
	if err == nil {
		ab.onServer.Add(1)
		return true
	}
	ab.closed.Add(1)
	if client.AbortRefused(err) {
		ab.mu.Lock()
		if ab.refused == nil {
			ab.refused = make(map[*server]bool)
		}
		ab.refused[s] = true
		ab.mu.Unlock()
	}
	ab.ctl.once("abort "+s.name, "gen: /abort_request failed (%v): requests given up there are stopped by closing the connection (SGLang notices within 4s; under --admin-api-key, /abort_request wants that key)", err)
	return false
}

// givenUpText is the summary's line on the requests given up, or "".
func givenUpText(sum *Summary) string {
	on, closed := sum.AbortedOnServer, sum.ClosedOnly
	switch {
	case on > 0 && closed > 0:
		return "gen: given up: " + counted(on, "request", "requests") + " aborted on the server, " +
			counted(closed, "request", "requests") + " by closing the connection"
	case on > 0:
		return "gen: " + counted(on, "request", "requests") + " given up and aborted on the server"
	case closed > 0:
		return "gen: " + counted(closed, "request", "requests") + " given up by closing the connection"
	}
	return ""
}
