package gen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"gendex/ingest/gen/client"
	"gendex/store/prom"
)

// connect waits for the first server to be ready and reads its /v1/models
// facts; the others are waited for in the background while it works (each
// with the same progress lines), and put in rotation when ready. Whenever
// a server comes back, its facts are read again. It fails when no server
// is ready within WaitReady, or at once on an Auth or Setup error.
func (a *asker) connect() error {
	hc := a.cfg.HTTP
	if hc == nil {
		hc = &http.Client{Transport: client.NewTransport(a.cfg.Concurrency)} // the slots: adaptive, its bound
	}
	var servers []*server
	for _, u := range a.cfg.Servers {
		c := client.New(u, client.Options{APIKey: a.cfg.APIKey, HTTP: hc, Model: a.cfg.Model})
		s := &server{name: c.Server()}
		s.cl.Store(c)
		s.downAt.Store(time.Now().UnixMilli())
		servers = append(servers, s)
	}
	a.pool = newPool(servers)
	gov := newGovernor(a.ctl, a.cfg, a.pool, a.mon != nil && a.mon.every >= 0) // each server's limit (limit.go)
	gov.prompts = &a.prompts
	if a.mon != nil {
		a.pool.notify = a.mon.serverChanged
		gov.event, a.mon.gov = a.mon.event, gov
		a.mon.watch(servers)
		a.mon.track(a.pool)
	}
	a.pool.probe = func(ctx context.Context, s *server) {
		if s.everUp.Load() {
			a.ctl.logf("gen: %s stopped answering; waiting for it (%s)", s.name, a.pool.othersText(s))
		} else {
			a.ctl.logf("gen: still waiting for %s in the background (%s)", s.name, a.pool.othersText(s))
		}
		start := time.Now()
		for ctx.Err() == nil {
			err := s.client().WaitReady(ctx, nil)
			if err == nil {
				if err = a.learn(ctx, s); err == nil || errors.Is(err, errRetired) {
					break
				}
			}
			if k := client.KindOf(err); k == client.Auth || k == client.Setup {
				a.ctl.abort(a.setupError(err))
				return
			}
			select { // a server that answers /health with another 4xx: try again later
			case <-time.After(a.cfg.Backoff.Delay(4)):
			case <-ctx.Done():
			}
		}
		if ctx.Err() == nil && s.everUp.Load() && !s.retired.Load() {
			a.ctl.logf("gen: %s is back after %s", s.name, time.Since(start).Round(time.Second))
		}
	}
	// The first wait is bounded by WaitReady and stopped by an interrupt;
	// it goes on in the background after connect returns.
	wait, cancelWait := context.WithTimeout(a.ctl.stop, a.cfg.WaitReady)
	context.AfterFunc(a.ctl.reqs, cancelWait)
	ready := make(chan *server, len(servers))
	notReady := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			lastLog := time.Time{}
			err := s.client().WaitReady(wait, func(rd client.Readiness) {
				if k := client.KindOf(rd.Err); rd.State == client.StateReady || k == client.Auth || k == client.Setup {
					return // ready, or about to stop the run
				}
				if time.Since(lastLog) >= a.cfg.LogEvery || lastLog.IsZero() {
					left := a.cfg.WaitReady - rd.Elapsed
					state := rd.State.String()
					if rd.State == client.StateRefused && rd.Elapsed >= refusedLong {
						state = fmt.Sprintf("nothing listens on port %s (connection refused): check --server, unless its model is still loading;", portOf(s.name))
					}
					a.ctl.logf("gen: waiting for %s: %s for %s (giving up in %s; --wait-ready)", s.name, state, rd.Elapsed.Round(time.Second), left.Round(time.Second))
					lastLog = time.Now()
				}
			})
			if err == nil {
				err = a.learn(wait, s)
			}
			switch k := client.KindOf(err); {
			case err == nil:
				a.pool.markUp(s)
				ready <- s
			case k == client.Auth || k == client.Setup:
				a.ctl.abort(a.setupError(err))
			case a.ctl.stopping():
			default:
				a.ctl.logf("gen: %s is not ready: %v", s.name, err)
				notReady <- err
				a.pool.watch(a.ctl.reqs, s)
			}
		}()
	}
	for failed := 0; failed < len(servers); {
		select {
		case <-ready:
			a.warm()
			if a.cfg.OnMetrics != nil {
				a.cfg.OnMetrics(a.writeMetrics)
			}
			return nil
		case <-notReady:
			failed++
		case <-a.nothingFed(): // a redo's feeder read every prompt: none to ask (earlyfeed.go)
			return errNothingFed
		case <-a.ctl.stop.Done():
			return context.Cause(a.ctl.stop)
		}
	}
	return fmt.Errorf("no server became ready within --wait-ready %s", a.cfg.WaitReady)
}

// learn reads a ready server's /v1/models: its flavor, its context length
// (for clipping), whether it is the simulator and, unless --model was
// given, the model name the OpenAI-compatible endpoints want; then it runs
// preflight. An Auth error is returned; a check that fails stops the run
// (and is returned); any other failure to read /v1/models leaves the
// context length unknown, said in the log.
func (a *asker) learn(ctx context.Context, s *server) error {
	c := s.client()
	info, err := c.ServedModel(ctx)
	switch {
	case client.KindOf(err) == client.Auth:
		return err
	case err != nil:
		a.ctl.logf("gen: %s: /v1/models: %v: its context length is unknown (max_new_tokens is not clipped) and so is its flavor", s.name, err)
		info = client.ModelInfo{ID: c.Model, Models: []string{a.cfg.Model}}
	}
	s.ctxLen.Store(int64(info.MaxModelLen))
	nc := *c
	if a.cfg.Model == "" && info.ID != "" {
		// The OpenAI-compatible endpoints of some servers (vLLM) want
		// "model"; send the one the server serves. Answers record it.
		if c.Model != "" && c.Model != info.ID {
			a.ctl.logf("gen: %s now serves model %s (was %s)", s.name, info.ID, c.Model)
		}
		nc.Model = info.ID
	}
	nc.Simulated, nc.Flavor = info.Simulated, info.Flavor
	ident, serverInfo := nc.ServerIdentity(ctx)
	if serverInfo != nil {
		s.serverInfo.Store(&serverInfo) // its stated capacity (limit.go)
	}
	nc.Provenance = provenanceOf(a.cfg.Sampling, a.cfg.Mix, a.cfg.samples(), nc.Model, info, ident, a.askedOf(a.cfg.apiFor(&nc), ident))
	if err := a.checkIdentity(s, nc.Provenance); err != nil {
		return err
	}
	if nc.Model != c.Model || nc.Simulated != c.Simulated || nc.Flavor != c.Flavor || !bytes.Equal(nc.Provenance, c.Provenance) {
		s.cl.Store(&nc)
		c = &nc
	}
	s.simulated.Store(info.Simulated)
	if err := a.checkServerKind(s.name, info.Simulated); err != nil {
		a.ctl.abort(err)
		return err
	}
	if err := a.checkProvenance(s.name, nc.Model, nc.Provenance); err != nil {
		a.ctl.abort(err)
		return err
	}
	if err := a.preflight(ctx, s, c, info); err != nil {
		if client.KindOf(err) == client.Auth {
			return err
		}
		a.ctl.abort(err)
		return err
	}
	ctxText := "context length unknown (max_new_tokens is not clipped)"
	if info.MaxModelLen > 0 {
		ctxText = fmt.Sprintf("context length %d", info.MaxModelLen)
	}
	a.ctl.logf("gen: %s is ready: %s, model %s, %s%s", s.name, info.Flavor, info.ID, ctxText, a.routesText(s, c))
	return nil
}

// setupError is the error that stops the run for a server error no prompt
// can get past (see client.Setup and client.Auth): it names the server, the
// status, the server's message and what to fix.
func (a *asker) setupError(err error) error {
	var e *client.Error
	if !errors.As(err, &e) {
		return err
	}
	var hint string
	switch {
	case e.Kind == client.Auth:
		hint = "check --api-key, --api-key-file or $SGLANG_API_KEY"
	case e.ModelNotFound():
		hint = "check --model (GET /v1/models lists the model the server serves; leave --model out to use it)"
	case errors.Is(e, client.ErrToolsRefused):
		hint = "restart the server with those flags, or use one that takes tools: gen never regenerates a tool conversation as text"
	case e.Op == "GET /health":
		hint = "check that --server is the server's root URL, such as http://host:30000"
	case a.cfg.API == client.APIAuto:
		hint = "check that --server is the server's root URL (gen chose the route from its GET /v1/models; --api generate, chat or completions forces one)"
	default:
		hint = fmt.Sprintf("check --api (now %s; leave it out and gen uses the route the server offers: SGLang's /generate, else chat) and that --server is the server's root URL", a.cfg.API)
	}
	return &stopError{err: e, hint: hint}
}

// stopError is a run-level failure: the run stopped at once and marked no
// prompt failed. err is the server's answer that stopped it; without one,
// msg says what a check before the requests found (preflight).
type stopError struct {
	err  *client.Error
	msg  string
	hint string
}

func (s *stopError) Error() string {
	if s.err == nil {
		return fmt.Sprintf("stopped: %s: %s (no prompt was marked failed)", s.msg, s.hint)
	}
	return fmt.Sprintf("stopped: server %s answered %s with HTTP %d: %s; %s (no prompt was marked failed)",
		s.err.Server, s.err.Op, s.err.Status, s.err.Message, s.hint)
}

func (s *stopError) Unwrap() error {
	if s.err == nil {
		return nil
	}
	return s.err
}

// warm opens the connections the run will use on the servers up now (its
// share of --concurrency, or its limit when that is lower), before the
// first prompt is sent, so their slots fill at once rather than one dial
// at a time. It asks for /v1/models, which costs a server nothing.
func (a *asker) warm() {
	var up []*server
	for _, s := range a.pool.servers {
		if s.up.Load() {
			up = append(up, s)
		}
	}
	var wg sync.WaitGroup
	for _, s := range up {
		n := max(1, a.cfg.Concurrency/len(a.pool.servers))
		if lim := int(s.limit.Load()); lim > 0 {
			n = min(n, lim)
		}
		for range n {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(a.ctl.stop, 5*time.Second)
				defer cancel()
				s.client().ServedModel(ctx)
			})
		}
	}
	wg.Wait()
}

// refusedLong is how long a server may refuse connections before the wait
// for it says that nothing may listen there (a mistyped port) rather than
// that its model loads.
var refusedLong = time.Minute

// portOf is the port of a server URL, as the connection uses it.
func portOf(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return "?"
	}
	if p := u.Port(); p != "" {
		return p
	}
	if u.Scheme == "https" {
		return "443"
	}
	return "80"
}

// writeMetrics writes the requests in flight, whether each server is up
// (not while stalled) or stalled, and the answers each wrote, labelled by the server's redacted URL.
func (a *asker) writeMetrics(p *prom.Writer) {
	p.Family("gendex_in_flight", "Requests in flight, by server.", prom.Gauge)
	for _, s := range a.pool.servers {
		p.Int(s.inFlight.Load(), "server", s.name)
	}
	p.Family("gendex_server_up", "Whether a server answers (1), or is waited for or stalled (0).", prom.Gauge)
	for _, s := range a.pool.servers {
		up := int64(0)
		if s.up.Load() && !s.stalledNow() {
			up = 1
		}
		p.Int(up, "server", s.name)
	}
	p.Family("gendex_server_stalled", "Whether a server holds requests it replies to none of (gen's stall rule).", prom.Gauge)
	for _, s := range a.pool.servers {
		stalled := int64(0)
		if s.stalledNow() {
			stalled = 1
		}
		p.Int(stalled, "server", s.name)
	}
	p.Family("gendex_answers_total", "Answers written by this run, by server.", prom.Counter)
	for _, s := range a.pool.servers {
		p.Int(s.done.Load(), "server", s.name)
	}
}
