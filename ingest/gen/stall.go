package gen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"gendex/ingest/gen/client"
	"gendex/store"
)

// A stall: a server holds requests and answers none of them (a wedged GPU,
// a deadlocked scheduler; it still accepts connections, so nothing fails).
// gen finds it when a server has had requests in flight, and no reply to
// any request (an answer or an HTTP error), for longer than
// Config.StallAfter, measured from its last reply or, when it was idle
// before, from the oldest request in flight. It then records a stalled
// event with the flight record (stallRecord) and says it on the live line,
// in its run's row (store.Run, runstate.go) and so in watch, the web view
// and `query runs`; a recovered event once it replies again.
//
// What gen does about it: it waits. The requests held stay in flight
// (sending them again elsewhere could answer a prompt twice, if the
// server wakes up; --request-timeout still ends an attempt, which is then
// retried as any timeout, never two at once for one prompt), and the
// stalled server is given no new request until it replies again (the
// other servers take them). So no prompt is answered twice and none is
// lost. (Once the requests it held have run past --request-timeout, it
// is given requests again: one that woke up meanwhile is then seen to
// reply.)

// The events of a stall.
const (
	EventStalled   = "stalled"   // a server holds requests and answers none (detail: the flight record)
	EventRecovered = "recovered" // a stalled server replies again (detail: how long it was stalled)
)

// DefaultStallAfter is Config.StallAfter's default: a stall counts only
// when a server answers none of its requests, and with many in flight one
// ends every few seconds even when each takes minutes; ten minutes is
// longer than one long answer takes at a slow server's pace (some 30,000
// tokens at 50 tokens/s) and far below --request-timeout (1 h).
const DefaultStallAfter = 10 * time.Minute

// stallProbeTimeout bounds the /health probe of a stalled server.
const stallProbeTimeout = 5 * time.Second

// flightIDs is how many of a stalled server's requests its record names.
const flightIDs = 20

// flights are one server's requests in flight, and its last replies.
type flights struct {
	mu         sync.Mutex
	next       uint64
	on         map[uint64]flight
	lastReply  int64 // Unix ms: an answer or an HTTP error
	lastAnswer int64 // Unix ms
	errs       []timedError
	// stalled, when set, is the open stall (under mu; the run's tracker
	// opens and closes it).
	stalled *stall
}

type flight struct {
	dataset, id string
	sent        int64 // Unix ms
}

type timedError struct {
	at  int64
	msg string
}

type stall struct {
	since  int64 // Unix ms: the last reply, or the oldest request held
	held   int
	health string // what /health said when it was found
	probes bool   // /health or /metrics answered
}

// begin counts a request for the prompt id of dataset ds as in flight.
func (f *flights) begin(ds, id string) uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.on == nil {
		f.on = map[uint64]flight{}
	}
	f.next++
	f.on[f.next] = flight{ds, id, time.Now().UnixMilli()}
	return f.next
}

// end counts the request tok as ended with err (nil: answered).
func (f *flights) end(tok uint64, err error) {
	now := time.Now().UnixMilli()
	var e *client.Error
	errors.As(err, &e)
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.on, tok)
	switch {
	case err == nil:
		f.lastReply, f.lastAnswer = now, now
		return
	case e != nil && e.Status != 0:
		f.lastReply = now
	case client.KindOf(err) == client.Canceled:
		return
	}
	f.errs = append(f.errs, timedError{now, err.Error()})
	if len(f.errs) > 3 {
		f.errs = f.errs[1:]
	}
}

// held returns the requests in flight, oldest first.
func (f *flights) held() []flight {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]flight, 0, len(f.on))
	for _, fl := range f.on {
		out = append(out, fl)
	}
	slices.SortFunc(out, func(a, b flight) int { return int(a.sent - b.sent) })
	return out
}

// stalledSince returns, when f's server has had requests in flight and no
// reply for longer than after at now, the moment that began; else 0.
func (f *flights) stalledSince(now time.Time, after time.Duration) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.on) == 0 || f.stalled != nil {
		return 0
	}
	oldest := int64(0)
	for _, fl := range f.on {
		if oldest == 0 || fl.sent < oldest {
			oldest = fl.sent
		}
	}
	since := max(f.lastReply, oldest)
	if now.UnixMilli()-since < after.Milliseconds() {
		return 0
	}
	return since
}

// checkStalls opens a stall on each server that has stalled, and closes
// those that reply again. It returns the run's stall sentence ("" for
// none): the earliest open stall's.
func (m *monitor) checkStalls(p *pool, now time.Time) string {
	for _, s := range p.servers {
		f := &s.flights
		if since := f.stalledSince(now, m.cfg.StallAfter); since != 0 && s.up.Load() {
			m.openStall(p, s, since, now)
		}
		f.mu.Lock()
		st, replied := f.stalled, f.lastReply
		if st != nil && replied > st.since {
			f.stalled = nil
		}
		f.mu.Unlock()
		if st != nil && replied > st.since {
			d := roundDuration(time.UnixMilli(replied).Sub(time.UnixMilli(st.since)))
			m.event(replied, s.name, EventRecovered, fmt.Sprintf("replies again after %s without a reply; %d requests were held", d, st.held))
			m.ctl.logf("gen: %s replies again after %s stalled", s.name, d)
			p.wake()
		}
	}
	first, say := int64(0), ""
	for _, s := range p.servers {
		f := &s.flights
		f.mu.Lock()
		if st := f.stalled; st != nil && (first == 0 || st.since < first) {
			first, say = st.since, stallSentence(s.name, st, len(f.on))
		}
		f.mu.Unlock()
	}
	return say
}

// stallSentence: "stalled since 03:12: 61 requests held by gpu1:30000,
// which answers no probe".
func stallSentence(name string, st *stall, held int) string {
	probes := "which answers no probe"
	if st.probes {
		probes = "which answers probes but no request"
	}
	return fmt.Sprintf("stalled since %s: %s held by %s, %s", time.UnixMilli(st.since).UTC().Format("15:04"),
		counted(int64(held), "request", "requests"), name, probes)
}

// openStall records s's stall, which began at since: its flight record as
// a stalled event, and a message.
func (m *monitor) openStall(p *pool, s *server, since int64, now time.Time) {
	held := s.flights.held()
	health := m.probeHealth(s)
	var v liveView
	if sc := m.scraper(s); sc != nil {
		v = sc.view()
	}
	st := &stall{since: since, held: len(held), health: health,
		probes: health == "answers" || v.sample.Scraped && v.sample.Time > since}
	s.flights.mu.Lock()
	s.flights.stalled = st
	errs := slices.Clone(s.flights.errs)
	lastAnswer := s.flights.lastAnswer
	s.flights.mu.Unlock()
	detail := stallRecord(held, now, lastAnswer, errs, v, health)
	m.event(now.UnixMilli(), s.name, EventStalled, detail)
	m.ctl.logf("gen: %s: %s; gen waits and keeps them (none is sent again, so none is answered twice), and sends it nothing new until it replies: %s",
		s.name, stallSentence(s.name, st, len(held)), detail)
}

// stallRecord is a stalled server's flight record, as its event's
// detail: the requests in flight and their ages, its last answer, its
// last errors, its last /metrics sample, and whether /health answers now.
func stallRecord(held []flight, now time.Time, lastAnswer int64, errs []timedError, v liveView, health string) string {
	age := func(ms int64) string { return roundDuration(now.Sub(time.UnixMilli(ms))) }
	var b strings.Builder
	fmt.Fprintf(&b, "%s in flight", counted(int64(len(held)), "request", "requests"))
	if len(held) > 0 {
		fmt.Fprintf(&b, ", ages %s to %s:", age(held[len(held)-1].sent), age(held[0].sent))
		for i, fl := range held {
			if i == flightIDs {
				fmt.Fprintf(&b, " and %d more", len(held)-i)
				break
			}
			fmt.Fprintf(&b, " %s/%s %s", fl.dataset, fl.id, age(fl.sent))
		}
	}
	b.WriteString("; last answer ")
	if lastAnswer == 0 {
		b.WriteString("none in this run")
	} else {
		fmt.Fprintf(&b, "%s (%s ago)", clock(lastAnswer), age(lastAnswer))
	}
	b.WriteString("; last errors ")
	if len(errs) == 0 {
		b.WriteString("none")
	}
	for i, e := range errs {
		if i > 0 {
			b.WriteString(" |")
		}
		fmt.Fprintf(&b, " %s %s", clock(e.at), strings.ReplaceAll(e.msg, "\n", " "))
	}
	b.WriteString("; /metrics ")
	switch smp := v.sample; {
	case !v.taken:
		b.WriteString("not read in this run")
	case smp.NoMetrics:
		b.WriteString("not served")
	case smp.LastSeen == 0:
		b.WriteString("never answered")
	default:
		fmt.Fprintf(&b, "last answered %s (%s ago)", clock(smp.LastSeen), age(smp.LastSeen))
		if smp = v.good; smp.Scraped {
			for _, m := range []struct {
				m    store.Metric
				name string
			}{{store.MetricRunning, "running"}, {store.MetricQueued, "queued"}, {store.MetricTokenUsage, "KV use"}} {
				if x, ok := smp.Get(m.m); ok {
					fmt.Fprintf(&b, ", %s %g", m.name, x)
				}
			}
		}
	}
	b.WriteString("; /health " + health)
	return b.String()
}

func clock(ms int64) string { return time.UnixMilli(ms).UTC().Format("15:04:05") }

// probeHealth asks s's /health on a connection of its own (the answers'
// connections are held by the stall): "answers", or why not.
func (m *monitor) probeHealth(s *server) string {
	base := s.client().BaseURL
	ctx, cancel := context.WithTimeout(context.Background(), stallProbeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/health", nil)
	if err != nil {
		return "not asked: " + err.Error()
	}
	if m.apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+m.apiKey)
	}
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: http.ProxyFromEnvironment}}
	resp, err := hc.Do(req)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil:
		return fmt.Sprintf("does not answer (nothing within %s)", stallProbeTimeout)
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold credentials
		}
		return "does not answer: " + err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Sprintf("answers HTTP %d", resp.StatusCode)
	}
	return "answers"
}

// stalledNow reports whether s is stalled and still holds requests: it
// is then given no new request. Once it holds none (they ran past
// --request-timeout), it is given requests again, so that one that woke
// up meanwhile is seen to reply (and one still stalled holds them).
func (s *server) stalledNow() bool {
	s.flights.mu.Lock()
	defer s.flights.mu.Unlock()
	return s.flights.stalled != nil && len(s.flights.on) > 0
}

// wake wakes the requests waiting for a server (a stalled one replies
// again).
func (p *pool) wake() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}
