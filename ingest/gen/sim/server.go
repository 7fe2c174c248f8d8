package sim

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// ErrCrashed is returned by Serve and ListenAndServe when the server crashed
// on purpose (Config.CrashAfter).
var ErrCrashed = errors.New("sim: simulated crash")

// Server is a simulated SGLang server. Create it with New; it is safe for
// concurrent use. A Server that crashed stays crashed: use a new one to
// simulate a restart.
//
// Server owns the parts (see the package doc) and routes requests to them:
// it builds them in New and passes each the others it calls. It keeps
// only its configuration, its router, and the two parts its API asks:
// faults (the warmup clock, the crash) and meters (Stats).
type Server struct {
	cfg     Config
	handler http.Handler
	faults  *faults
	meters  *meters
}

// Stats is a snapshot of the server's counters. Requests counts HTTP
// generation requests (/generate, /v1/chat/completions, /v1/completions);
// every finished one is counted once in Completed (answered 200 in full,
// aborted ones included), Errors (an error status, or an error inside a
// stream), Resets or Canceled. Aborts, Running, BusySlotSeconds and the
// token counts are per item: a request has one item and holds one slot.
type Stats struct {
	Requests, Completed, Errors, Resets int64
	// Aborts counts items that finished with an abort (injected by
	// AbortRate or asked for by /abort_request).
	Aborts int64
	// Canceled counts requests whose client disconnected before the answer.
	Canceled int64
	// InFlight counts generation requests being handled; MaxInFlight is its
	// peak.
	InFlight, MaxInFlight int64
	// Running counts items holding a slot; Queued those waiting for one;
	// MaxRunning is the peak of Running, never above Config.Slots.
	Running, Queued, MaxRunning int64
	// BusySlotSeconds is the integral of Running over time since the first
	// item queued; occupancy = BusySlotSeconds / (Slots * elapsed).
	BusySlotSeconds float64
	// GeneratedTokens and PromptTokens count tokens of finished items.
	GeneratedTokens, PromptTokens int64
	// Under the knee scheduler (Config.Knee): Preemptions counts running
	// items vLLM evicted, RecomputedTokens what they prefilled again,
	// KVTokensHeld the pool's tokens in use now, and StepTokens and
	// StepSeconds the tokens decoded and the simulated time of all steps
	// (StepTokens / StepSeconds is the throughput, whatever the real
	// clock did).
	Preemptions, RecomputedTokens, KVTokensHeld, StepTokens int64
	StepSeconds                                             float64
}

// New returns a server simulating cfg. It does not listen; see Handler,
// Serve and ListenAndServe.
func New(cfg Config) *Server {
	cfg = cfg.withDefaults()
	slots := newSlotPool(cfg.Slots)
	var batch *batcher
	if cfg.Knee() {
		batch = newBatcher(cfg, slots)
	}
	m := newMeters(cfg, slots, batch, time.Now())
	f := newFaults(cfg, m)
	tools := &toolModel{cfg: cfg}
	parts := flavorParts{cfg: cfg, created: m.created, eng: newEngine(cfg, slots, batch, m, tools), faults: f, meters: m, tools: tools}
	s := &Server{cfg: cfg, faults: f, meters: m}
	s.handler = s.router(newFlavorRouter(parts))
	return s
}

// Handler returns the server's HTTP handler, for httptest and in-process
// use. The first call starts the server's clock: Config.Warmup runs from
// then. After a simulated crash the handler resets every new request;
// closing the connections already open needs Serve.
func (s *Server) Handler() http.Handler {
	s.faults.start()
	return s.handler
}

// Serve serves HTTP on ln until ctx is done or the server crashes
// (Config.CrashAfter). It closes ln and every connection before returning
// nil after ctx ends, ErrCrashed after a crash, or the error that stopped
// serving.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case <-ctx.Done():
		srv.Close()
		<-errc
		return nil
	case <-s.faults.crashes():
		srv.Close()
		<-errc
		return ErrCrashed
	case err := <-errc:
		return err
	}
}

// ListenAndServe waits Config.StartupDelay (clients meanwhile get connection
// refused), then listens on the TCP address addr and calls Serve. It returns
// nil if ctx ends first.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := s.Listen(ctx, addr)
	if err != nil || ln == nil {
		return err
	}
	return s.Serve(ctx, ln)
}

// Listen waits Config.StartupDelay, then binds the TCP address addr for
// Serve; it returns a nil listener and no error if ctx ends first.
func (s *Server) Listen(ctx context.Context, addr string) (net.Listener, error) {
	if !s.faults.startupDelay(ctx) {
		return nil, nil
	}
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats { return s.meters.stats() }

// OccupancySeries returns, for each second since the first generation item
// queued, the fraction of Config.Slots that were busy on average during
// that second. The last element covers the current, partial second,
// averaged over its elapsed part. It is nil before the first item.
func (s *Server) OccupancySeries() []float64 { return s.meters.occupancy() }

// Config returns the server's configuration with defaults applied.
func (s *Server) Config() Config { return s.cfg }

// route is one endpoint: the methods it accepts and its handler.
type route struct {
	methods []string
	h       http.HandlerFunc
}

// router is the server's request router: the crash check, then the
// flavor's own gate (llama.cpp's loading state and API key, or SGLang's
// and vLLM's API key), then an exact path match. A path the flavor does
// not serve, or a known path with another method, gets the flavor's own
// answer (flavorRouter's notFound and badMethod).
func (s *Server) router(fl flavorRouter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.faults.isCrashed() {
			resetConn(w)
			return
		}
		if fl.gate != nil && !fl.gate(w, r) {
			return
		}
		rt, ok := fl.table[r.URL.Path]
		if !ok {
			fl.notFound(w)
			return
		}
		for _, m := range rt.methods {
			if r.Method == m {
				rt.h(w, r)
				return
			}
		}
		fl.badMethod(w, rt)
	})
}
