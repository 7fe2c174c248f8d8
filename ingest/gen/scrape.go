package gen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gendex/ingest/gen/servermetrics"
	"gendex/store"
)

// While gen runs, it reads each server's /metrics (SGLang serves them with
// --enable-metrics, ../shared/sglang-api.md §7; vLLM always; llama-server
// with --metrics) every Config.ScrapeEvery and stores one sample per server
// in the index (store.ServerSample): the server's own running and queued
// requests, KV use, cache hit rate, decode throughput, token counters and
// accept length, the same for every flavor (package servermetrics), beside gen's
// own count of the answers and tokens that server gave. `gendex query
// server` reads them back; `query events` the downs, ups and restarts
// (events.go).
//
// Scraping never touches the answers' path: each server has one goroutine,
// its own small HTTP transport (one connection, so it never waits for a
// slot in the answers' pool), a short timeout, and the samples go to one
// recorder goroutine that stores everything pending in one small
// transaction; producers only append to a list under a mutex.

// DefaultScrapeEvery is how often gen reads each server's /metrics.
const DefaultScrapeEvery = 5 * time.Second

// scrapeTimeout bounds one read of /metrics.
const scrapeTimeout = 2 * time.Second

// liveView is what the progress lines show of a server: its latest
// sample, and its generated tokens per second from its own counter over
// the last progressWindow (rateOK false: not known).
type liveView struct {
	sample  store.ServerSample
	taken   bool
	rate    float64
	rateOK  bool
	metrics bool // its /metrics answered at least once in this run
	// good is the last sample its /metrics answered (a stall's record).
	good store.ServerSample
}

// scraper reads one server's /metrics.
type scraper struct {
	m        *monitor
	s        *server
	url      string // with credentials, if any: never printed
	poke     chan struct{}
	lastSeen int64 // Unix ms; only the scraper's goroutine touches it
	// noMetrics: /metrics answered 404 or 501; it is not asked again until
	// the server comes back from a down (it may have been restarted with
	// --enable-metrics, or --metrics).
	noMetrics atomic.Bool
	// flavor is the server's, as its last /metrics answer (or refusal)
	// told; only the scraper's goroutine touches it.
	flavor store.Flavor
	// last is the last reading, for the ratios of counters over the
	// interval since; prev the last one while the server was up, for
	// telling a restart (a counter that went back, another start time).
	last, prev *servermetrics.Reading
	// stored is when a sample was last stored (Unix ms): readings taken
	// faster than the monitor's interval, while the limit moves, are
	// stored only when the limit changed.
	stored int64

	mu      sync.Mutex
	live    liveView
	history []counterPoint // the generated-tokens counter, last progressWindow
}

type counterPoint struct {
	at int64 // Unix ms
	v  float64
}

// loop reads the server's /metrics every interval, or faster while the
// governor holds or moves its limit (governor.readEvery), until ctx ends.
func (sc *scraper) loop(ctx context.Context, every time.Duration) {
	fast := false
	for {
		sc.scrape(ctx, fast)
		wait := every
		if d := sc.m.gov.readEvery(sc.s); d > 0 {
			wait = min(d, every)
		}
		fast = wait < every
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-sc.poke:
			t.Stop()
			fast = false
		}
	}
}

// wake asks for a reading now (the server came up).
func (sc *scraper) wake() {
	select {
	case sc.poke <- struct{}{}:
	default:
	}
}

// scrape takes one sample and hands it to the recorder; a fast one (read
// at adaptEvery, between two of the monitor's interval) only when the
// limit changed with it, or the interval has passed since the last stored.
func (sc *scraper) scrape(ctx context.Context, fast bool) {
	s, m := sc.s, sc.m
	smp := &store.ServerSample{Run: m.run}
	var cur *servermetrics.Reading
	if !sc.noMetrics.Load() {
		cctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
		r, err := servermetrics.Fetch(cctx, m.hc, sc.url, m.apiKey)
		cancel()
		var nm *servermetrics.NoMetricsError
		switch {
		case ctx.Err() != nil:
			return // the run ends: the last sample is the stop's
		case errors.As(err, &nm):
			sc.noMetrics.Store(true)
			sc.flavor = nm.Flavor
			what := fmt.Sprint(nm.Status)
			if nm.Flavor == store.FlavorLlamaCpp {
				what += " not_supported_error: llama-server"
			}
			m.ctl.once("nometrics "+s.name, "gen: %s has no /metrics (%s): its own view (running and queued requests, KV use, tokens/s) is unknown; %s to have it in 'gendex query server'", s.name, what, nm.Hint())
		case err != nil:
			var ne net.Error
			if !errors.As(err, &ne) && !strings.Contains(err.Error(), "connection refused") {
				m.ctl.once("scrapefail "+s.name+err.Error(), "gen: reading %s/metrics: %v (its metrics are unknown while this lasts)", s.name, err)
			}
		default:
			smp.Scraped = true
			r.Fill(sc.last, smp)
			cur, sc.last, sc.flavor = r, r, r.Flavor()
			if pool := r.PoolTokens(); pool > 0 { // vLLM's (cache_config_info)
				m.gov.stated(s, servermetrics.Stated{PoolTokens: pool}, time.Now().UnixMilli())
			}
			if r.Flavor() == store.FlavorOther {
				m.ctl.once("otherflavor "+s.name, "gen: %s/metrics has none of SGLang's (sglang:*), vLLM's (vllm:*) or llama.cpp's (llamacpp:*) metrics: its own view is unknown in 'gendex query server'", s.name)
			}
		}
	}
	now := time.Now()
	smp.Time = now.UnixMilli()
	smp.Up = s.up.Load()
	smp.Stalled = smp.Up && s.stalledNow()
	smp.NoMetrics = sc.noMetrics.Load()
	smp.Flavor = sc.flavor
	smp.ClientTokens, smp.ClientAnswers, smp.ClientUnknown = s.tokens.Load(), s.done.Load(), s.unknownTokens.Load()
	smp.ClientSpecTokens, smp.ClientSpecVerify = s.specTokens.Load(), s.specVerify.Load()
	smp.Retries, smp.InBackoff, smp.LastError, smp.LastErrorAt = s.retries.sample() // retries.go
	if smp.Scraped {
		sc.lastSeen = smp.Time
		if smp.Up {
			sc.checkRestart(smp.Time, cur)
		}
	}
	smp.LastSeen = sc.lastSeen
	limit := s.limit.Load()
	m.gov.observe(s, smp) // the limit follows the reading (limit.go); sets smp.Limit
	sc.remember(smp)
	// The index keeps one sample a second (its key): a fast one in the
	// second of the last stored would replace it, and the first sample's
	// counters (the run's baseline, before any answer) would be lost.
	newSecond := smp.Time/1000 != sc.stored/1000
	if !fast || newSecond && (smp.Time-sc.stored >= m.every.Milliseconds()*9/10 || s.limit.Load() != limit) {
		sc.stored = smp.Time
		m.add(pending{server: s.name, sample: smp})
	}
}

// checkRestart compares a reading taken at t (Unix ms) while the server
// is up with the last such reading (servermetrics' RestartedSince): a
// restart is an event, and the server's identity is read again
// (run.restartSeen). Readings taken while gen had the server down are
// not compared, so a restart is said after the server's up.
func (sc *scraper) checkRestart(t int64, cur *servermetrics.Reading) {
	prev := sc.prev
	sc.prev = cur
	if why := cur.RestartedSince(prev); why != "" {
		sc.m.event(t, sc.s.name, EventRestarted, why)
		if sc.m.restarted != nil {
			sc.m.restarted(sc.s, why) // run.restartSeen, identity.go
		}
	}
}

// remember keeps smp for the live lines, and the generated-tokens counter
// of the last progressWindow for the server's tokens/s.
func (sc *scraper) remember(smp *store.ServerSample) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.live.sample, sc.live.taken = *smp, true
	if smp.Scraped {
		sc.live.metrics, sc.live.good = true, *smp
	}
	if v, ok := smp.Get(store.MetricGenTokens); ok {
		sc.history = append(sc.history, counterPoint{smp.Time, v})
	}
	cut := smp.Time - progressWindow.Milliseconds()
	for len(sc.history) > 2 && sc.history[0].at < cut {
		sc.history = sc.history[1:]
	}
	sc.live.rateOK = false
	if n := len(sc.history); n >= 2 && sc.history[n-1].at == smp.Time {
		var inc float64
		for i := 1; i < n; i++ {
			inc += counterIncrease(sc.history[i-1].v, sc.history[i].v)
		}
		if secs := float64(sc.history[n-1].at-sc.history[0].at) / 1000; secs > 0 {
			sc.live.rate, sc.live.rateOK = inc/secs, true
		}
	}
}

// counterIncrease is a counter's increase from a to b: b − a, or b when b
// is lower (the server restarted and counts from 0 again).
func counterIncrease(a, b float64) float64 {
	if b < a {
		return b
	}
	return b - a
}

func (sc *scraper) view() liveView {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.live
}

// pending is a sample or an event waiting to be stored.
type pending struct {
	server string
	sample *store.ServerSample
	event  *store.Event
	run    *store.Run // the run's row (runstate.go)
}

// monitor is the run's state as the index and the log keep it: it scrapes
// the servers' /metrics, records the run's events (events.go), keeps the
// run's row (runstate.go) and finds stalls (stall.go). It reads the
// datasets' counts and the pool's servers and never changes them: it
// sends no request but its probes (/metrics; /health and /metrics of a
// server that holds requests and gives no reply, probe.go),
// writes no answer, and stores only samples, events and the run's row.
// Run builds it once the datasets are known (begin, end); connect gives
// it the pool (watch, track); the asker tells it of servers that change
// (serverChanged) and of bursts (bursts).
type monitor struct {
	ctl  *control
	cfg  *Config // read only
	db   *store.DB
	sets []*dsRun
	pool *pool // connect's (track); nil before
	// restarted is told of a server seen restarted, for its identity to
	// be read again (run.restartSeen); nil: nobody is.
	restarted func(s *server, why string)
	run       int64 // the run's start, Unix ms
	every     time.Duration
	hc        *http.Client
	apiKey    string

	ctx    context.Context
	cancel context.CancelFunc
	loops  sync.WaitGroup

	mu       sync.Mutex
	queue    []pending
	wake     chan struct{}
	recorder chan struct{} // closed when the recorder has stored all and ended
	closing  chan struct{}
	failed   atomic.Bool

	scrapers atomic.Pointer[map[*server]*scraper]
	gov      *governor // each server's limit, moved by the readings (limit.go); set by connect
	bursts   bursts
	row      runRow   // the run's row in the index (runstate.go)
	stalls   stallLog // the run's stalls, for its summary (stall.go)
}

// maxQueued bounds the samples waiting for the recorder (the index is
// stuck): older ones are dropped; events never are.
const maxQueued = 10000

// newMonitor makes the monitor of a run of cfg over sets, its recorder
// started; restarted is told of a server restarted (nil: nobody).
func newMonitor(ctl *control, cfg *Config, db *store.DB, sets []*dsRun, restarted func(*server, string)) *monitor {
	every := cfg.ScrapeEvery
	if every == 0 {
		every = DefaultScrapeEvery
	}
	m := &monitor{ctl: ctl, cfg: cfg, db: db, sets: sets, restarted: restarted, run: ctl.started.UnixMilli(), every: every, apiKey: cfg.APIKey,
		wake: make(chan struct{}, 1), recorder: make(chan struct{}), closing: make(chan struct{})}
	m.bursts.m = m
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.hc = &http.Client{Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: scrapeTimeout}).DialContext,
		MaxIdleConnsPerHost: 1,
		MaxConnsPerHost:     1,
		IdleConnTimeout:     4 * time.Second, // below SGLang's 5 s keep-alive
	}}
	go m.record()
	return m
}

// watch starts one scraper per server (none when scraping is off).
func (m *monitor) watch(servers []*server) {
	scs := map[*server]*scraper{}
	var last map[string]store.ServerSample
	m.db.View(func(v *store.View) error {
		last = map[string]store.ServerSample{}
		for _, s := range servers {
			if smp, ok, _ := v.LastServerSample(s.name); ok {
				last[s.name] = smp
			}
		}
		return nil
	})
	for _, s := range servers {
		u, err := servermetrics.URL(s.client().BaseURL)
		if err != nil {
			continue
		}
		sc := &scraper{m: m, s: s, url: u, poke: make(chan struct{}, 1), lastSeen: last[s.name].LastSeen}
		scs[s] = sc
	}
	m.scrapers.Store(&scs)
	if m.every < 0 {
		return
	}
	for _, sc := range scs {
		m.loops.Go(func() { sc.loop(m.ctx, m.every) })
	}
}

func (m *monitor) scraper(s *server) *scraper {
	if p := m.scrapers.Load(); p != nil {
		return (*p)[s]
	}
	return nil
}

// add queues p for the recorder; it never blocks.
func (m *monitor) add(p pending) {
	m.mu.Lock()
	if len(m.queue) >= maxQueued && p.sample != nil {
		m.mu.Unlock()
		return
	}
	m.queue = append(m.queue, p)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// record stores what is queued, in one transaction each time it wakes,
// until close.
func (m *monitor) record() {
	defer close(m.recorder)
	for {
		select {
		case <-m.wake:
			m.flush()
		case <-m.closing:
			m.flush()
			return
		}
	}
}

func (m *monitor) flush() {
	m.mu.Lock()
	q := m.queue
	m.queue = nil
	m.mu.Unlock()
	if len(q) == 0 {
		return
	}
	err := m.db.Update(func(tx *store.Tx) error {
		for _, p := range q {
			var err error
			switch {
			case p.sample != nil:
				err = tx.PutServerSample(p.server, p.sample)
			case p.run != nil:
				err = tx.PutRun(p.run)
			default:
				err = tx.AddEvent(p.event)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && m.failed.CompareAndSwap(false, true) {
		m.ctl.logf("gen: storing the servers' metrics and events: %v (they are left out; the answers are not affected)", err)
	}
}

// close stops the scrapers; after a run that ended by itself it reads each
// server up once more (so its series ends with the run), records the stop
// event and stores everything pending before it returns.
func (m *monitor) close(final bool, stop *store.Event) {
	m.cancel()
	m.loops.Wait()
	if m.pool != nil {
		m.recoverStalls(m.pool) // a reply since the tracker's last look
	}
	if p := m.scrapers.Load(); p != nil && final && m.every >= 0 {
		var wg sync.WaitGroup
		for _, sc := range *p {
			if sc.s.up.Load() {
				wg.Go(func() { sc.scrape(context.Background(), false) })
			}
		}
		wg.Wait()
	}
	m.bursts.flushAll()
	m.gov.flush()
	if stop != nil {
		stop.Time = time.Now().UnixMilli()
		m.add(pending{event: stop})
	}
	close(m.closing)
	<-m.recorder
}

// serverLines are the progress lines of the servers, one each, when gen
// reads their /metrics: up or down, the server's running and queued
// requests, its KV use and the tokens/s its own counter gives over the
// last progressWindow, each when known.
func (m *monitor) serverLines(now time.Time) []string {
	if m == nil || m.every < 0 || m.pool == nil {
		return nil
	}
	var lines []string
	for _, s := range m.pool.servers {
		sc := m.scraper(s)
		if sc == nil {
			continue
		}
		state := stallState(s, now) // stall.go
		if state == "" || !s.up.Load() {
			v := sc.view()
			state = serverState(s, v, now)
			if m.gov.state(s) != nil && s.up.Load() && v.sample.Limit > 0 {
				state += fmt.Sprintf("; gen's limit %d", v.sample.Limit) // adaptive (limit.go)
			}
		}
		lines = append(lines, "  server "+s.name+": "+state)
	}
	return lines
}

func serverState(s *server, v liveView, now time.Time) string {
	if !s.up.Load() {
		return "down " + now.Sub(time.UnixMilli(s.downAt.Load())).Round(time.Second).String()
	}
	switch {
	case v.sample.NoMetrics && v.sample.Flavor == store.FlavorLlamaCpp:
		return "up, its metrics unknown (no /metrics: start llama-server with --metrics)"
	case v.sample.NoMetrics:
		return "up, its metrics unknown (no /metrics: start it with --enable-metrics)"
	case !v.taken || !v.metrics:
		return "up, metrics not read yet"
	case !v.sample.Scraped:
		return "up, /metrics did not answer the last time"
	case v.sample.Flavor == store.FlavorOther:
		return "up, its metrics unknown (its /metrics has no sglang:, vllm: or llamacpp: names)"
	}
	parts := []string{"up"}
	num := func(m store.Metric, format string) {
		if x, ok := v.sample.Get(m); ok {
			parts = append(parts, fmt.Sprintf(format, x))
		}
	}
	num(store.MetricRunning, "%.0f running")
	num(store.MetricQueued, "%.0f queued")
	if x, ok := v.sample.Get(store.MetricTokenUsage); ok {
		parts = append(parts, fmt.Sprintf("KV %.0f%% used", 100*x))
	} else {
		parts = append(parts, "KV use unknown")
	}
	if v.rateOK {
		parts = append(parts, fmt.Sprintf("%.0f tokens/s (its count, last %s)", v.rate, progressWindow))
	}
	return strings.Join(parts, ", ")
}

// syncWriter serializes writes to w: the log is written from the
// scrapers' goroutines as well as the run's.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
