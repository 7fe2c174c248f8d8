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
func (r *run) connect() error {
	hc := r.cfg.HTTP
	if hc == nil {
		hc = &http.Client{Transport: client.NewTransport(r.cfg.Concurrency)}
	}
	var servers []*server
	for _, u := range r.cfg.Servers {
		c := client.New(u, client.Options{APIKey: r.cfg.APIKey, HTTP: hc, Model: r.cfg.Model})
		s := &server{name: c.Server()}
		s.cl.Store(c)
		s.downAt.Store(time.Now().UnixMilli())
		servers = append(servers, s)
	}
	r.pool = newPool(servers)
	if r.mon != nil {
		r.pool.notify = r.mon.serverChanged
		r.mon.watch(servers)
		r.mon.track(r.pool)
	}
	r.pool.probe = func(ctx context.Context, s *server) {
		if s.everUp.Load() {
			r.ctl.logf("gen: %s stopped answering; waiting for it (%s)", s.name, r.pool.othersText(s))
		} else {
			r.ctl.logf("gen: still waiting for %s in the background (%s)", s.name, r.pool.othersText(s))
		}
		start := time.Now()
		for ctx.Err() == nil {
			err := s.client().WaitReady(ctx, nil)
			if err == nil {
				if err = r.learn(ctx, s); err == nil || errors.Is(err, errRetired) {
					break
				}
			}
			if k := client.KindOf(err); k == client.Auth || k == client.Setup {
				r.ctl.abort(r.setupError(err))
				return
			}
			select { // a server that answers /health with another 4xx: try again later
			case <-time.After(r.cfg.Backoff.Delay(4)):
			case <-ctx.Done():
			}
		}
		if ctx.Err() == nil && s.everUp.Load() && !s.retired.Load() {
			r.ctl.logf("gen: %s is back after %s", s.name, time.Since(start).Round(time.Second))
		}
	}
	// The first wait is bounded by WaitReady and stopped by an interrupt;
	// it goes on in the background after connect returns.
	wait, cancelWait := context.WithTimeout(r.ctl.stop, r.cfg.WaitReady)
	context.AfterFunc(r.ctl.reqs, cancelWait)
	ready := make(chan *server, len(servers))
	notReady := make(chan error, len(servers))
	for _, s := range servers {
		go func() {
			lastLog := time.Time{}
			err := s.client().WaitReady(wait, func(rd client.Readiness) {
				if k := client.KindOf(rd.Err); rd.State == client.StateReady || k == client.Auth || k == client.Setup {
					return // ready, or about to stop the run
				}
				if time.Since(lastLog) >= r.cfg.LogEvery || lastLog.IsZero() {
					left := r.cfg.WaitReady - rd.Elapsed
					state := rd.State.String()
					if rd.State == client.StateRefused && rd.Elapsed >= refusedLong {
						state = fmt.Sprintf("nothing listens on port %s (connection refused): check --server, unless its model is still loading;", portOf(s.name))
					}
					r.ctl.logf("gen: waiting for %s: %s for %s (giving up in %s; --wait-ready)", s.name, state, rd.Elapsed.Round(time.Second), left.Round(time.Second))
					lastLog = time.Now()
				}
			})
			if err == nil {
				err = r.learn(wait, s)
			}
			switch k := client.KindOf(err); {
			case err == nil:
				r.pool.markUp(s)
				ready <- s
			case k == client.Auth || k == client.Setup:
				r.ctl.abort(r.setupError(err))
			case r.ctl.stopping():
			default:
				r.ctl.logf("gen: %s is not ready: %v", s.name, err)
				notReady <- err
				r.pool.watch(r.ctl.reqs, s)
			}
		}()
	}
	for failed := 0; failed < len(servers); {
		select {
		case <-ready:
			r.warm()
			if r.cfg.OnMetrics != nil {
				r.cfg.OnMetrics(r.writeMetrics)
			}
			return nil
		case <-notReady:
			failed++
		case <-r.feed.nothingFed(): // a redo's feeder read every prompt: none to ask (earlyfeed.go)
			return errNothingFed
		case <-r.ctl.stop.Done():
			return context.Cause(r.ctl.stop)
		}
	}
	return fmt.Errorf("no server became ready within --wait-ready %s", r.cfg.WaitReady)
}

// learn reads a ready server's /v1/models: its flavor, its context length
// (for clipping), whether it is the simulator and, unless --model was
// given, the model name the OpenAI-compatible endpoints want; then it runs
// preflight. An Auth error is returned; a check that fails stops the run
// (and is returned); any other failure to read /v1/models leaves the
// context length unknown, said in the log.
func (r *run) learn(ctx context.Context, s *server) error {
	c := s.client()
	info, err := c.ServedModel(ctx)
	switch {
	case client.KindOf(err) == client.Auth:
		return err
	case err != nil:
		r.ctl.logf("gen: %s: /v1/models: %v: its context length is unknown (max_new_tokens is not clipped) and so is its flavor", s.name, err)
		info = client.ModelInfo{ID: c.Model, Models: []string{r.cfg.Model}}
	}
	s.ctxLen.Store(int64(info.MaxModelLen))
	nc := *c
	if r.cfg.Model == "" && info.ID != "" {
		// The OpenAI-compatible endpoints of some servers (vLLM) want
		// "model"; send the one the server serves. Answers record it.
		if c.Model != "" && c.Model != info.ID {
			r.ctl.logf("gen: %s now serves model %s (was %s)", s.name, info.ID, c.Model)
		}
		nc.Model = info.ID
	}
	nc.Simulated, nc.Flavor = info.Simulated, info.Flavor
	ident := nc.ServerIdentity(ctx)
	nc.Provenance = provenanceOf(r.cfg.Sampling, nc.Model, info, ident, r.wr.askedOf(r.apiFor(&nc), ident))
	if err := r.checkIdentity(s, nc.Provenance); err != nil {
		return err
	}
	if nc.Model != c.Model || nc.Simulated != c.Simulated || nc.Flavor != c.Flavor || !bytes.Equal(nc.Provenance, c.Provenance) {
		s.cl.Store(&nc)
		c = &nc
	}
	s.simulated.Store(info.Simulated)
	if err := r.wr.checkServerKind(s.name, info.Simulated); err != nil {
		r.ctl.abort(err)
		return err
	}
	if err := r.wr.checkProvenance(s.name, nc.Model, nc.Provenance); err != nil {
		r.ctl.abort(err)
		return err
	}
	if err := r.preflight(ctx, s, c, info); err != nil {
		if client.KindOf(err) == client.Auth {
			return err
		}
		r.ctl.abort(err)
		return err
	}
	ctxText := "context length unknown (max_new_tokens is not clipped)"
	if info.MaxModelLen > 0 {
		ctxText = fmt.Sprintf("context length %d", info.MaxModelLen)
	}
	r.ctl.logf("gen: %s is ready: %s, model %s, %s%s", s.name, info.Flavor, info.ID, ctxText, r.routesText(s, c))
	return nil
}

// setupError is the error that stops the run for a server error no prompt
// can get past (see client.Setup and client.Auth): it names the server, the
// status, the server's message and what to fix.
func (r *run) setupError(err error) error {
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
	case r.cfg.API == client.APIAuto:
		hint = "check that --server is the server's root URL (gen chose the route from its GET /v1/models; --api generate, chat or completions forces one)"
	default:
		hint = fmt.Sprintf("check --api (now %s; leave it out and gen uses the route the server offers: SGLang's /generate, else chat) and that --server is the server's root URL", r.cfg.API)
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

// warm opens the connections the run will use on the servers up now,
// before the first prompt is sent, so their slots fill at once rather than
// one dial at a time. It asks for /v1/models, which costs a server nothing.
func (r *run) warm() {
	var up []*server
	for _, s := range r.pool.servers {
		if s.up.Load() {
			up = append(up, s)
		}
	}
	var wg sync.WaitGroup
	for _, s := range up {
		for range max(1, r.cfg.Concurrency/len(r.pool.servers)) {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(r.ctl.stop, 5*time.Second)
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
// and the answers each wrote, labelled by the server's redacted URL.
func (r *run) writeMetrics(p *prom.Writer) {
	p.Family("gendex_in_flight", "Requests in flight, by server.", prom.Gauge)
	for _, s := range r.pool.servers {
		p.Int(s.inFlight.Load(), "server", s.name)
	}
	p.Family("gendex_server_up", "Whether a server answers (1) or is waited for (0).", prom.Gauge)
	for _, s := range r.pool.servers {
		up := int64(0)
		if s.up.Load() {
			up = 1
		}
		p.Int(up, "server", s.name)
	}
	p.Family("gendex_answers_total", "Answers written by this run, by server.", prom.Counter)
	for _, s := range r.pool.servers {
		p.Int(s.done.Load(), "server", s.name)
	}
}
