package gen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"gendex/ingest/gen/servermetrics"
)

// A server frozen whole (SIGSTOP, a hung host, a GPU driver that holds the
// process) answers no request and no probe either, and gen finds it
// within about a minute, whatever --stall-after says: once a server has
// had requests in flight and no reply for Config.ProbeEvery, the tracker
// asks its /health and /metrics (at once, each on a connection of its own,
// each given probeTimeout) every ProbeEvery while that lasts, and
// probeFailures probes in a row that neither path answers (any HTTP
// status is an answer) make it stalled. With the default 15 s, the probes
// go at 15, 30 and 45 s of silence and the third is given up at 50 s: the
// server is stalled 50 s after its last reply (and within a second of it,
// the tracker's tick). A reply, or a probe answered, starts the count
// again.
//
// A server that answers its probes but no request is stalled only after
// Config.StallAfter (--stall-after): a long generation is not a stall.

// DefaultProbeEvery is Config.ProbeEvery's default.
const DefaultProbeEvery = 15 * time.Second

// probeFailures probes in a row answered by neither /health nor /metrics
// make a stall.
const probeFailures = 3

// probeTimeout is how long one probe of a server probed every every waits
// for an answer: a third of it, so that probes never overlap.
func probeTimeout(every time.Duration) time.Duration { return every / 3 }

// probes are a server's liveness probes (under flights.mu).
type probes struct {
	running bool
	sent    int64 // Unix ms: when the last probe was sent
	failed  int   // probes in a row answered by neither path
	from    int64 // Unix ms: when the first of those was sent
	said    string
}

// quietSinceLocked (under f.mu) is when f's server last replied or, when
// it held nothing then, its oldest request in flight was sent; 0 when it
// holds nothing.
func (f *flights) quietSinceLocked() int64 {
	oldest := int64(0)
	for _, fl := range f.on {
		if oldest == 0 || fl.sent < oldest {
			oldest = fl.sent
		}
	}
	if oldest == 0 {
		return 0
	}
	return max(f.lastReply, oldest)
}

// probeDue reports whether f's server is to be probed at now (Unix ms),
// and then counts a probe as sent: it holds requests, has given no reply
// for every, is not stalled already, and no probe of it runs or was sent
// less than every ago.
func (f *flights) probeDue(now int64, every time.Duration) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.quietSinceLocked()
	if q == 0 || f.stalled != nil || f.probe.running || now-q < every.Milliseconds() || now-f.probe.sent < every.Milliseconds() {
		return false
	}
	f.probe.running, f.probe.sent = true, now
	return true
}

// probed records the probe sent at sent (Unix ms): answered by either
// path or not, and what it found. A failed probe counts after those
// before it only when they were sent since the server's last reply.
func (f *flights) probed(sent int64, answered bool, said string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.probe.running, f.probe.said = false, said
	switch {
	case answered:
		f.probe.failed = 0
	case f.probe.failed == 0 || f.probe.from < f.quietSinceLocked():
		f.probe.failed, f.probe.from = 1, sent
	default:
		f.probe.failed++
	}
}

// probesFailedLocked (under f.mu) reports whether probeFailures probes in
// a row failed, all sent since quiet (quietSinceLocked).
func (f *flights) probesFailedLocked(quiet int64) bool {
	return f.probe.failed >= probeFailures && f.probe.from >= quiet
}

// probe asks s whether it is alive (probeServer) and records the answer
// of the probe sent at sent; nothing when the run ends meanwhile.
func (m *monitor) probe(s *server, sent int64, timeout time.Duration) {
	answered, said := m.probeServer(m.ctx, s, timeout)
	if m.ctx.Err() != nil {
		answered = true // not a failure of the server's
	}
	s.flights.probed(sent, answered, said)
}

// probeServer asks s's /health and /metrics at once, each on a connection
// of its own (the answers' connections may all be held), each within
// timeout: answered when either gives any HTTP status, and what each
// said ("/health does not answer (nothing within 5s); /metrics answers").
func (m *monitor) probeServer(ctx context.Context, s *server, timeout time.Duration) (answered bool, said string) {
	base := s.client().BaseURL
	metrics, err := servermetrics.URL(base)
	if err != nil {
		metrics = strings.TrimSuffix(base, "/") + "/metrics"
	}
	paths := []struct{ name, url string }{{"/health", strings.TrimSuffix(base, "/") + "/health"}, {"/metrics", metrics}}
	type answer struct {
		ok   bool
		said string
	}
	answers := make([]answer, len(paths))
	done := make(chan struct{}, len(paths))
	for i, p := range paths {
		go func() {
			ok, what := m.ask(ctx, p.url, timeout)
			answers[i] = answer{ok, p.name + " " + what}
			done <- struct{}{}
		}()
	}
	for range paths {
		<-done
	}
	var says []string
	for _, a := range answers {
		answered = answered || a.ok
		says = append(says, a.said)
	}
	return answered, strings.Join(says, "; ")
}

// ask GETs u within timeout: answered when any HTTP status came back,
// and what came: "answers", "answers HTTP 503", "does not answer
// (nothing within 5s)", "does not answer: connection refused".
func (m *monitor) ask(ctx context.Context, u string, timeout time.Duration) (answered bool, said string) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, "not asked: " + err.Error()
	}
	if m.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.apiKey)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: http.ProxyFromEnvironment}}
	resp, err := hc.Do(req)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return false, fmt.Sprintf("does not answer (nothing within %s)", roundDuration(timeout))
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold credentials
		}
		return false, "does not answer: " + err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return true, fmt.Sprintf("answers HTTP %d", resp.StatusCode)
	}
	return true, "answers"
}
