package sim

import (
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrCrashed is returned by Serve and ListenAndServe when the server crashed
// on purpose (Config.CrashAfter).
var ErrCrashed = errors.New("sim: simulated crash")

// Server is a simulated SGLang server. Create it with New; it is safe for
// concurrent use. A Server that crashed stays crashed: use a new one to
// simulate a restart.
type Server struct {
	cfg     Config
	slots   *slotPool
	reqs    registry
	handler http.Handler
	created int64 // unix seconds, for /v1/models
	// startedAt is when the server started, as prometheus_client's process
	// collector gives it (process_start_time_seconds: Unix seconds, to the
	// clock tick, 0.01 s).
	startedAt float64

	startOnce sync.Once
	readyAt   atomic.Int64 // unix nanos when warmup ends; 0 before start

	crashOnce sync.Once
	crashed   chan struct{}

	arrivals atomic.Uint64 // generation requests, numbers fault draws
	stats    counters
	load     load // what the scheduler gauges of /metrics report
	fstats   flavorStats
}

// counters are the live statistics behind Stats.
type counters struct {
	requests, completed, errors, resets, aborts, canceled atomic.Int64
	inFlight, maxInFlight                                 atomic.Int64
	generated, promptTokens, items                        atomic.Int64
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
}

// New returns a server simulating cfg. It does not listen; see Handler,
// Serve and ListenAndServe.
func New(cfg Config) *Server {
	now := time.Now()
	s := &Server{
		cfg:       cfg.withDefaults(),
		created:   now.Unix(),
		startedAt: float64(now.UnixMilli()/10) / 100,
		crashed:   make(chan struct{}),
	}
	s.slots = newSlotPool(s.cfg.Slots)
	s.handler = s.routes()
	return s
}

// Handler returns the server's HTTP handler, for httptest and in-process
// use. The first call starts the server's clock: Config.Warmup runs from
// then. After a simulated crash the handler resets every new request;
// closing the connections already open needs Serve.
func (s *Server) Handler() http.Handler {
	s.startOnce.Do(func() {
		s.readyAt.Store(time.Now().Add(s.cfg.Warmup).UnixNano())
	})
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
	case <-s.crashed:
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
	if d := s.cfg.StartupDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, nil
		case <-t.C:
		}
	}
	var lc net.ListenConfig
	return lc.Listen(ctx, "tcp", addr)
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	p := s.slots.snapshot()
	c := &s.stats
	return Stats{
		Requests:        c.requests.Load(),
		Completed:       c.completed.Load(),
		Errors:          c.errors.Load(),
		Resets:          c.resets.Load(),
		Aborts:          c.aborts.Load(),
		Canceled:        c.canceled.Load(),
		InFlight:        c.inFlight.Load(),
		MaxInFlight:     c.maxInFlight.Load(),
		Running:         int64(p.running),
		Queued:          int64(p.waiting),
		MaxRunning:      int64(p.maxRunning),
		BusySlotSeconds: p.busy,
		GeneratedTokens: c.generated.Load(),
		PromptTokens:    c.promptTokens.Load(),
	}
}

// OccupancySeries returns, for each second since the first generation item
// queued, the fraction of Config.Slots that were busy on average during
// that second. The last element covers the current, partial second,
// averaged over its elapsed part. It is nil before the first item.
func (s *Server) OccupancySeries() []float64 { return s.slots.series() }

// warmingUp reports whether the server is still in its warmup window.
func (s *Server) warmingUp() bool {
	return time.Now().UnixNano() < s.readyAt.Load()
}

// isCrashed reports whether the simulated crash happened.
func (s *Server) isCrashed() bool {
	select {
	case <-s.crashed:
		return true
	default:
		return false
	}
}

// crash triggers the simulated crash once.
func (s *Server) crash() { s.crashOnce.Do(func() { close(s.crashed) }) }

// route is one endpoint: the methods it accepts and its handler.
type route struct {
	methods []string
	h       http.HandlerFunc
}

// routes builds the request router of the configured flavor (see
// flavorRoutes): the crash check, then the flavor's own gate (llama.cpp's
// loading state and API key, or SGLang's and vLLM's API key), then an
// exact path match. A path the flavor does not serve, or a known path with
// another method, gets the flavor's own answer (flavor.miss).
func (s *Server) routes() http.Handler {
	fl := s.flavorRoutes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.isCrashed() {
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

// sglangRoutes is SGLang's router: auth first, as SGLang's middleware runs
// before routing; unknown paths get FastAPI's 404 {"detail":"Not Found"},
// known paths with another method 405.
func (s *Server) sglangRoutes() flavorRouter {
	get, post := []string{http.MethodGet}, []string{http.MethodPost}
	table := map[string]route{
		"/generate":            {post, s.handleGenerate},
		"/v1/chat/completions": {post, s.handleChat},
		"/v1/completions":      {post, s.handleCompletions},
		"/v1/tokenize":         {post, s.handleTokenize},
		"/health":              {get, s.handleHealth},
		"/v1/models":           {get, s.handleModels},
		"/parse_function_call": {post, s.handleParseFunctionCall},
		"/server_info":         {get, s.handleServerInfo},
		"/get_server_info":     {get, s.handleServerInfo},
	}
	if s.cfg.EnableMetrics {
		table["/metrics"] = route{get, s.handleMetrics}
	}
	return flavorRouter{
		table: table,
		gate: func(w http.ResponseWriter, r *http.Request) bool {
			if !s.authorized(r) {
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Unauthorized"})
				return false
			}
			return true
		},
		notFound:  fastAPINotFound,
		badMethod: fastAPIBadMethod,
	}
}

// fastAPINotFound is FastAPI's answer to a path no route serves.
func fastAPINotFound(w http.ResponseWriter) { writeDetail(w, http.StatusNotFound, "Not Found") }

// fastAPIBadMethod is FastAPI's answer to a known path with another method.
func fastAPIBadMethod(w http.ResponseWriter, rt route) {
	w.Header().Set("Allow", strings.Join(rt.methods, ", "))
	writeDetail(w, http.StatusMethodNotAllowed, "Method Not Allowed")
}

// authorized applies SGLang's API key check: /health and /metrics (and
// OPTIONS) are always open; everything else needs "Bearer <key>", with the
// scheme matched case-insensitively and the key in constant time.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" || r.Method == http.MethodOptions ||
		strings.HasPrefix(r.URL.Path, "/health") || strings.HasPrefix(r.URL.Path, "/metrics") {
		return true
	}
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}
