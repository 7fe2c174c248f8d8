package sim

import (
	"sync"
	"sync/atomic"
	"time"
)

// meters is the metrics part: every counter and gauge the server keeps
// (requests and their outcomes, tokens, the per-second load, the flavor
// counters and latency histograms) and the pages that show them: Stats,
// each flavor's /metrics (metrics_pages.go) and SGLang's /server_info.
//
// Others only report to it: faults counts requests as they arrive and end
// (began, ended, aborted), the engine marks items holding KV cache and
// records finished ones (decoding, decoded, record). meters reads the
// engine's slot pool for its snapshot, never takes or frees a slot, and
// decides nothing about a request.
type meters struct {
	cfg     Config
	slots   *slotPool // the engine's; read for Running, Queued and occupancy
	batch   *batcher  // the knee scheduler, or nil; read for its queue and pool
	created int64     // unix seconds, for /v1/models and llama.cpp's start header
	// startedAt is when the server started, as prometheus_client's process
	// collector gives it (process_start_time_seconds: Unix seconds, to the
	// clock tick, 0.01 s).
	startedAt float64

	counts counters
	load   load // what the scheduler gauges of /metrics report
	fstats flavorStats
}

// counters are the live statistics behind Stats.
type counters struct {
	requests, completed, errors, resets, aborts, canceled atomic.Int64
	inFlight, maxInFlight                                 atomic.Int64
	generated, promptTokens, items                        atomic.Int64
}

// newMeters returns the meters of a server started at now.
func newMeters(cfg Config, slots *slotPool, batch *batcher, now time.Time) *meters {
	return &meters{cfg: cfg, slots: slots, batch: batch, created: now.Unix(), startedAt: float64(now.UnixMilli()/10) / 100}
}

// stats returns a snapshot of the counters.
func (m *meters) stats() Stats {
	p := m.slots.snapshot()
	c := &m.counts
	st := Stats{
		Requests:        c.requests.Load(),
		Completed:       c.completed.Load(),
		Errors:          c.errors.Load(),
		Resets:          c.resets.Load(),
		Aborts:          c.aborts.Load(),
		Canceled:        c.canceled.Load(),
		InFlight:        c.inFlight.Load(),
		MaxInFlight:     c.maxInFlight.Load(),
		Running:         int64(p.running),
		Queued:          int64(p.waiting),
		MaxRunning:      int64(p.maxRunning),
		BusySlotSeconds: p.busy,
		GeneratedTokens: c.generated.Load(),
		PromptTokens:    c.promptTokens.Load(),
	}
	if m.batch != nil {
		b := m.batch.snapshot()
		st.Queued = int64(b.queued)
		st.Preemptions, st.RecomputedTokens = b.preemptions, b.recomputed
		st.KVTokensHeld, st.StepTokens, st.StepSeconds = int64(b.held), b.decoded, b.clock.Seconds()
	}
	return st
}

// loadNow is what the scheduler gauges report now: under the knee
// scheduler the KV tokens are the batcher's pool.
func (m *meters) loadNow() loadSnapshot {
	ld := m.load.snapshot(time.Now(), m.cfg.DecodeTokensPerSec)
	if m.batch != nil {
		ld.usedTokens = int64(m.batch.snapshot().held)
	}
	return ld
}

// occupancy is the busy fraction of the slots per second (see
// Server.OccupancySeries).
func (m *meters) occupancy() []float64 { return m.slots.series() }

// began counts a generation request that arrived and is now in flight.
func (m *meters) began() {
	c := &m.counts
	c.requests.Add(1)
	n := c.inFlight.Add(1)
	for {
		old := c.maxInFlight.Load()
		if n <= old || c.maxInFlight.CompareAndSwap(old, n) {
			break
		}
	}
}

// ended counts a generation request's outcome; for a completed one it
// returns how many have completed, else 0.
func (m *meters) ended(o outcome) int64 {
	c := &m.counts
	c.inFlight.Add(-1)
	switch o {
	case outCompleted:
		return c.completed.Add(1)
	case outError:
		c.errors.Add(1)
	case outReset:
		c.resets.Add(1)
	case outCanceled:
		c.canceled.Add(1)
	}
	return 0
}

// aborted counts an item that finished with an abort.
func (m *meters) aborted() { m.counts.aborts.Add(1) }

// decoding marks it as holding KV cache from now on, decoding stop tokens.
func (m *meters) decoding(it *item, stop int) { m.load.start(it, stop) }

// decoded marks it as having released its KV cache.
func (m *meters) decoded(it *item) { m.load.stop(it) }

// record adds a finished item to the counters.
func (m *meters) record(it *item) {
	m.counts.generated.Add(int64(it.produced))
	if it.finish != nil && it.finish.kind != finishAbortStatus {
		m.counts.promptTokens.Add(int64(len(it.prompt)))
		m.counts.items.Add(1)
	}
	m.load.finished(time.Now(), it, it.spec(m.cfg.SpecDraftTokens))
	m.fstats.add(it, m.cfg.SpecDraftTokens, m.cfg.PrefillTokensPerSec, m.cfg.DecodeTokensPerSec)
}

// flavorStats are the counters behind llama.cpp's and vLLM's /metrics
// that Stats does not keep, and SGLang's latency histograms.
type flavorStats struct {
	mu sync.Mutex
	flavorCounts
}

// flavorCounts are the values of flavorStats.
type flavorCounts struct {
	promptSeconds      float64 // prefill time of finished items
	predictSeconds     float64 // decode time of finished items
	nDecode            int64   // one per item's prefill and per later token
	nTokensMax         int64   // largest prompt + output
	specDrafts         int64   // verify steps
	specDraftTokens    int64   // draft tokens proposed
	specAccepted       int64   // draft tokens accepted
	finishedReasons    map[string]int64
	sinceScrape        int64 // items finished since the last /metrics
	ttft, e2e          histogram
	promptSinceScrape  int64
	predictSinceScrape int64
}

// add records a finished item. draftTokens is Config.SpecDraftTokens.
func (f *flavorStats) add(it *item, draftTokens int, prefillTPS, decodeTPS float64) {
	if it.finish == nil || it.finish.kind == finishAbortStatus {
		return
	}
	sp := it.spec(draftTokens)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.promptSeconds += perToken(len(it.prompt), prefillTPS).Seconds()
	f.predictSeconds += perToken(it.produced, decodeTPS).Seconds()
	f.nDecode += 1 + int64(max(it.produced-1, 0))
	f.nTokensMax = max(f.nTokensMax, int64(len(it.prompt)+it.produced))
	f.specDrafts += int64(sp.verify)
	f.specDraftTokens += int64(sp.proposed)
	f.specAccepted += int64(sp.accepted)
	if f.finishedReasons == nil {
		f.finishedReasons = map[string]int64{}
	}
	f.finishedReasons[it.finish.typ()]++
	f.sinceScrape++
	f.promptSinceScrape += int64(len(it.prompt))
	f.predictSinceScrape += int64(it.produced)
	if !it.prefilled.IsZero() {
		f.ttft.observe(it.prefilled.Sub(it.arrival).Seconds())
	}
	f.e2e.observe(it.finished.Sub(it.arrival).Seconds())
}

// histogram is a Prometheus histogram with SGLang's latency buckets.
type histogram struct {
	counts []int64 // per bucket of latencyBuckets, not cumulative
	sum    float64
	n      int64
}

// latencyBuckets are the upper bounds of SGLang's latency histograms, in
// seconds (sim: one set for time to first token and end-to-end latency).
var latencyBuckets = []float64{0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 800}

func (h *histogram) observe(v float64) {
	if h.counts == nil {
		h.counts = make([]int64, len(latencyBuckets))
	}
	for i, le := range latencyBuckets {
		if v <= le {
			h.counts[i]++
			break
		}
	}
	h.sum += v
	h.n++
}

// snapshot returns a copy of the flavor counters.
func (f *flavorStats) snapshot() flavorCounts {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := flavorCounts{
		promptSeconds: f.promptSeconds, predictSeconds: f.predictSeconds, nDecode: f.nDecode,
		nTokensMax: f.nTokensMax, specDrafts: f.specDrafts, specDraftTokens: f.specDraftTokens,
		specAccepted: f.specAccepted, sinceScrape: f.sinceScrape,
		promptSinceScrape: f.promptSinceScrape, predictSinceScrape: f.predictSinceScrape,
		finishedReasons: map[string]int64{},
	}
	for k, v := range f.finishedReasons {
		c.finishedReasons[k] = v
	}
	c.ttft = histogram{counts: append([]int64(nil), f.ttft.counts...), sum: f.ttft.sum, n: f.ttft.n}
	c.e2e = histogram{counts: append([]int64(nil), f.e2e.counts...), sum: f.e2e.sum, n: f.e2e.n}
	return c
}

// resetScrapeWindow starts a new window for the gauges llama.cpp averages
// between two scrapes.
func (f *flavorStats) resetScrapeWindow() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sinceScrape, f.promptSinceScrape, f.predictSinceScrape = 0, 0, 0
}
