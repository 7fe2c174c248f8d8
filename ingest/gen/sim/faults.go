package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// faults is the faults part: when the server is down and up (the startup
// delay, the warmup, the crash) and which generation requests fail
// (ErrorRate, ResetRate, AbortRate, ParseErrorRate, CrashOn, CrashAfter).
// It admits every generation request (admit): it counts it through meters,
// answers it during the warmup, reads its body and applies the fault drawn
// for it; each genRequest then ends through it. It owns the crash and the
// fault draws, and counts through meters, never its counters directly;
// it never plans or runs an item.
type faults struct {
	cfg    Config
	meters *meters

	startOnce sync.Once
	readyAt   atomic.Int64 // unix nanos when warmup ends; 0 before start

	crashOnce sync.Once
	crashed   chan struct{}

	arrivals atomic.Uint64 // generation requests, numbers fault draws
}

// newFaults returns the faults of a server that has not started.
func newFaults(cfg Config, m *meters) *faults {
	return &faults{cfg: cfg, meters: m, crashed: make(chan struct{})}
}

// start starts the warmup clock, once.
func (f *faults) start() {
	f.startOnce.Do(func() {
		f.readyAt.Store(time.Now().Add(f.cfg.Warmup).UnixNano())
	})
}

// startupDelay waits Config.StartupDelay; false if ctx ends first.
func (f *faults) startupDelay(ctx context.Context) bool {
	if d := f.cfg.StartupDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
	}
	return true
}

// warmingUp reports whether the server is still in its warmup window.
func (f *faults) warmingUp() bool {
	return time.Now().UnixNano() < f.readyAt.Load()
}

// isCrashed reports whether the simulated crash happened.
func (f *faults) isCrashed() bool {
	select {
	case <-f.crashed:
		return true
	default:
		return false
	}
}

// crashes is closed when the server crashes.
func (f *faults) crashes() <-chan struct{} { return f.crashed }

// crash triggers the simulated crash once.
func (f *faults) crash() { f.crashOnce.Do(func() { close(f.crashed) }) }

// handleHealth serves SGLang's and vLLM's /health: 503 with an empty body
// during warmup, else 200 with an empty body.
func (f *faults) handleHealth(w http.ResponseWriter, r *http.Request) {
	status := http.StatusOK
	if f.warmingUp() {
		status = http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(status)
}

// fault is the injected fault drawn for one generation request.
type fault int

const (
	noFault fault = iota
	fault500
	fault503
	faultReset
	faultAbort
	faultParse // llama.cpp's 500 "Failed to parse input at pos 0"
)

// draw draws the fault of the n-th generation request from Config.Seed.
// The same Seed gives the same faults to the same arrival numbers.
func (f *faults) draw(n uint64) (fault, float64) {
	c := &f.cfg
	if c.ErrorRate <= 0 && c.ResetRate <= 0 && c.AbortRate <= 0 && c.ParseErrorRate <= 0 {
		return noFault, 0
	}
	r := rng{state: mix(uint64(c.Seed)^0xFA017) ^ n*0x9E3779B97F4A7C15}
	u, v := r.float(), r.float()
	switch {
	case u < c.ErrorRate:
		if v < 0.5 {
			return fault500, v
		}
		return fault503, v
	case u < c.ErrorRate+c.ResetRate:
		return faultReset, v
	case u < c.ErrorRate+c.ResetRate+c.AbortRate:
		return faultAbort, v
	case u < c.ErrorRate+c.ResetRate+c.AbortRate+c.ParseErrorRate:
		return faultParse, v
	}
	return noFault, v
}

// outcome is how a generation request ended, for Stats.
type outcome int

const (
	outCompleted outcome = iota
	outError
	outReset
	outCanceled
)

// genRequest is one HTTP generation request in progress.
type genRequest struct {
	f       *faults
	w       http.ResponseWriter
	r       *http.Request
	arrival time.Time
	body    []byte
	fault   fault
	faultV  float64 // where an injected abort cuts the output, in [0, 1)
	ended   bool
	// noToolCall: the request's tool_choice is "none" (see tools.go).
	noToolCall bool
	// oneCall: the request allows one tool call per turn (see tools.go).
	oneCall bool
}

// admit admits a generation request: it counts it, answers 503 during
// warmup, reads the body and applies an injected error or reset. It
// returns nil if the request has already been answered.
func (f *faults) admit(w http.ResponseWriter, r *http.Request) *genRequest {
	f.meters.began()
	g := &genRequest{f: f, w: w, r: r, arrival: time.Now()}
	if f.warmingUp() {
		switch f.cfg.Flavor {
		case FlavorVLLM:
			writeVLLMError(w, http.StatusServiceUnavailable, "ServiceUnavailableError", "The server is not ready.", "")
		default:
			writeOpenAIError(w, httpError(http.StatusServiceUnavailable, "503", "The server is warming up."))
		}
		g.end(outError)
		return nil
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		g.end(outCanceled)
		return nil
	}
	g.body = body
	if f.cfg.CrashOn != "" && bytes.Contains(body, []byte(f.cfg.CrashOn)) {
		g.end(outReset)
		f.crash()
		resetConn(w)
		return nil
	}
	if isProbe(body) {
		// A route probe asks for nothing: it never draws a fault.
		return g
	}
	g.fault, g.faultV = f.draw(f.arrivals.Add(1))
	switch g.fault {
	case faultParse:
		if f.cfg.Flavor != FlavorSGLang {
			// vLLM and llama.cpp handlers answer it once the request
			// is valid (parseFault).
			return g
		}
		writeParseFault(w)
		g.end(outError)
		return nil
	case fault500:
		writeInternalError(w)
		g.end(outError)
		return nil
	case fault503:
		writeOpenAIError(w, httpError(http.StatusServiceUnavailable, "503", "The request queue is full."))
		g.end(outError)
		return nil
	case faultReset:
		g.end(outReset)
		resetConn(w)
		return nil
	}
	return g
}

// end records the outcome of the request once. A completed request may
// trigger the simulated crash; its answer is flushed first so the client
// receives it.
func (g *genRequest) end(o outcome) {
	if g.ended {
		return
	}
	g.ended = true
	n := g.f.meters.ended(o)
	if k := g.f.cfg.CrashAfter; o == outCompleted && k > 0 && n >= int64(k) {
		http.NewResponseController(g.w).Flush()
		g.f.crash()
	}
}

// finishItem records the outcome of a request whose item ran: canceled if
// the client went away, else completed, counting an aborted item.
func (g *genRequest) finishItem(it *item, clientThere bool) {
	if it.finish != nil && it.finish.kind == finishAbort {
		g.f.meters.aborted()
	}
	if !clientThere {
		g.end(outCanceled)
		return
	}
	g.end(outCompleted)
}

// applyFault marks the item of a request drawn for an injected abort: it is
// cut at a fraction of its planned output.
func (g *genRequest) applyFault(it *item) {
	it.abortAt = -1
	if g.fault == faultAbort && it.plan != nil {
		it.abortAt = int(g.faultV * float64(len(it.plan.ids)))
	}
}

// resetConn drops the connection without an answer: a TCP reset when the
// connection can be hijacked, else net/http's abort of the handler.
func resetConn(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// writeParseFault writes llama.cpp's answer when a model's output does not
// parse (server_error, HTTP 500).
func writeParseFault(w http.ResponseWriter) {
	writeRaw(w, http.StatusInternalServerError, "application/json; charset=utf-8",
		[]byte(`{"error":{"code":500,"message":"Failed to parse input at pos 0","type":"server_error"}}`))
}

// parseFault answers a valid request drawn for ParseErrorRate and reports
// whether it did.
func (g *genRequest) parseFault() bool {
	if g.fault != faultParse {
		return false
	}
	writeParseFault(g.w)
	g.end(outError)
	return true
}

// admitWith admits a generation request and reads its body with parse,
// the flavor's own (which answers the request and returns nil when the
// body is refused); on nil, the answer is written and the request ended.
// vLLM and llama.cpp start their generation requests this way.
func (f *faults) admitWith(w http.ResponseWriter, r *http.Request, parse func(body []byte) map[string]json.RawMessage) (*genRequest, map[string]json.RawMessage) {
	g := f.admit(w, r)
	if g == nil {
		return nil, nil
	}
	m := parse(g.body)
	if m == nil {
		g.end(outError)
		return nil, nil
	}
	return g, m
}
