package sim

import (
	"sync"
	"time"
)

// loadWindow is how many completed seconds the windowed gauges
// (sglang:gen_throughput, sglang:cache_hit_rate, sglang:spec_accept_length)
// average over; SGLang's scheduler sets them once per log interval from the
// batches of that interval.
const loadWindow = 5

// load tracks what the scheduler gauges of /metrics report: the items
// holding KV cache now, and per-second sums of the items that finished.
type load struct {
	mu      sync.Mutex
	running map[*item]struct{}
	secs    [loadWindow + 2]loadSecond
	// last is the last windowed spec accept length and rate, kept while
	// no spec item finishes (SGLang's gauge keeps its last value too).
	lastAcceptLen, lastAcceptRate float64
}

// loadSecond is one second of finished items.
type loadSecond struct {
	sec                    int64
	generated              int64 // completion tokens
	prompt, cached         int64 // prompt tokens, and those served from the prefix cache
	specTokens, specVerify int64 // completion tokens and verify steps of spec items
	accepted, proposed     int64
}

// start marks it as holding KV cache from now on, decoding `stop` tokens
// at rate tokens/s (0: at once).
func (l *load) start(it *item, stop int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.running == nil {
		l.running = make(map[*item]struct{})
	}
	it.kvStart, it.kvStop = time.Now(), stop
	l.running[it] = struct{}{}
}

// stop releases it's KV cache.
func (l *load) stop(it *item) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.running, it)
}

// finished adds a finished item to its second.
func (l *load) finished(now time.Time, it *item, sp specStats) {
	sec := now.Unix()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := &l.secs[sec%int64(len(l.secs))]
	if b.sec != sec {
		*b = loadSecond{sec: sec}
	}
	b.generated += int64(it.produced)
	if it.finish != nil && it.finish.kind != finishAbortStatus {
		b.prompt += int64(len(it.prompt))
	}
	if sp.verify > 0 {
		b.specTokens += int64(it.produced)
		b.specVerify += int64(sp.verify)
		b.accepted += int64(sp.accepted)
		b.proposed += int64(sp.proposed)
	}
}

// loadSnapshot is what the gauges report at one moment.
type loadSnapshot struct {
	usedTokens    int64   // KV tokens held by running items
	genThroughput float64 // tokens/s over the last completed seconds
	cacheHitRate  float64 // cached / prompt tokens over the same seconds
	acceptLength  float64 // Σ completion / Σ verify over the same seconds
	acceptRate    float64 // Σ accepted / Σ proposed over the same seconds
}

// snapshot computes the gauges at now. decodeRate is Config.DecodeTokensPerSec.
func (l *load) snapshot(now time.Time, decodeRate float64) loadSnapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	var s loadSnapshot
	for it := range l.running {
		done := it.kvStop
		if decodeRate > 0 {
			done = min(done, int(now.Sub(it.kvStart).Seconds()*decodeRate))
		}
		s.usedTokens += int64(len(it.prompt) + max(done, 0))
	}
	cur := now.Unix()
	var w loadSecond
	for _, b := range l.secs {
		if b.sec >= cur-loadWindow && b.sec < cur {
			w.generated += b.generated
			w.prompt += b.prompt
			w.cached += b.cached
			w.specTokens += b.specTokens
			w.specVerify += b.specVerify
			w.accepted += b.accepted
			w.proposed += b.proposed
		}
	}
	s.genThroughput = float64(w.generated) / loadWindow
	if w.prompt > 0 {
		s.cacheHitRate = float64(w.cached) / float64(w.prompt)
	}
	if w.specVerify > 0 {
		l.lastAcceptLen = float64(w.specTokens) / float64(w.specVerify)
	}
	if w.proposed > 0 {
		l.lastAcceptRate = float64(w.accepted) / float64(w.proposed)
	}
	s.acceptLength, s.acceptRate = l.lastAcceptLen, l.lastAcceptRate
	return s
}
