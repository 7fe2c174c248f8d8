package gen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"gendex/ingest/gen/sglang"
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
		m.event(now, s.name, EventDown, fmt.Sprintf("stopped answering; %d requests in flight on it are retried when it is back", s.inFlight.Load()))
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

func roundDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// bursts counts final errors per server and records one event per burst:
// the first error opens it, and burstWindow later it is recorded, at the
// first error's time, with the count and the last message.
type bursts struct {
	m    *monitor
	mu   sync.Mutex
	open map[string]*burst
}

type burst struct {
	start int64 // Unix ms
	n     int
	last  string
	timer *time.Timer
}

// finalError counts a prompt that failed for good on server.
func (b *bursts) finalError(server, msg string) {
	if server == "" {
		return // not a server's failure (a bad prompt line)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open == nil {
		b.open = map[string]*burst{}
	}
	if u := b.open[server]; u != nil {
		u.n++
		u.last = msg
		return
	}
	u := &burst{start: time.Now().UnixMilli(), n: 1, last: msg}
	b.open[server] = u
	u.timer = time.AfterFunc(burstWindow, func() { b.end(server, u) })
}

// end records burst u of server, unless it was recorded already.
func (b *bursts) end(server string, u *burst) {
	b.mu.Lock()
	if b.open[server] != u {
		b.mu.Unlock()
		return
	}
	delete(b.open, server)
	b.mu.Unlock()
	what := "1 prompt failed for good"
	if u.n > 1 {
		what = fmt.Sprintf("%d prompts failed for good within %s", u.n, burstWindow)
	}
	last := u.last
	if len(last) > 300 {
		last = last[:300] + "..."
	}
	b.m.event(u.start, server, EventErrors, what+"; last: "+strings.ReplaceAll(last, "\n", " "))
}

// flushAll records the bursts still open (the run ends).
func (b *bursts) flushAll() {
	b.mu.Lock()
	open := b.open
	b.open = nil
	b.mu.Unlock()
	for server, u := range open {
		u.timer.Stop()
		b.mu.Lock()
		if b.open == nil {
			b.open = map[string]*burst{}
		}
		b.open[server] = u
		b.mu.Unlock()
		b.end(server, u)
	}
}

// startMonitor begins recording the run: its start event now, the
// servers' samples once connect knows them.
func (r *run) startMonitor(todo int64) {
	r.mon = newMonitor(r)
	r.mon.event(r.started.UnixMilli(), "", EventStart, fmt.Sprintf("%d datasets, %d prompts to answer, servers %s; %s",
		len(r.sets), todo, strings.Join(r.serverNames(), ", "), r.settings()))
}

// serverNames returns the servers as gen prints them.
func (r *run) serverNames() []string {
	var out []string
	for _, u := range r.cfg.Servers {
		out = append(out, sglang.RedactURL(u))
	}
	return out
}

// stopMonitor records the run's end (sum nil: it ended before sending)
// and stores everything pending.
func (r *run) stopMonitor(sum *Summary, err error) {
	if r.mon == nil {
		return
	}
	detail := "finished"
	switch {
	case errors.Is(err, context.Canceled):
		detail = "interrupted"
	case err != nil:
		detail = "failed: " + err.Error()
	}
	if sum != nil {
		detail += fmt.Sprintf(": %d answers, %d errors, %d tokens in %s", sum.Responses, sum.Errors, sum.Tokens, sum.Elapsed.Round(time.Millisecond))
	}
	r.mon.close(err == nil, &store.Event{Name: EventStop, Detail: detail})
}
