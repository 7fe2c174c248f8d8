package gen

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"gendex/ingest/gen/client"
	"gendex/store"
)

// The events gen records in the index (`gendex query events`).
const (
	EventStart     = "start"     // gen began sending (detail: datasets, prompts, servers)
	EventStop      = "stop"      // gen ended (detail: what it did, and why it ended)
	EventInterrupt = "interrupt" // Ctrl-C or SIGTERM: it stops sending
	EventDown      = "down"      // a server stopped answering
	EventUp        = "up"        // a server is ready: at first, or back (detail: how long it was down)
	EventRestarted = "restarted" // a server's counters went back, or its process start time changed
	EventErrors    = "errors"    // prompts failed for good on a server, counted per burst
	EventRetries   = "retries"   // attempts on a server failed and were sent again, counted per burst (detail: the most frequent cause)
	EventIsolated  = "isolated"  // prompts in flight at a second down of a server, sent one at a time from then on, per burst (isolate.go)
	EventGivenUp   = "given-up"  // requests gen gave up (a timeout, the run stopping, a retired server), counted per burst (abort.go)
	EventLimit     = "limit"     // gen changed how many requests it keeps in flight on a server (detail: from, to, and why: queue grew, preemptions, KV full, room)
)

// burstWindow: final errors on one server within this long of the first
// are one event, with their count.
const burstWindow = 10 * time.Second

// event queues an event of server ("" for the run's own) at Unix ms t.
func (m *monitor) event(t int64, server, name, detail string) {
	m.add(pending{event: &store.Event{Time: t, Server: server, Name: name, Detail: detail}})
}

// serverChanged is the pool's hook: s went down, or came up (wasUp: it
// had been up before in this run; down: how long it was out).
func (m *monitor) serverChanged(s *server, up, wasUp bool, down time.Duration) {
	now := time.Now().UnixMilli()
	if !up {
		m.event(now, s.name, EventDown, fmt.Sprintf("stopped answering; %d requests in flight on it are retried when it is back", s.downInFlight.Load()))
		return
	}
	detail := "ready"
	if wasUp {
		detail = "back after " + roundDuration(down)
	} else if down >= time.Second {
		detail = "ready after waiting " + roundDuration(down)
	}
	m.event(now, s.name, EventUp, detail)
	if sc := m.scraper(s); sc != nil {
		if wasUp {
			sc.noMetrics.Store(false) // it may have been restarted with --enable-metrics
		}
		sc.wake()
	}
}

// roundDuration is d to the millisecond under a second, else to the
// second, written as a flag takes it: 10m, not 10m0s; 2h, not 2h0m0s.
func roundDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// bursts counts final errors, and attempts retried, per server and
// records one event of each per burst: the first one opens it, and
// burstWindow later it is recorded, at the first one's time, with the
// count and the last message (final errors) or the most frequent cause
// (retries).
type bursts struct {
	m    *monitor
	mu   sync.Mutex
	open map[burstKey]*burst
}

// burstKey is a server's burst of one event (EventErrors, EventRetries).
type burstKey struct{ server, event string }

type burst struct {
	start  int64 // Unix ms
	n      int
	last   string
	causes map[string]int64 // retries: by retryCause; given up: by givenUpCause
	// onServer counts, of the requests given up, those the server was
	// asked to stop (the rest: their connections closed).
	onServer int
	ids      []string // isolated: the prompts' ids (maxIsolatedIDs)
	timer    *time.Timer
}

// finalError counts a prompt that failed for good on server.
func (b *bursts) finalError(server, msg string) {
	if server == "" {
		return // not a server's failure (a bad prompt line)
	}
	b.count(burstKey{server, EventErrors}, msg)
}

// retried counts an attempt on server retried, for cause (retryCause).
func (b *bursts) retried(server, cause string) {
	b.count(burstKey{server, EventRetries}, cause)
}

// givenUp counts a request to server given up for cause (givenUpCause);
// onServer: the server was asked to stop it.
func (b *bursts) givenUp(server, cause string, onServer bool) {
	u := b.count(burstKey{server, EventGivenUp}, cause)
	if onServer {
		b.mu.Lock()
		u.onServer++
		b.mu.Unlock()
	}
}

// count adds one to k's open burst, opening one if there is none, and
// returns it.
func (b *bursts) count(k burstKey, msg string) *burst {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open = map[burstKey]*burst{}
	}
	u := b.open[k]
	if u == nil {
		u = &burst{start: time.Now().UnixMilli()}
		b.open[k] = u
		u.timer = time.AfterFunc(burstWindow, func() { b.end(k, u) })
	}
	u.n++
	u.last = msg
	if k.event == EventRetries || k.event == EventGivenUp {
		if u.causes == nil {
			u.causes = map[string]int64{}
		}
		u.causes[msg]++
	}
	if k.event == EventIsolated && len(u.ids) < maxIsolatedIDs {
		u.ids = append(u.ids, msg)
	}
	return u
}

// end records burst u of k, unless it was recorded already.
func (b *bursts) end(k burstKey, u *burst) {
	b.mu.Lock()
	if b.open[k] != u {
		b.mu.Unlock()
		return
	}
	delete(b.open, k)
	b.mu.Unlock()
	if k.event == EventRetries {
		b.m.event(u.start, k.server, EventRetries, retryBurstText(u))
		return
	}
	if k.event == EventIsolated {
		b.m.event(u.start, k.server, EventIsolated, isolatedText(u, b.m.cfg.MaxCrashes))
		return
	}
	if k.event == EventGivenUp {
		b.m.event(u.start, k.server, EventGivenUp, givenUpBurstText(u))
		return
	}
	what := "1 prompt failed for good"
	if u.n > 1 {
		what = fmt.Sprintf("%d prompts failed for good within %s", u.n, burstWindow)
	}
	if n := b.m.cfg.samples(); n > 1 { // units: each sample of a prompt
		what = fmt.Sprintf("1 answer (of %d samples per prompt) failed for good", n)
		if u.n > 1 {
			what = fmt.Sprintf("%d answers (of %d samples per prompt) failed for good within %s", u.n, n, burstWindow)
		}
	}
	last := u.last
	if len(last) > 300 {
		last = last[:300] + "..."
	}
	b.m.event(u.start, k.server, EventErrors, what+"; last: "+strings.ReplaceAll(last, "\n", " "))
}

// retryBurstText describes a burst of retries, its causes most frequent
// first: "37 attempts retried within 10s: 30 HTTP 500 'Failed to parse
// input', 7 timeouts"; "1 attempt retried: timeout".
func retryBurstText(u *burst) string {
	if u.n == 1 {
		return "1 attempt retried: " + u.last
	}
	return fmt.Sprintf("%d attempts retried within %s: %s", u.n, burstWindow, causesText(u.causes))
}

// givenUpBurstText describes a burst of requests given up, its causes
// most frequent first, and how they were stopped: "37 requests given up
// within 10s: 30 at --request-timeout, 7 as the run stopped; aborted on
// the server".
func givenUpBurstText(u *burst) string {
	what := "1 request given up " + u.last
	if u.n > 1 {
		causes := make([]string, 0, len(u.causes))
		for c := range u.causes {
			causes = append(causes, c)
		}
		sort.Slice(causes, func(i, j int) bool {
			a, b := causes[i], causes[j]
			return u.causes[a] > u.causes[b] || u.causes[a] == u.causes[b] && a < b
		})
		for i, c := range causes {
			causes[i] = fmt.Sprintf("%d %s", u.causes[c], c)
		}
		what = fmt.Sprintf("%d requests given up within %s: %s", u.n, burstWindow, strings.Join(causes, ", "))
	}
	switch closed := u.n - u.onServer; {
	case closed == 0:
		return what + "; aborted on the server"
	case u.onServer == 0:
		return what + "; stopped by closing the connection"
	}
	return fmt.Sprintf("%s; %d aborted on the server, %d by closing the connection", what, u.onServer, u.n-u.onServer)
}

// flushAll records the bursts still open (the run ends).
func (b *bursts) flushAll() {
	b.mu.Lock()
	open := make(map[burstKey]*burst, len(b.open))
	for k, u := range b.open {
		open[k] = u
	}
	b.mu.Unlock()
	for k, u := range open {
		u.timer.Stop()
		b.end(k, u)
	}
}

// begin records the run's start: its row (beginRow) and its start event
// now, todo and settings saying what it asks and how (the servers'
// samples come once connect knows them: watch).
func (m *monitor) begin(todo, settings string) {
	m.beginRow()
	m.event(m.run, "", EventStart, fmt.Sprintf("%s, %s, servers %s; %s",
		counted(len(m.sets), "dataset", "datasets"), todo, strings.Join(m.serverNames(), ", "), settings))
}

// serverNames returns the servers as gen prints them.
func (m *monitor) serverNames() []string {
	var out []string
	for _, u := range m.cfg.Servers {
		out = append(out, client.RedactURL(u))
	}
	return out
}

// end records the run's end (sum nil: it ended before sending), stores
// everything pending and says how the run's row records it.
func (m *monitor) end(sum *Summary, err error) {
	detail := "finished"
	switch {
	case errors.Is(err, context.Canceled):
		detail = "interrupted"
	case errors.Is(err, ErrRefused):
		detail = "refused: " + err.Error()
	case err != nil:
		detail = "failed: " + err.Error()
	}
	if sum != nil {
		retried := ""
		if n := m.pool.retriesTotal(); n > 0 {
			retried = ", " + attemptsText(n) + " retried"
		}
		detail += fmt.Sprintf(": %s, %s%s, %s in %s", counted(sum.Responses, "answer", "answers"), counted(sum.Errors, "error", "errors"),
			retried, counted(sum.Tokens, "token", "tokens"), sum.Elapsed.Round(time.Millisecond))
	}
	row := m.endRow(err, sum)
	m.close(err == nil, &store.Event{Name: EventStop, Detail: detail})
	m.db.ReleaseRun(&row) // stored: it says how it ended
	m.sayRow(row)
}
