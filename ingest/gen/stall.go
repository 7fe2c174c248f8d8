package gen

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"gendex/ingest/gen/client"
)

// A stall: a server holds requests and answers none of them (a wedged GPU,
// a deadlocked scheduler, a process frozen whole; it still accepts
// connections, so nothing fails). gen finds it on a server that has had
// requests in flight and no reply to any of them (an answer or an HTTP
// error) since its last reply or, when it was idle before, since the
// oldest request in flight, by whichever rule holds first:
//
//   - it answers no probe either: probeFailures probes of its /health and
//     /metrics in a row, within about a minute by default (probe.go);
//   - the silence lasts longer than Config.StallAfter (--stall-after),
//     whatever its probes say: a server busy with long answers replies to
//     its probes, and is not stalled before that.
//
// gen then records a stalled event with the flight record (stallRecord),
// prints a message of at most three lines (stallMessage; the details are
// in `query events`), and says it on the live lines (its server line
// says stalled, not up, and the head counts it out of the servers up),
// in its run's row (store.Run, runstate.go) and so in watch, the web view
// and `query runs`; once it replies again, a recovered event and a
// message, and its line says up again. The summary names each stall and
// how long it lasted (stallLog).
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

// DefaultStallAfter is Config.StallAfter's default: a server that answers
// its probes is stalled only when it answers none of its requests, and
// with many in flight one ends every few seconds even when each takes
// minutes; ten minutes is longer than one long answer takes at a slow
// server's pace (some 30,000 tokens at 50 tokens/s) and far below
// --request-timeout (1 h).
const DefaultStallAfter = 10 * time.Minute

// stallProbeTimeout bounds the probes of a server found stalled by
// Config.StallAfter.
const stallProbeTimeout = 5 * time.Second

// flightIDs is how many of a stalled server's requests its record names.
const flightIDs = 20

// flights are one server's requests in flight, its last replies and its
// liveness probes (probe.go).
type flights struct {
	mu         sync.Mutex
	next       uint64
	on         map[uint64]flight
	lastReply  int64 // Unix ms: an answer or an HTTP error
	lastAnswer int64 // Unix ms
	errs       []timedError
	probe      probes
	// stalled, when set, is the open stall (under mu; the run's tracker
	// opens and closes it).
	stalled *stall
}

type flight struct {
	dataset, id string
	sent        int64 // Unix ms
}

// timedError is one of a server's last distinct errors: when it last
// came, and how many times in a row of them.
type timedError struct {
	at  int64
	msg string
	n   int
}

// lastErrors is how many distinct errors a server keeps for its stall's
// record.
const lastErrors = 3

type stall struct {
	since  int64  // Unix ms: the last reply, or the oldest request held
	held   int    // requests in flight when it was found
	probes bool   // /health or /metrics answered when it was found
	said   string // what its probes said
	woke   int64  // Unix ms: its first reply since it was found (0: none yet)
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
	if err == nil || e != nil && e.Status != 0 {
		f.lastReply = now
		if f.stalled != nil && f.stalled.woke == 0 {
			f.stalled.woke = now
		}
	}
	switch {
	case err == nil:
		f.lastAnswer = now
		return
	case client.KindOf(err) == client.Canceled && (e == nil || e.Status == 0):
		return
	}
	f.noteError(now, err.Error())
}

// wokeLocked (under f.mu) is when st, f's stall, ended: its first reply
// since it began; 0 while it lasts.
func (f *flights) wokeLocked(st *stall) int64 {
	if st.woke == 0 && f.lastReply > st.since {
		return f.lastReply // a reply came while it was being found
	}
	return st.woke
}

// noteError keeps msg, at Unix ms at, among the last distinct errors
// (under f.mu): one said again moves to the end, counted.
func (f *flights) noteError(at int64, msg string) {
	n := 0
	for i, e := range f.errs {
		if e.msg == msg {
			n = e.n
			f.errs = slices.Delete(f.errs, i, i+1)
			break
		}
	}
	f.errs = append(f.errs, timedError{at, msg, n + 1})
	if len(f.errs) > lastErrors {
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

// stalledSince returns, when f's server has stalled at now by either rule
// (its probes failed, or no reply for longer than after), the moment the
// silence began (quietSinceLocked), and whether its probes failed; 0 when
// it has not, or is stalled already.
func (f *flights) stalledSince(now time.Time, after time.Duration) (since int64, noProbe bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.quietSinceLocked()
	switch {
	case q == 0 || f.stalled != nil:
		return 0, false
	case f.probesFailedLocked(q):
		return q, true
	case now.UnixMilli()-q >= after.Milliseconds():
		return q, false
	}
	return 0, false
}

// checkStalls probes the servers that hold requests and give no reply
// (probe.go), opens a stall on each that has stalled, and closes those
// that reply again. It returns the run's stall sentence ("" for none):
// the earliest open stall's.
func (m *monitor) checkStalls(p *pool, now time.Time) string {
	every := m.cfg.ProbeEvery
	if every <= 0 {
		every = DefaultProbeEvery
	}
	for _, s := range p.servers {
		f := &s.flights
		if !s.up.Load() {
			continue
		}
		if f.probeDue(now.UnixMilli(), every) {
			m.loops.Go(func() { m.probe(s, now.UnixMilli(), probeTimeout(every)) })
		}
		if since, noProbe := f.stalledSince(now, m.cfg.StallAfter); since != 0 {
			m.openStall(s, since, noProbe)
		}
	}
	m.recoverStalls(p)
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

// recoverStalls closes the stall of each server of p that replied since
// it began: a recovered event, a message, its end in the run's stalls,
// and the requests waiting for a server woken.
func (m *monitor) recoverStalls(p *pool) {
	for _, s := range p.servers {
		f := &s.flights
		f.mu.Lock()
		st := f.stalled
		replied := int64(0)
		if st != nil {
			replied = f.wokeLocked(st)
			st.woke = replied
		}
		if replied == 0 {
			f.mu.Unlock()
			continue
		}
		f.stalled = nil
		f.mu.Unlock()
		d := roundDuration(time.UnixMilli(replied).Sub(time.UnixMilli(st.since)))
		m.event(replied, s.name, EventRecovered, fmt.Sprintf("replies again after %s without a reply; %d requests were held", d, st.held))
		m.ctl.logf("gen: %s replies again after %s stalled", s.name, d)
		p.wake()
	}
}

// openStall records s's stall, which began at since (noProbe: found by
// its probes, which it answered none of): its flight record as a stalled
// event, and a message. A stall found by Config.StallAfter probes the
// server first, to say whether it answers them.
func (m *monitor) openStall(s *server, since int64, noProbe bool) {
	st := &stall{since: since}
	if noProbe {
		s.flights.mu.Lock()
		pr := s.flights.probe
		s.flights.mu.Unlock()
		st.said = fmt.Sprintf("%d probes in a row from %s, none answered (the last: %s)", pr.failed, clock(pr.from), pr.said)
	} else {
		st.probes, st.said = m.probeServer(m.ctx, s, stallProbeTimeout)
	}
	now := time.Now() // after the probe
	held := s.flights.held()
	st.held = len(held)
	var v liveView
	if sc := m.scraper(s); sc != nil {
		v = sc.view()
	}
	s.flights.mu.Lock()
	s.flights.stalled = st
	errs := slices.Clone(s.flights.errs)
	lastAnswer := s.flights.lastAnswer
	s.flights.mu.Unlock()
	m.stalls.open(s, st)
	m.event(now.UnixMilli(), s.name, EventStalled, stallRecord(held, now, lastAnswer, errs, v, st.said))
	m.ctl.logf("%s", stallMessage(s.name, st, now))
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

// stalledCount returns how many of p's servers are up and stalled: the
// live lines count them out of the servers up.
func (p *pool) stalledCount() int {
	n := 0
	for _, s := range p.servers {
		s.flights.mu.Lock()
		if s.up.Load() && s.flights.stalled != nil {
			n++
		}
		s.flights.mu.Unlock()
	}
	return n
}

// wake wakes the requests waiting for a server (a stalled one replies
// again).
func (p *pool) wake() {
	p.mu.Lock()
	close(p.changed)
	p.changed = make(chan struct{})
	p.mu.Unlock()
}

// stallLog is the run's stalls, for its summary (stallSummary).
type stallLog struct {
	mu    sync.Mutex
	spans []loggedStall
}

type loggedStall struct {
	s  *server
	st *stall // its woke under s.flights.mu
}

func (l *stallLog) open(s *server, st *stall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.spans = append(l.spans, loggedStall{s, st})
}

// stallSpan is a stall as the summary says it: until is its first reply
// since it began (0: it lasts).
type stallSpan struct {
	server       string
	since, until int64 // Unix ms
	held         int
	probes       bool
}

// list returns the run's stalls, oldest first.
func (l *stallLog) list() []stallSpan {
	l.mu.Lock()
	spans := slices.Clone(l.spans)
	l.mu.Unlock()
	out := make([]stallSpan, 0, len(spans))
	for _, sp := range spans {
		f := &sp.s.flights
		f.mu.Lock()
		out = append(out, stallSpan{sp.s.name, sp.st.since, f.wokeLocked(sp.st), sp.st.held, sp.st.probes})
		f.mu.Unlock()
	}
	return out
}
