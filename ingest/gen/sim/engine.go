package sim

import (
	"context"
	"strings"
	"sync"
	"time"
)

// item is one generation request as the scheduler sees it: one prompt and
// one sample. A batch or n>1 request has several.
type item struct {
	rid       string
	index     int // position in the flattened batch
	prompt    []int
	sp        *samplingParams
	budget    int    // effective max_new_tokens
	plan      *plan  // the full output, decided up front
	schedErr  string // rejected by the scheduler (abort with status 400)
	abortAt   int    // injected abort after this many tokens; -1 for none
	arrival   time.Time
	promptIDs bool // return_prompt_token_ids

	abortCh   chan struct{}
	abortOnce sync.Once

	// Outcome, written by run.
	produced int
	finish   *finishReason
	canceled bool // the client went away
	finished time.Time
}

// abort makes the item finish with an abort as soon as it can.
func (it *item) abort() { it.abortOnce.Do(func() { close(it.abortCh) }) }

// reasoningTokens is meta_info.reasoning_tokens of the output so far.
func (it *item) reasoningTokens() int { return it.plan.reasoningTokens(it.produced) }

// registry holds the in-flight items by rid, for duplicate detection and
// /abort_request.
type registry struct {
	mu sync.Mutex
	m  map[string]*item
}

// add registers items, all or none. A rid already in flight is SGLang's
// "Duplicate request ID detected" ValueError.
func (r *registry) add(items []*item) *apiError {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = make(map[string]*item)
	}
	for _, it := range items {
		if _, dup := r.m[it.rid]; dup {
			return valueError("Duplicate request ID detected: %s", it.rid)
		}
	}
	for _, it := range items {
		r.m[it.rid] = it
	}
	return nil
}

func (r *registry) remove(items []*item) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, it := range items {
		if r.m[it.rid] == it {
			delete(r.m, it.rid)
		}
	}
}

// abort aborts every in-flight item whose rid starts with rid, or all of
// them. Like SGLang with one tokenizer worker, nothing happens unless all is
// set or rid itself is in flight; an empty rid without all is ignored.
func (r *registry) abort(rid string, all bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !all {
		if _, ok := r.m[rid]; rid == "" || !ok {
			return
		}
	}
	for k, it := range r.m {
		if all || strings.HasPrefix(k, rid) {
			it.abort()
		}
	}
}

// emitFunc receives the progress of a streaming item: k output tokens so
// far, and final once it.finish is set. It returns false if the client is
// gone.
type emitFunc func(it *item, k int, final bool) bool

// waitResult is how a wait ended.
type waitResult int

const (
	waited waitResult = iota
	waitAborted
	waitCanceled
)

// wait sleeps for d unless the item is aborted or ctx ends first. With
// d <= 0 it only polls.
func wait(ctx context.Context, it *item, d time.Duration) waitResult {
	if d <= 0 {
		select {
		case <-it.abortCh:
			return waitAborted
		case <-ctx.Done():
			return waitCanceled
		default:
			return waited
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return waited
	case <-it.abortCh:
		return waitAborted
	case <-ctx.Done():
		return waitCanceled
	}
}

// perToken returns the time for n tokens at rate tokens per second.
func perToken(n int, rate float64) time.Duration {
	if rate <= 0 || n <= 0 {
		return 0
	}
	return time.Duration(float64(n) / rate * float64(time.Second))
}

// run drives one item through the queue, prefill and decode, pacing its
// planned output. For streams, emit gets every stream_interval tokens and the
// final state; for non-streams emit is nil. On return it.finish is set unless
// the client went away (it.canceled).
func (s *Server) run(ctx context.Context, it *item, emit emitFunc) {
	defer func() {
		if it.finished.IsZero() {
			it.finished = time.Now()
		}
		s.account(it)
	}()
	if it.schedErr != "" {
		it.finish = &finishReason{kind: finishAbortStatus, message: it.schedErr, statusCode: 400}
		s.final(it, emit)
		return
	}
	if err := s.slots.acquire(ctx, it.abortCh); err != nil {
		if err == errAborted {
			it.finish = &finishReason{kind: finishAbortQueued, message: "Abort in waiting queue"}
			s.final(it, emit)
			return
		}
		it.canceled = true
		return
	}
	defer s.slots.release()

	stop := len(it.plan.ids)
	if it.abortAt >= 0 && it.abortAt < stop {
		stop = it.abortAt
	}
	running := func(r waitResult) bool {
		switch r {
		case waitAborted:
			it.finish = &finishReason{kind: finishAbort, message: "Aborted"}
			s.final(it, emit)
			return false
		case waitCanceled:
			it.canceled = true
			return false
		}
		return true
	}
	if !running(wait(ctx, it, perToken(len(it.prompt), s.cfg.PrefillTokensPerSec))) {
		return
	}
	rate := s.cfg.DecodeTokensPerSec
	start := time.Now()
	if emit == nil {
		r := wait(ctx, it, perToken(stop, rate))
		it.produced = stop
		if r != waited && rate > 0 {
			it.produced = min(stop, int(time.Since(start).Seconds()*rate))
		}
		if !running(r) {
			return
		}
	} else {
		for it.produced < stop {
			next := min(it.produced+it.sp.streamInterval, stop)
			r := wait(ctx, it, time.Until(start.Add(perToken(next, rate))))
			if !running(r) {
				return
			}
			it.produced = next
			if next < stop && !emit(it, next, false) {
				it.canceled = true
				return
			}
		}
	}
	if stop < len(it.plan.ids) {
		it.finish = &finishReason{kind: finishAbort, message: "Aborted"}
	} else {
		it.finish = &it.plan.finish
	}
	s.final(it, emit)
}

// final stamps the finished item and reports it to a stream.
func (s *Server) final(it *item, emit emitFunc) {
	it.finished = time.Now()
	if emit != nil && !emit(it, it.produced, true) {
		it.canceled = true
	}
}

// account adds a finished item to the counters.
func (s *Server) account(it *item) {
	s.stats.generated.Add(int64(it.produced))
	if it.finish != nil && it.finish.kind != finishAbortStatus {
		s.stats.promptTokens.Add(int64(len(it.prompt)))
		s.stats.items.Add(1)
	}
}

// runAll runs the items of one request: inline for one item, concurrently
// for several. It reports whether the client is still there.
func (s *Server) runAll(ctx context.Context, items []*item, emit emitFunc) bool {
	if len(items) == 1 {
		s.run(ctx, items[0], emit)
		return !items[0].canceled
	}
	var wg sync.WaitGroup
	for _, it := range items {
		wg.Go(func() { s.run(ctx, it, emit) })
	}
	wg.Wait()
	for _, it := range items {
		if it.canceled {
			return false
		}
	}
	return true
}
