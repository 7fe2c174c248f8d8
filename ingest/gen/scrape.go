package gen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gendex/store"
)

// While gen runs, it reads each server's /metrics (SGLang serves them with
// --enable-metrics; ../shared/sglang-api.md §7) every Config.ScrapeEvery
// and stores one sample per server in the index (store.ServerSample):
// the server's own running and queued requests, KV use, cache hit rate,
// decode throughput, token counters and accept length, beside gen's own
// count of the answers and tokens that server gave. `gendex query server`
// reads them back; `query events` the downs, ups and restarts (events.go).
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

// maxMetricsBody bounds what is read of one /metrics answer (SGLang's, with
// its histograms for every rank, is some hundreds of KB).
const maxMetricsBody = 16 << 20

// promSample is one sample line of the Prometheus text format.
type promSample struct {
	name   string
	labels []promLabel
	value  float64
}

type promLabel struct{ name, value string }

func (s *promSample) label(name string) (string, bool) {
	for _, l := range s.labels {
		if l.name == name {
			return l.value, true
		}
	}
	return "", false
}

// parseProm reads the Prometheus text exposition format (version 0.0.4,
// and the OpenMetrics lines SGLang's Python client writes): every sample
// line's name, labels and value. Comments (# HELP, # TYPE, # EOF) and
// blank lines are skipped; histogram and summary samples (_bucket, _sum,
// _count) come back as samples of those names, for the caller to ignore.
// Label values are unescaped (\\, \" and \n). A line that does not parse
// is skipped and counted in bad. keep, when set, says which names to
// read: the lines of other names are skipped after their name.
func parseProm(text []byte, keep func(name string) bool) (samples []promSample, bad int) {
	for len(text) > 0 {
		var line []byte
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			line, text = text, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if keep != nil {
			n := 0
			for n < len(line) && isNameByte(line[n], n == 0) {
				n++
			}
			if n > 0 && !keep(string(line[:n])) {
				continue
			}
		}
		s, ok := parsePromLine(string(line))
		if !ok {
			bad++
			continue
		}
		samples = append(samples, s)
	}
	return samples, bad
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// parsePromLine reads `name{label="value",...} value [timestamp]`.
func parsePromLine(line string) (promSample, bool) {
	var s promSample
	i := 0
	for i < len(line) && isNameByte(line[i], i == 0) {
		i++
	}
	if i == 0 {
		return s, false
	}
	s.name, line = line[:i], line[i:]
	line = strings.TrimLeft(line, " \t")
	if strings.HasPrefix(line, "{") {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " \t")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			j := 0
			for j < len(line) && isNameByte(line[j], j == 0) {
				j++
			}
			if j == 0 {
				return s, false
			}
			name := line[:j]
			line = strings.TrimLeft(line[j:], " \t")
			if !strings.HasPrefix(line, "=") {
				return s, false
			}
			line = strings.TrimLeft(line[1:], " \t")
			if !strings.HasPrefix(line, `"`) {
				return s, false
			}
			var val strings.Builder
			j = 1
			closed := false
			for j < len(line) {
				c := line[j]
				if c == '"' {
					closed = true
					j++
					break
				}
				if c == '\\' && j+1 < len(line) {
					j++
					switch line[j] {
					case 'n':
						val.WriteByte('\n')
					case '\\', '"':
						val.WriteByte(line[j])
					default: // not an escape the format defines: keep it as written
						val.WriteByte('\\')
						val.WriteByte(line[j])
					}
					j++
					continue
				}
				val.WriteByte(c)
				j++
			}
			if !closed {
				return s, false
			}
			s.labels = append(s.labels, promLabel{name, val.String()})
			line = strings.TrimLeft(line[j:], " \t")
			if strings.HasPrefix(line, ",") {
				line = line[1:]
			} else if !strings.HasPrefix(line, "}") {
				return s, false
			}
		}
	}
	fields := strings.Fields(line)
	if len(fields) == 0 || len(fields) > 2 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, false
	}
	s.value = v
	return s, true
}

// How each metric is combined over the ranks of one server. A series'
// labels other than tp_rank, pp_rank and moe_ep_rank name one scheduler
// (its dp_rank, when the server runs data-parallel) or one tokenizer
// process; the ranks inside it are the same scheduler seen from each GPU
// of its tensor/pipeline/expert group, so they repeat one value (by
// default only tp_rank 0 reports; --enable-metrics-for-all-schedulers
// makes every rank report the same numbers). So: within such a group the
// lowest rank's value is taken, never a sum; across groups (dp ranks),
// per metric:
//   - requests running and queued, decode throughput and the token and
//     request counters are summed: each dp rank serves its own requests;
//   - token usage, cache hit rate and accept length are averaged: each is
//     a ratio of a dp rank's own pool or requests, and the dp ranks are
//     replicas of one size, so the mean is the server's ratio (for token
//     usage exactly; for the rates, weighted by no count /metrics gives);
//   - the process start time is the latest: any later start is a restart.
type combine uint8

const (
	combineSum combine = iota
	combineMean
	combineMax
)

var scrapedMetrics = map[string]struct {
	m   store.Metric
	how combine
}{
	"sglang:num_running_reqs":        {store.MetricRunning, combineSum},
	"sglang:num_queue_reqs":          {store.MetricQueued, combineSum},
	"sglang:token_usage":             {store.MetricTokenUsage, combineMean},
	"sglang:cache_hit_rate":          {store.MetricCacheHitRate, combineMean},
	"sglang:gen_throughput":          {store.MetricGenThroughput, combineSum},
	"sglang:generation_tokens_total": {store.MetricGenTokens, combineSum},
	"sglang:prompt_tokens_total":     {store.MetricPromptTokens, combineSum},
	"sglang:spec_accept_length":      {store.MetricAcceptLength, combineMean},
	"sglang:num_requests_total":      {store.MetricRequests, combineSum},
	"process_start_time_seconds":     {store.MetricStartTime, combineMax},
}

// rankLabels are the labels of the GPUs that one scheduler spans.
var rankLabels = []string{"tp_rank", "pp_rank", "moe_ep_rank"}

// readMetrics fills s with the server's metrics from its /metrics samples,
// combined over its ranks (see combine). A metric the server does not
// report stays unknown in s.
func readMetrics(samples []promSample, s *store.ServerSample) {
	type pick struct {
		rank  [3]int64
		value float64
	}
	groups := map[string]map[string]pick{} // metric name -> group -> lowest rank's value
	for i := range samples {
		p := &samples[i]
		if _, ok := scrapedMetrics[p.name]; !ok {
			continue
		}
		var key strings.Builder
		var rank [3]int64
		labels := slices.Clone(p.labels)
		slices.SortFunc(labels, func(a, b promLabel) int { return strings.Compare(a.name, b.name) })
		for _, l := range labels {
			if r := slices.Index(rankLabels, l.name); r >= 0 {
				n, err := strconv.ParseInt(l.value, 10, 64)
				if err != nil {
					n = math.MaxInt64
				}
				rank[r] = n
				continue
			}
			key.WriteString(l.name)
			key.WriteByte('=')
			key.WriteString(strconv.Quote(l.value))
			key.WriteByte(',')
		}
		g := groups[p.name]
		if g == nil {
			g = map[string]pick{}
			groups[p.name] = g
		}
		k := key.String()
		if old, ok := g[k]; !ok || slices.Compare(rank[:], old.rank[:]) < 0 {
			g[k] = pick{rank, p.value}
		}
	}
	for name, g := range groups {
		how := scrapedMetrics[name]
		var v float64
		for k, p := range g {
			if math.IsNaN(p.value) || math.IsInf(p.value, 0) {
				delete(g, k) // that scheduler has no value (NaN: nothing to measure yet)
				continue
			}
			switch how.how {
			case combineMax:
				v = max(v, p.value)
			default:
				v += p.value
			}
		}
		if len(g) == 0 {
			continue
		}
		if how.how == combineMean {
			v /= float64(len(g))
		}
		s.Set(how.m, v)
	}
}

// metricsURL is base's /metrics, keeping base's query string (which may
// carry credentials: it is never printed).
func metricsURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/metrics"
	u.RawPath = ""
	return u.String(), nil
}

// errNoMetrics: /metrics answered 404.
var errNoMetrics = errors.New("no /metrics")

// fetchMetrics reads url's /metrics. Its errors never hold the URL (which
// may carry credentials).
func fetchMetrics(ctx context.Context, hc *http.Client, target, apiKey string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, errors.New("bad server URL")
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, errNoMetrics
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	case err != nil:
		return nil, err
	}
	samples, _ := parseProm(body, func(name string) bool { _, ok := scrapedMetrics[name]; return ok })
	return samples, nil
}

// liveView is what the progress lines show of a server: its latest
// sample, and its generated tokens per second from its own counter over
// the last progressWindow (rateOK false: not known).
type liveView struct {
	sample  store.ServerSample
	taken   bool
	rate    float64
	rateOK  bool
	metrics bool // its /metrics answered at least once in this run
}

// scraper reads one server's /metrics.
type scraper struct {
	m        *monitor
	s        *server
	url      string // with credentials, if any: never printed
	poke     chan struct{}
	lastSeen int64 // Unix ms; only the scraper's goroutine touches it
	// noMetrics: /metrics answered 404; it is not asked again until the
	// server comes back from a down (it may have been restarted with
	// --enable-metrics).
	noMetrics atomic.Bool
	// prev is the last reading while the server was up, for telling a
	// restart (a counter that went back, another start time).
	prev    store.ServerSample
	hasPrev bool

	mu      sync.Mutex
	live    liveView
	history []counterPoint // the generated-tokens counter, last progressWindow
}

type counterPoint struct {
	at int64 // Unix ms
	v  float64
}

func (sc *scraper) loop(ctx context.Context, every time.Duration) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		sc.scrape(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-sc.poke:
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

// scrape takes one sample and hands it to the recorder.
func (sc *scraper) scrape(ctx context.Context) {
	s, m := sc.s, sc.m
	smp := &store.ServerSample{Run: m.run}
	if !sc.noMetrics.Load() {
		cctx, cancel := context.WithTimeout(ctx, scrapeTimeout)
		samples, err := fetchMetrics(cctx, m.hc, sc.url, m.apiKey)
		cancel()
		switch {
		case ctx.Err() != nil:
			return // the run ends: the last sample is the stop's
		case errors.Is(err, errNoMetrics):
			sc.noMetrics.Store(true)
			m.r.once("nometrics "+s.name, "gen: %s has no /metrics (404): its own view (running and queued requests, KV use, tokens/s) is unknown; start the server with --enable-metrics to have it in 'gendex query server'", s.name)
		case err != nil:
			var ne net.Error
			if !errors.As(err, &ne) && !strings.Contains(err.Error(), "connection refused") {
				m.r.once("scrapefail "+s.name+err.Error(), "gen: reading %s/metrics: %v (its metrics are unknown while this lasts)", s.name, err)
			}
		default:
			smp.Scraped = true
			readMetrics(samples, smp)
		}
	}
	now := time.Now()
	smp.Time = now.UnixMilli()
	smp.Up = s.up.Load()
	smp.NoMetrics = sc.noMetrics.Load()
	smp.ClientTokens, smp.ClientAnswers, smp.ClientUnknown = s.tokens.Load(), s.done.Load(), s.unknownTokens.Load()
	if smp.Scraped {
		sc.lastSeen = smp.Time
		if smp.Up {
			sc.checkRestart(smp)
		}
	}
	smp.LastSeen = sc.lastSeen
	sc.remember(smp)
	m.add(pending{server: s.name, sample: smp})
}

// checkRestart compares a reading taken while the server is up with the
// last such reading: a counter lower than before, or another process
// start time, is a restart. Readings taken while gen had the server down
// are not compared, so a restart is said after the server's up.
func (sc *scraper) checkRestart(cur *store.ServerSample) {
	defer func() { sc.prev, sc.hasPrev = *cur, true }()
	if !sc.hasPrev {
		return
	}
	for _, c := range []struct {
		m    store.Metric
		name string
	}{{store.MetricGenTokens, "sglang:generation_tokens_total"}, {store.MetricPromptTokens, "sglang:prompt_tokens_total"}, {store.MetricRequests, "sglang:num_requests_total"}} {
		was, ok1 := sc.prev.Get(c.m)
		now, ok2 := cur.Get(c.m)
		if ok1 && ok2 && now < was {
			sc.m.event(cur.Time, sc.s.name, EventRestarted, fmt.Sprintf("%s went back from %.0f to %.0f", c.name, was, now))
			return
		}
	}
	was, ok1 := sc.prev.Get(store.MetricStartTime)
	now, ok2 := cur.Get(store.MetricStartTime)
	if ok1 && ok2 && now != was {
		sc.m.event(cur.Time, sc.s.name, EventRestarted, fmt.Sprintf("its process start time changed from %s to %s",
			time.Unix(int64(was), 0).UTC().Format(time.RFC3339), time.Unix(int64(now), 0).UTC().Format(time.RFC3339)))
	}
}

// remember keeps smp for the live lines, and the generated-tokens counter
// of the last progressWindow for the server's tokens/s.
func (sc *scraper) remember(smp *store.ServerSample) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.live.sample, sc.live.taken = *smp, true
	if smp.Scraped {
		sc.live.metrics = true
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
}

// monitor scrapes the servers and records the run's events.
type monitor struct {
	r      *run
	run    int64 // the run's start, Unix ms
	every  time.Duration
	hc     *http.Client
	apiKey string

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
	bursts   bursts
}

// maxQueued bounds the samples waiting for the recorder (the index is
// stuck): older ones are dropped; events never are.
const maxQueued = 10000

func newMonitor(r *run) *monitor {
	every := r.cfg.ScrapeEvery
	if every == 0 {
		every = DefaultScrapeEvery
	}
	m := &monitor{r: r, run: r.started.UnixMilli(), every: every, apiKey: r.cfg.APIKey,
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
	m.r.db.View(func(v *store.View) error {
		last = map[string]store.ServerSample{}
		for _, s := range servers {
			if smp, ok, _ := v.LastServerSample(s.name); ok {
				last[s.name] = smp
			}
		}
		return nil
	})
	for _, s := range servers {
		u, err := metricsURL(s.client().BaseURL)
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
	err := m.r.db.Update(func(tx *store.Tx) error {
		for _, p := range q {
			var err error
			if p.sample != nil {
				err = tx.PutServerSample(p.server, p.sample)
			} else {
				err = tx.AddEvent(p.event)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil && m.failed.CompareAndSwap(false, true) {
		m.r.logf("gen: storing the servers' metrics and events: %v (they are left out; the answers are not affected)", err)
	}
}

// close stops the scrapers; after a run that ended by itself it reads each
// server up once more (so its series ends with the run), records the stop
// event and stores everything pending before it returns.
func (m *monitor) close(final bool, stop *store.Event) {
	m.cancel()
	m.loops.Wait()
	if p := m.scrapers.Load(); p != nil && final && m.every >= 0 {
		var wg sync.WaitGroup
		for _, sc := range *p {
			if sc.s.up.Load() {
				wg.Go(func() { sc.scrape(context.Background()) })
			}
		}
		wg.Wait()
	}
	m.bursts.flushAll()
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
func (r *run) serverLines(now time.Time) []string {
	if r.mon == nil || r.mon.every < 0 || r.pool == nil {
		return nil
	}
	var lines []string
	for _, s := range r.pool.servers {
		sc := r.mon.scraper(s)
		if sc == nil {
			continue
		}
		lines = append(lines, "  server "+s.name+": "+serverState(s, sc.view(), now))
	}
	return lines
}

func serverState(s *server, v liveView, now time.Time) string {
	if !s.up.Load() {
		return "down " + now.Sub(time.UnixMilli(s.downAt.Load())).Round(time.Second).String()
	}
	switch {
	case v.sample.NoMetrics:
		return "up, its metrics unknown (no /metrics: start it with --enable-metrics)"
	case !v.taken || !v.metrics:
		return "up, metrics not read yet"
	case !v.sample.Scraped:
		return "up, /metrics did not answer the last time"
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
