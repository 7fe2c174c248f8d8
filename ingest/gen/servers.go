package gen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gendex/ingest/gen/client"
)

// server is one generation endpoint and what gen knows of its state.
type server struct {
	// name is the URL with credentials redacted (client.RedactURL): the
	// only form of it gen prints, stores or uses as a metrics label.
	name string
	// cl is the client; replaced (never changed) when /v1/models names
	// another model after a restart.
	cl atomic.Pointer[client.Client]
	// ctxLen is the context length from /v1/models; 0 when unknown. It is
	// read again whenever the server comes back.
	ctxLen atomic.Int64
	// simulated: its /v1/models says it is gendex's simulator (learned
	// whenever it becomes ready).
	simulated atomic.Bool
	// routes are the routes preflight and routeChecked found it has.
	routes routes
	// tools is what was found of its tool support (tools.go).
	tools toolsCheck
	// countTokens is 0 (untried), 1 (works) or -1 (no /v1/tokenize: text
	// prompts are not clipped).
	countTokens atomic.Int32
	// countChat is 0 (untried), 1 (works) or -1 (no /v1/tokenize with
	// messages: a chat prompt too long for the context is found from its
	// bytes; promptfit.go).
	countChat atomic.Int32

	inFlight atomic.Int64
	done     atomic.Int64
	up       atomic.Bool
	everUp   atomic.Bool  // was up once in this run
	downAt   atomic.Int64 // unix ms when last marked down, or when the run began
	// tokenize is 0 (untried), 1 (works) or -1 (unsupported: use chat).
	tokenize atomic.Int32
	// tokens and unknownTokens count, like done, what this server answered
	// in this run: completion tokens, and answers without a count.
	tokens, unknownTokens atomic.Int64
	// specTokens and specVerify count, of its answers with spec_verify_ct,
	// the completion tokens and the verify steps (its accept length).
	specTokens, specVerify atomic.Int64
	// retries are its failed attempts that were sent again (retries.go).
	retries retries
	// lost counts the requests to it that ended without an answer since
	// one last got an answer (pool.ended; under pool.mu); downInFlight is,
	// when it is marked down, the requests that were in flight on it when
	// it stopped answering (those still in flight, and those lost already).
	lost, downInFlight atomic.Int64
	// flights are its requests in flight and its last replies (stall.go).
	flights flights
	// identity is its provenance as first read in this run; retired: it
	// came back as another server and is sent nothing more (identity.go).
	identity atomic.Pointer[[]byte]
	retired  atomic.Bool
}

// pool spreads requests over servers by least outstanding requests and
// keeps the ones that are not ready (yet, or any more) out until they
// answer. probe waits for a server to be ready and reads its facts; it
// returns early only when its context ends or the run stops.
type pool struct {
	servers []*server
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when a server comes up
	probe   func(ctx context.Context, s *server)
	// notify, when set, is told when a server goes down or comes up
	// (wasUp: it was up before in this run; down: how long it was out).
	notify func(s *server, up, wasUp bool, down time.Duration)
}

// newPool returns a pool of servers that are all down: each is put in
// rotation by markUp once it is ready.
func newPool(servers []*server) *pool {
	return &pool{servers: servers, changed: make(chan struct{})}
}

// pick returns the up server with the fewest requests in flight (and
// counts one more on it), waiting while every server is down; a retired
// server (identity.go) is never picked.
func (p *pool) pick(ctx context.Context) (*server, error) {
	for {
		p.mu.Lock()
		var best *server
		for _, s := range p.servers {
			if s.up.Load() && !s.retired.Load() && !s.stalledNow() && (best == nil || s.inFlight.Load() < best.inFlight.Load()) {
				best = s
			}
		}
		if best != nil {
			best.inFlight.Add(1)
			p.mu.Unlock()
			return best, nil
		}
		wait := p.changed
		p.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (p *pool) release(s *server) { s.inFlight.Add(-1) }

// ended releases a request to s that ended with err (nil: answered). One
// that got no answer at all (no status; not a timeout) is counted as lost,
// and any answer (an error status too) clears that count: so that when s is
// found down, the requests in flight on it when it stopped answering are
// known though most have ended by then (markDown).
func (p *pool) ended(s *server, err error) {
	var e *client.Error
	errors.As(err, &e)
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil || e != nil && e.Status != 0:
		s.lost.Store(0)
	case e != nil && e.Kind == client.Transient && !errors.Is(e.Err, context.DeadlineExceeded) && !strings.HasPrefix(e.Message, "timeout"):
		s.lost.Add(1)
	}
	p.release(s)
}

func (s *server) client() *client.Client { return s.cl.Load() }

// answered counts an answer s gave.
func (s *server) answered(res *client.Result) {
	if res.CompletionTokens != nil {
		s.tokens.Add(int64(*res.CompletionTokens))
	} else {
		s.unknownTokens.Add(1)
	}
	s.done.Add(1)
	if sp := res.Spec; sp != nil && sp.VerifyCt != nil && *sp.VerifyCt > 0 && res.CompletionTokens != nil {
		s.specTokens.Add(int64(*res.CompletionTokens))
		s.specVerify.Add(int64(*sp.VerifyCt))
	}
}

// markUp puts s in rotation and wakes the requests waiting for a server.
func (p *pool) markUp(s *server) {
	p.mu.Lock()
	wasUp := s.everUp.Load()
	s.lost.Store(0)
	s.up.Store(true)
	s.everUp.Store(true)
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
	if p.notify != nil {
		p.notify(s, true, wasUp, time.Since(time.UnixMilli(s.downAt.Load())))
	}
}

// markDown takes s out of rotation and starts probing it (once).
func (p *pool) markDown(ctx context.Context, s *server) {
	if !s.up.CompareAndSwap(true, false) {
		return
	}
	s.downAt.Store(time.Now().UnixMilli())
	// The requests in flight when it stopped answering: most of them have
	// ended already (each then asked /health before saying so).
	p.mu.Lock()
	s.downInFlight.Store(s.inFlight.Load() + s.lost.Swap(0))
	p.mu.Unlock()
	if p.notify != nil {
		p.notify(s, false, true, 0)
	}
	go p.watch(ctx, s)
}

// watch waits (probe) until s is ready again, then puts it in rotation,
// unless ctx ends first.
func (p *pool) watch(ctx context.Context, s *server) {
	p.probe(ctx, s)
	if ctx.Err() == nil && !s.retired.Load() {
		p.markUp(s)
	}
}

// upCount returns how many servers are up.
func (p *pool) upCount() int {
	n := 0
	for _, s := range p.servers {
		if s.up.Load() {
			n++
		}
	}
	return n
}

// othersText says what the run does while s is down: the other servers
// go on only when there are others up.
func (p *pool) othersText(s *server) string {
	up := 0
	for _, o := range p.servers {
		if o != s && o.up.Load() {
			up++
		}
	}
	switch {
	case len(p.servers) == 1:
		return "it is the only server: the run waits, and the prompts left are sent when it is back"
	case up == 0:
		return "no other server is up: the run waits for one"
	case up == 1:
		return "the other server goes on"
	}
	return fmt.Sprintf("the %d other servers up go on", up)
}

func (p *pool) inFlight() int64 {
	var n int64
	for _, s := range p.servers {
		n += s.inFlight.Load()
	}
	return n
}

// ErrServersDown is the error of a run that stopped because every server
// was down for longer than Config.DownLimit (errors.Is matches it).
var ErrServersDown = errors.New("every server is down")

// downTooLong is ErrServersDown with how long and the limit.
type downTooLong struct{ down, limit time.Duration }

func (e downTooLong) Error() string {
	return fmt.Sprintf("every server has been down for %s (--down-limit %s): gen stopped; nothing is lost (the answers written are kept, "+
		"and no prompt was marked failed): run the same command again, or requeue the task (scontrol requeue JOB_TASK), once a server answers",
		e.down.Round(time.Second), e.limit)
}

func (downTooLong) Is(target error) bool { return target == ErrServersDown }

// allDownFor is how long every server has been down (the latest went
// down that long ago), or 0 when one is up.
func (p *pool) allDownFor(now time.Time) time.Duration {
	var last int64
	for _, s := range p.servers {
		if s.up.Load() {
			return 0
		}
		last = max(last, s.downAt.Load())
	}
	return now.Sub(time.UnixMilli(last))
}

// boundDown ends the run once every server has been down for longer than
// Config.DownLimit (the first wait is bounded by WaitReady instead). It
// returns when the requests end.
func (a *asker) boundDown() {
	if a.cfg.DownLimit < 0 {
		return
	}
	t := time.NewTicker(max(min(time.Second, a.cfg.DownLimit/4), 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-a.ctl.reqs.Done():
			return
		case now := <-t.C:
			if d := a.pool.allDownFor(now); d > a.cfg.DownLimit {
				a.ctl.abort(downTooLong{d, a.cfg.DownLimit})
				return
			}
		}
	}
}
