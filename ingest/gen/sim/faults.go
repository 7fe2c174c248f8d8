package sim

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"time"
)

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

// drawFault draws the fault of the n-th generation request from Config.Seed.
// The same Seed gives the same faults to the same arrival numbers.
func (s *Server) drawFault(n uint64) (fault, float64) {
	c := &s.cfg
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
	s       *Server
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

// beginGeneration admits a generation request: it counts it, answers 503
// during warmup, reads the body and applies an injected error or reset. It
// returns nil if the request has already been answered.
func (s *Server) beginGeneration(w http.ResponseWriter, r *http.Request) *genRequest {
	s.stats.requests.Add(1)
	n := s.stats.inFlight.Add(1)
	for {
		m := s.stats.maxInFlight.Load()
		if n <= m || s.stats.maxInFlight.CompareAndSwap(m, n) {
			break
		}
	}
	g := &genRequest{s: s, w: w, r: r, arrival: time.Now()}
	if s.warmingUp() {
		switch s.cfg.Flavor {
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
	if s.cfg.CrashOn != "" && bytes.Contains(body, []byte(s.cfg.CrashOn)) {
		g.end(outReset)
		s.crash()
		resetConn(w)
		return nil
	}
	if isProbe(body) {
		// A route probe asks for nothing: it never draws a fault.
		return g
	}
	g.fault, g.faultV = s.drawFault(s.arrivals.Add(1))
	switch g.fault {
	case faultParse:
		if s.cfg.Flavor != FlavorSGLang {
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
	c := &g.s.stats
	c.inFlight.Add(-1)
	switch o {
	case outCompleted:
		n := c.completed.Add(1)
		if k := g.s.cfg.CrashAfter; k > 0 && n >= int64(k) {
			http.NewResponseController(g.w).Flush()
			g.s.crash()
		}
	case outError:
		c.errors.Add(1)
	case outReset:
		c.resets.Add(1)
	case outCanceled:
		c.canceled.Add(1)
	}
}

// finishItem records the outcome of a request whose item ran: canceled if
// the client went away, else completed, counting an aborted item.
func (g *genRequest) finishItem(it *item, clientThere bool) {
	if it.finish != nil && it.finish.kind == finishAbort {
		g.s.stats.aborts.Add(1)
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
