package sim

import (
	"context"
	"sync"
	"time"
)

// item is one generation request as the scheduler sees it: one prompt and
// one sample.
type item struct {
	rid       string
	prompt    []int
	sp        *samplingParams
	budget    int    // effective max_new_tokens
	plan      *plan  // the full output, decided up front
	schedErr  string // rejected by the scheduler (abort with status 400)
	abortAt   int    // injected abort after this many tokens; -1 for none
	arrival   time.Time
	promptIDs bool // return_prompt_token_ids
	// kvStart and kvStop: when the item took its slot and how many tokens
	// it decodes; guarded by Server.load's mutex.
	kvStart time.Time
	kvStop  int

	// Outcome, written by run.
	produced int
	finish   *finishReason
	canceled bool // the client went away
	finished time.Time
	// prefilled is when the prompt was processed (the first token's time).
	prefilled time.Time
}

// reasoningTokens is meta_info.reasoning_tokens of the output so far.
func (it *item) reasoningTokens() int { return it.plan.reasoningTokens(it.produced) }

// registry holds the in-flight items by rid, for duplicate detection.
type registry struct {
	mu sync.Mutex
	m  map[string]*item
}

// add registers it. A rid already in flight is SGLang's "Duplicate request
// ID detected" ValueError.
func (r *registry) add(it *item) *apiError {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[string]*item)
	}
	if _, dup := r.m[it.rid]; dup {
		return valueError("Duplicate request ID detected: %s", it.rid)
	}
	r.m[it.rid] = it
	return nil
}

func (r *registry) remove(it *item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m[it.rid] == it {
		delete(r.m, it.rid)
	}
}

// wait sleeps for d unless ctx ends first. It reports whether the client is
// still there.
func wait(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// perToken returns the time for n tokens at rate tokens per second.
func perToken(n int, rate float64) time.Duration {
	if rate <= 0 || n <= 0 {
		return 0
	}
	return time.Duration(float64(n) / rate * float64(time.Second))
}

// run drives one item through the queue, prefill and decode, taking as long
// as its planned output needs. On return it.finish is set unless the client
// went away (it.canceled).
func (s *Server) run(ctx context.Context, it *item) {
	defer func() {
		it.finished = time.Now()
		s.account(it)
	}()
	if it.schedErr != "" {
		it.finish = &finishReason{kind: finishAbortStatus, message: it.schedErr, statusCode: 400}
		return
	}
	if err := s.slots.acquire(ctx); err != nil {
		it.canceled = true
		return
	}
	defer s.slots.release()

	stop := len(it.plan.ids)
	if it.abortAt >= 0 && it.abortAt < stop {
		stop = it.abortAt
	}
	s.load.start(it, stop)
	defer s.load.stop(it)
	if !wait(ctx, perToken(len(it.prompt), s.cfg.PrefillTokensPerSec)) {
		it.canceled = true
		return
	}
	rate := s.cfg.DecodeTokensPerSec
	start := time.Now()
	it.prefilled = start
	if !wait(ctx, perToken(stop, rate)) {
		it.produced = stop
		if rate > 0 {
			it.produced = min(stop, int(time.Since(start).Seconds()*rate))
		}
		it.canceled = true
		return
	}
	it.produced = stop
	if stop < len(it.plan.ids) {
		it.finish = &finishReason{kind: finishAbort, message: "Aborted"}
	} else {
		it.finish = &it.plan.finish
	}
}

// account adds a finished item to the counters.
func (s *Server) account(it *item) {
	s.stats.generated.Add(int64(it.produced))
	if it.finish != nil && it.finish.kind != finishAbortStatus {
		s.stats.promptTokens.Add(int64(len(it.prompt)))
		s.stats.items.Add(1)
	}
	s.load.finished(time.Now(), it, it.spec(s.cfg.SpecDraftTokens))
	s.fstats.add(it, s.cfg.SpecDraftTokens, s.cfg.PrefillTokensPerSec, s.cfg.DecodeTokensPerSec)
}

// spec returns the speculative decoding counts of the tokens it produced.
func (it *item) spec(draftTokens int) specStats {
	if it.plan == nil {
		return specStats{}
	}
	return it.plan.spec(it.produced, draftTokens)
}
