package gen

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"gendex/ingest/gen/servermetrics"
	"gendex/store"
)

// governor keeps each server's limit on gen's requests in flight on it
// (server.limit; pool.pick honours it) when the run's concurrency is
// adaptive (no --concurrency): it holds every server at holdLimit until
// its first reading, starts it there at the capacity it states (SGLang's
// max_running_requests and KV pool, vLLM's pool: limitRule.start, with
// the run's requests' size) or AdaptiveStart, and moves it after each look
// at the server's own /metrics by limitRule (limitrule.go); a server with
// no /metrics (or a run that reads none) keeps DefaultConcurrency, said
// once. Under a given --concurrency it sets no limit: the slots bound all.
// It records a limit event per change that matters (steps in a row folded
// into one) and says in the log the capacity first found for each server.
//
// Its only inputs are the scraper's samples (scrape.go calls observe, from
// each server's one scraper goroutine, so a server's state is only ever
// touched by that goroutine) and what SGLang states; it changes nothing but
// the limits, never the counts in flight or the slots, and sends nothing.
type governor struct {
	ctl      *control
	pool     *pool
	adaptive bool
	bound    int // the run's slots: no limit goes past it
	// reqTokens is the tokens the server reserves for one of the run's
	// requests besides its prompt (--max-new-tokens; 0: unknown).
	reqTokens int
	// prompts counts the run's prompts sent as token ids (the asker's;
	// nil: none are counted).
	prompts *promptTally
	// event records an event (the monitor's); nil: none are.
	event  func(t int64, server, name, detail string)
	states map[*server]*governed
}

// DefaultConcurrency is the limit of a server gen has no signal from:
// --concurrency's old default.
const DefaultConcurrency = 128

// AdaptiveStart is the first limit of a server that states no capacity,
// from its first reading until its /metrics move it: low, for a server
// that admits greedily (vLLM) preempts past its KV pool, and doubling
// with room reaches thousands in a few readings.
const AdaptiveStart = 32

// holdLimit is every server's limit under an adaptive concurrency until
// its first reading with gen's requests on it (begin): what it states is
// not known before, nor the size of the run's requests (their prompts are
// counted as they are fed, or read from the server's KV use), and the
// first reading's counters (preemptions) are the baseline of the next.
// It is read every holdEvery meanwhile, and holds no more than
// maxHoldReadings readings.
const (
	holdLimit       = minLimit
	holdEvery       = 50 * time.Millisecond
	maxHoldReadings = 5
)

// MaxAdaptive is the most requests in flight an adaptive run keeps, over
// all servers (no more than the open-file limit allows: AdaptiveBound).
const MaxAdaptive = 4096

// adaptEvery is how often a server's /metrics is read while its limit
// moves, growEvery while it grows before its first cut (doubling: its
// capacity is far off, and every reading without growth is time the
// server runs below it); settleReadings readings in a row without a
// change settle it, and the reads go back to Config.ScrapeEvery.
const (
	adaptEvery     = 250 * time.Millisecond
	growEvery      = 100 * time.Millisecond
	settleReadings = 4
)

// governed is one server's state in the governor.
type governed struct {
	rule *limitRule
	// fixed: the server gives no signal; its limit is DefaultConcurrency.
	fixed bool
	calm  int   // readings in a row without a change
	last  int64 // Unix ms of the last reading
	fold  limitFold
	found bool // its capacity was said in the log
	// started: its first limit was set (begin); held counts the readings
	// before.
	started bool
	held    int
	// stated is what it states of its capacity: SGLang's /server_info,
	// vLLM's pool in its /metrics.
	stated servermetrics.Stated
	// infoSeen is the server's serverInfo last read for what it states.
	infoSeen *[]byte
	// promptKV is a prompt's tokens as its first reading with requests
	// running showed them (KV held per running request; 0: none yet).
	promptKV int
}

// limitFold is a run of changes in one direction, recorded as one event
// once the limit settles (or turns).
type limitFold struct {
	open     bool
	at       int64
	from, to int
	why      string
}

// AdaptiveBound is the most requests in flight an adaptive run keeps:
// MaxAdaptive, or fewer when the open-file limit leaves fewer (three file
// descriptors a request, as the listeners' reserve counts them, beyond
// FDReserve), never below DefaultConcurrency.
func AdaptiveBound() int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return MaxAdaptive
	}
	return adaptiveBound(lim.Cur)
}

// FDReserve is how many file descriptors gen keeps for its own files
// beyond its requests in flight: the listeners' reserve, as
// query/guard.DefaultReserve counts it (ingest imports nothing of query's;
// the root's TestFDReserveAgrees keeps the two one number).
const FDReserve = 256

func adaptiveBound(nofile uint64) int {
	free := int64(min(nofile, 1<<30)) - FDReserve
	return int(min(max(free/3, DefaultConcurrency), MaxAdaptive))
}

// newGovernor sets the first limits of p's servers for cfg; reads says
// the servers' /metrics are read (the monitor scrapes).
func newGovernor(ctl *control, cfg *Config, p *pool, reads bool) *governor {
	g := &governor{ctl: ctl, pool: p, adaptive: cfg.adaptive, bound: cfg.Concurrency, states: map[*server]*governed{}}
	if !g.adaptive {
		return g
	}
	if n := cfg.Sampling.MaxNewTokens; n != nil && *n > 0 {
		g.reqTokens = *n
	}
	start := holdLimit
	if !reads {
		start = DefaultConcurrency
	}
	for _, s := range p.servers {
		st := &governed{rule: newLimitRule(start, g.bound), fixed: !reads}
		st.rule.slow.timeout = cfg.RequestTimeout.Seconds()
		g.states[s] = st
		p.setLimit(s, int64(st.rule.limit))
	}
	if !reads {
		ctl.logf("gen: --scrape-every 0 reads no /metrics: %d requests at once a server", min(DefaultConcurrency, g.bound))
	}
	return g
}

// fast reports whether s's /metrics should be read at adaptEvery: its
// limit is moving.
func (g *governor) fast(s *server) bool {
	st := g.state(s)
	return st != nil && !st.fixed && st.calm < settleReadings && s.up.Load()
}

func (g *governor) state(s *server) *governed {
	if g == nil || !g.adaptive {
		return nil
	}
	return g.states[s]
}

// observe moves s's limit by smp, a reading of its /metrics (scrape.go),
// and sets the sample's Limit and InFlight.
func (g *governor) observe(s *server, smp *store.ServerSample) {
	if g == nil {
		return
	}
	defer func() {
		smp.Limit, smp.InFlight = g.limitOf(s), s.inFlight.Load()
	}()
	st := g.state(s)
	if st == nil || !smp.Up {
		return
	}
	g.learned(s, st, smp.Time)
	_, hasQueue := smp.Get(store.MetricQueued)
	if smp.NoMetrics || smp.Scraped && !hasQueue {
		g.noSignal(s, st, smp)
		return
	}
	if !st.started && g.ready(s, st, smp) {
		g.begin(s, st, smp)
	}
	if !smp.Scraped {
		return // no reading this time: nothing to go by
	}
	st.fixed = false
	rd := limitReading{inFlight: int(s.inFlight.Load())}
	rd.running, rd.hasRunning = smp.Get(store.MetricRunning)
	rd.queued, rd.hasQueued = smp.Get(store.MetricQueued)
	rd.kv, rd.hasKV = smp.Get(store.MetricTokenUsage)
	rd.preemptions, rd.hasPreemptions = smp.Get(store.MetricPreemptions)
	if st.last > 0 {
		rd.secs = float64(smp.Time-st.last) / 1000
	}
	rd.perRequest = g.facts(s, st, smp).perRequest()
	rd.at, rd.answers, rd.tokens = smp.Time, float64(s.done.Load()), float64(s.tokens.Load())
	s.flights.mu.Lock()
	rd.answeredAt = s.flights.lastAnswer // at or after the answers counted
	s.flights.mu.Unlock()
	st.last = smp.Time
	from := st.rule.limit
	to, why := st.rule.next(rd)
	g.apply(s, st, smp.Time, from, to, why)
}

// learned passes on what s states of its capacity in what learn last read
// of it (server.serverInfo), when that is new: at its start, and after a
// restart (learn reads it again whenever s comes back or restarts).
func (g *governor) learned(s *server, st *governed, at int64) {
	p := s.serverInfo.Load()
	if p == nil || p == st.infoSeen {
		return
	}
	st.infoSeen = p
	if c, err := servermetrics.CapacityOf(*p); err == nil {
		g.stated(s, c, at)
	}
}

// stated records what s states of its capacity (SGLang's /server_info;
// vLLM's pool, from each reading) and, once s has started and what it
// states changed (a restart with other flags), starts it there again.
func (g *governor) stated(s *server, c servermetrics.Stated, at int64) {
	st := g.state(s)
	if st == nil || c == st.stated {
		return
	}
	st.stated = c
	if !st.started || st.fixed {
		return
	}
	from := st.rule.limit
	to, why := st.rule.start(g.facts(s, st, nil))
	g.apply(s, st, at, from, to, why)
	g.record(s, st) // a start is its own event: growth after it is not folded in
}

// readEvery is how often s's /metrics should be read now: holdEvery while
// it is held, growEvery while it grows before its first cut or a probe for
// slow answers is under way, adaptEvery while its limit moves; 0: at the
// monitor's interval.
func (g *governor) readEvery(s *server) time.Duration {
	switch st := g.state(s); {
	case g.held(s):
		return holdEvery
	case st != nil && st.rule.slow.probing() && s.up.Load():
		return growEvery // its windows want many readings
	case !g.fast(s):
		return 0
	case !st.rule.cut && st.rule.limit < g.bound:
		return growEvery
	}
	return adaptEvery
}

// held reports whether s is held at holdLimit before its start.
func (g *governor) held(s *server) bool {
	st := g.state(s)
	return st != nil && !st.fixed && !st.started && s.up.Load()
}

// ready reports whether s may start at smp, a reading of it while held:
// one that shows gen's requests (their prompts counted when fed as ids,
// else held in its KV), a failed one (nothing more will be told soon),
// or the last one it is held for.
func (g *governor) ready(s *server, st *governed, smp *store.ServerSample) bool {
	st.held++
	run, _ := smp.Get(store.MetricRunning)
	shows := s.inFlight.Load() > 0 && (g.prompts.mean() > 0 || run >= 1)
	return shows || !smp.Scraped || st.held >= maxHoldReadings
}

// begin sets s's first limit at its first reading smp (one that failed
// too): what it states, with the run's requests' size, else
// AdaptiveStart (no event: nothing was learned).
func (g *governor) begin(s *server, st *governed, smp *store.ServerSample) {
	st.started = true
	from := st.rule.limit
	to, why := st.rule.start(g.facts(s, st, smp))
	if why == "" {
		g.pool.setLimit(s, int64(to))
		return
	}
	g.apply(s, st, smp.Time, from, to, why)
	g.record(s, st) // a start is its own event: growth after it is not folded in
}

// facts is what sets s's limit from its pool: what it states, and the
// size of the run's requests as gen knows it now. A prompt's tokens are
// the mean of those gen sent as token ids, else what the server holds per
// running request in smp (its KV use of its pool: the prompts and a few
// tokens of output); an answer's are --max-new-tokens, or, once gen has
// many answers from s (the first are the short ones), their mean and a
// quarter (within --max-new-tokens).
func (g *governor) facts(s *server, st *governed, smp *store.ServerSample) startFacts {
	f := startFacts{running: st.stated.Running, poolTokens: st.stated.PoolTokens, outTokens: g.reqTokens}
	if smp != nil {
		f.preempts = smp.Flavor == store.FlavorVLLM
	} else {
		f.preempts = st.rule.preempts
	}
	f.promptTokens = g.prompts.mean()
	if f.promptTokens == 0 && st.promptKV == 0 && smp != nil && f.poolTokens > 0 {
		run, ok1 := smp.Get(store.MetricRunning)
		kv, ok2 := smp.Get(store.MetricTokenUsage)
		if ok1 && ok2 && run >= 1 {
			st.promptKV = int(kv * float64(f.poolTokens) / run) // later, the answers so far would count
		}
	}
	if f.promptTokens == 0 {
		f.promptTokens = st.promptKV
	}
	// The first answers are the short ones: their mean counts once many
	// more than were in flight at once have come.
	if n := s.done.Load() - s.unknownTokens.Load(); n >= max(4*int64(st.rule.limit), answersToTrust) {
		out := int(s.tokens.Load()/n) * 5 / 4
		if f.outTokens == 0 || out < f.outTokens {
			f.outTokens = max(out, 1)
		}
	}
	return f
}

// apply sets s's limit to to when it changed, folding the change into the
// event open, and records that event once the limit settles or turns. A
// reading without a change counts toward settling only while gen presses
// on the limit (half of it in flight: one taken before the requests
// start, or in a lull, says nothing of it) and the rule waits for no
// second reading (a long queue, preemptions).
func (g *governor) apply(s *server, st *governed, at int64, from, to int, why string) {
	if to == from || why == "" {
		if !st.fixed && (2*s.inFlight.Load() < int64(from) || st.rule.pending()) {
			return
		}
		st.calm++
		if st.calm == settleReadings {
			g.settled(s, st)
		}
		return
	}
	st.calm = 0
	g.pool.setLimit(s, int64(to))
	f := &st.fold
	if f.open && (to > from) != (f.to > f.from) {
		g.record(s, st) // it turned: the run before is one event
	}
	if !f.open {
		*f = limitFold{open: true, at: at, from: from}
	}
	f.to, f.why = to, why
}

// settled records the folded change of s, and says the first capacity
// found in the log.
func (g *governor) settled(s *server, st *governed) {
	g.record(s, st)
	if !st.found && st.rule.cut && !st.rule.slow.probing() { // a probe's half is no capacity
		st.found = true
		g.ctl.logf("gen: %s: capacity %d requests at once (from its /metrics)", s.name, st.rule.limit)
	}
}

// record records the folded change of s as one event, when it matters
// (an eighth of the limit, or 2 requests, at least).
func (g *governor) record(s *server, st *governed) {
	f := st.fold
	st.fold = limitFold{}
	if !f.open || g.event == nil {
		return
	}
	if d := f.to - f.from; max(d, -d) >= max(2, f.from/8) {
		g.event(f.at, s.name, EventLimit, fmt.Sprintf("%d -> %d: %s", f.from, f.to, f.why))
	}
}

// noSignal keeps s at DefaultConcurrency, or at the requests it states it
// runs at once and a small queue (llama.cpp's total_slots): it has no
// /metrics, or none with a queue (said once for each limit).
func (g *governor) noSignal(s *server, st *governed, smp *store.ServerSample) {
	fixed, stated := min(DefaultConcurrency, g.bound), ""
	if n := st.stated.Running; n > 0 { // llama.cpp's total_slots, SGLang's slots
		fixed = min(n+queueKeep(n), g.bound)
		stated = fmt.Sprintf(" (the %d it runs at once, as it states, and a queue)", n)
	}
	switch {
	case st.last == 0 && !st.fold.open: // its first word: the start was a guess, no change
		st.fixed, st.rule = true, newLimitRule(fixed, g.bound)
		g.pool.setLimit(s, int64(fixed))
	case !st.fixed || st.rule.limit != fixed:
		from := st.rule.limit
		st.fixed, st.rule = true, newLimitRule(fixed, g.bound)
		g.apply(s, st, smp.Time, from, fixed, "no signal (no queue in its /metrics)")
	}
	what := "no queue in its /metrics"
	if smp.NoMetrics {
		what = "no /metrics"
	}
	g.ctl.once(fmt.Sprint("fixed limit ", s.name, fixed), "gen: %s: %s: %d requests at once%s", s.name, what, fixed, stated)
}

// limitOf is s's limit as a sample keeps it: its own, or its share of
// --concurrency.
func (g *governor) limitOf(s *server) int64 {
	if lim := s.limit.Load(); lim > 0 {
		return lim
	}
	n := int64(max(len(g.pool.servers), 1))
	return (int64(g.bound) + n - 1) / n
}

// flush records the changes still folded (the run ends).
func (g *governor) flush() {
	if g == nil {
		return
	}
	for s, st := range g.states {
		g.record(s, st)
	}
}

// answersToTrust is the fewest answers whose mean length sizes a request
// (and four times the limit).
const answersToTrust = 256

// promptTally counts the prompts sent as token ids and their tokens; safe
// for concurrent use, and a nil one counts none.
type promptTally struct{ n, tokens atomic.Int64 }

// note counts a prompt of ids token ids (none: one not sent as ids).
func (t *promptTally) note(ids int) {
	if ids > 0 {
		t.n.Add(1)
		t.tokens.Add(int64(ids))
	}
}

// mean is the prompts' mean tokens (0: none counted).
func (t *promptTally) mean() int {
	if t == nil {
		return 0
	}
	n := t.n.Load()
	if n == 0 {
		return 0
	}
	return int((t.tokens.Load() + n - 1) / n)
}
