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
	// limit bounds inFlight: pick sends it no more while inFlight is at
	// it (0: no limit of its own). The governor sets it (limit.go).
	limit atomic.Int64
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
	// serverInfo is what learn last read of its SGLang /get_server_info
	// or llama.cpp /props (nil: none): the governor reads the capacity it
	// states there (limit.go), so neither is asked twice.
	serverInfo atomic.Pointer[[]byte]
	// identity is its provenance as first read in this run; retired: it
	// came back as another server and is sent nothing more (identity.go).
	identity atomic.Pointer[[]byte]
	retired  atomic.Bool
}

// pool spreads requests over servers by least outstanding requests (for
// its limit: the lowest share of it in use) and keeps the ones that are
// not ready (yet, or any more) out until they answer, and the ones at
// their limit until a request to them ends or the limit rises. probe
// waits for a server to be ready and reads its facts; it returns early
// only when its context ends or the run stops.
type pool struct {
	servers []*server
	mu      sync.Mutex
	changed chan struct{} // closed and replaced when a server comes up
	// room wakes one pick waiting while every server up is at its limit
	// (waiting counts them): a request ended or a limit rose. The one
	// woken passes it on when room is left.
	room    chan struct{}
	waiting atomic.Int64
	probe   func(ctx context.Context, s *server)
	// notify, when set, is told when a server goes down or comes up
	// (wasUp: it was up before in this run; down: how long it was out).
	notify func(s *server, up, wasUp bool, down time.Duration)
}

// newPool returns a pool of servers that are all down: each is put in
// rotation by markUp once it is ready.
func newPool(servers []*server) *pool {
	return &pool{servers: servers, changed: make(chan struct{}), room: make(chan struct{}, 1)}
}

// pick returns the up server with the lowest share of its limit in flight
// (the fewest requests, when the limits are equal) and counts one more on
// it, waiting while every server is down or at its limit; a retired
// server (identity.go) is never picked.
func (p *pool) pick(ctx context.Context) (*server, error) {
	// Counted as waiting before each look, so a request that ends after
	// the look finds it waiting and wakes it.
	p.waiting.Add(1)
	defer p.waiting.Add(-1)
	for {
		p.mu.Lock()
		var best *server
		roomy := 0 // servers with room for one more
		for _, s := range p.servers {
			if !s.up.Load() || s.retired.Load() || s.stalledNow() || !s.hasRoom(0) {
				continue
			}
			roomy++
			if best == nil || s.busier(best) < 0 {
				best = s
			}
		}
		if best != nil {
			best.inFlight.Add(1)
			left := roomy > 1 || best.hasRoom(0)
			p.mu.Unlock()
			if left && p.waiting.Load() > 1 {
				p.nudge() // another waiting pick may go too
			}
			return best, nil
		}
		wait := p.changed
		p.mu.Unlock()
		select {
		case <-wait:
		case <-p.room:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// hasRoom reports whether s may take more than extra requests beyond
// those in flight under its limit.
func (s *server) hasRoom(extra int64) bool {
	lim := s.limit.Load()
	return lim <= 0 || s.inFlight.Load()+extra < lim
}

// busier compares the shares of their limits s and o have in flight
// (by count when either has no limit): below 0 when s's is lower.
func (s *server) busier(o *server) int {
	a, b := s.inFlight.Load(), o.inFlight.Load()
	if la, lb := s.limit.Load(), o.limit.Load(); la > 0 && lb > 0 {
		a, b = a*lb, b*la
	}
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// nudge wakes one pick waiting for room, if any.
func (p *pool) nudge() {
	select {
	case p.room <- struct{}{}:
	default:
	}
}

// setLimit sets s's limit to n (0: none), waking a pick waiting for room
// when it rose.
func (p *pool) setLimit(s *server, n int64) {
	if old := s.limit.Swap(n); (n > old || n <= 0) && p.waiting.Load() > 0 {
		p.nudge()
	}
}

func (p *pool) release(s *server) {
	s.inFlight.Add(-1)
	if p.waiting.Load() > 0 {
		p.nudge()
	}
}

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
