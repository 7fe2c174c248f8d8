package sim

import (
	"context"
	"sync"
	"time"
)

// batcher is the knee scheduler (Config.Knee): one loop runs decode steps
// over a batch, as SGLang's and vLLM's schedulers do, so a server's
// throughput has a knee. It owns the waiting queue, the running batch, the
// KV pool in tokens and the simulated clock; it marks slots taken and
// freed in the engine's slotPool (never waiting on it: the batch never
// holds more than Config.Slots) so occupancy is measured as without it.
// It never plans an output nor writes an answer: it decodes stop tokens of
// an item and reports how many it produced.
//
// The model, per step:
//
//	step = StepBase + StepPerReq × batch + prefill tokens / PrefillTokensPerSec
//	       (1/DecodeTokensPerSec when StepBase and StepPerReq are 0)
//
// and each running item decodes one token per step: one item's tokens/s is
// 1/step, falling as the batch grows, the total batch/step rising toward
// 1/StepPerReq. The batch is capped by Config.Slots (SGLang's
// max_running_requests, vLLM's max_num_seqs) and by the KV pool
// (Config.KVTokens; not llama.cpp's, whose slots each have their own
// context, so only its slots bind): an item holds its prompt and its
// tokens so far.
// SGLang admits an item only if its prompt and max_new_tokens (clipped to
// sglangClipNewTokens) fit beside what the running items reserve, so it
// queues and never retracts (python/sglang/srt/managers/
// schedule_policy.py, PrefillAdder: a running request reserves
// min(max_new_tokens - output, CLIP_MAX_NEW_TOKENS) × new_token_ratio, here
// with a ratio of 1, so the decode retraction SGLang keeps for a lower
// ratio never happens); vLLM admits while the prompt fits now, and when the
// running items' next tokens do not fit it preempts the newest running
// item: its KV is freed, it goes back to the head of the queue and, when
// admitted again, recomputes its prompt and output so far as a prefill
// (vllm/v1/core/sched/scheduler.py: schedule() serves the running items
// first, preempts with running.pop() when allocate_slots fails, and admits
// waiting items only in a step that preempted none; _preempt_request).
type batcher struct {
	cfg   Config
	slots *slotPool
	// sleep waits one step's time; tests replace it to run on the
	// simulated clock alone.
	sleep func(time.Duration)

	mu      sync.Mutex
	looping bool
	waiting []*seq // FIFO; vLLM puts a preempted item back at the head
	running []*seq // in admission order
	held    int    // KV tokens held by the running items

	clock       time.Duration // simulated time of all steps
	decoded     int64         // tokens decoded by all steps
	recomputed  int64         // tokens prefilled again after a preemption
	preemptions int64
}

// sglangClipNewTokens is SGLang's SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION
// default: the most output tokens the scheduler reserves for one request.
const sglangClipNewTokens = 4096

// seq is one item in the batcher. Its fields are guarded by batcher.mu.
type seq struct {
	it       *item
	stop     int // tokens to decode
	done     int // tokens decoded so far
	kv       int // KV tokens held now (0 while waiting)
	prefill  int // tokens to prefill on admission
	gone     bool
	finished chan struct{}
}

func newBatcher(cfg Config, slots *slotPool) *batcher {
	return &batcher{cfg: cfg, slots: slots, sleep: time.Sleep}
}

// run queues it to decode stop tokens and waits until it has, or ctx ends.
// It sets it.produced and it.prefilled, and reports whether it finished.
func (b *batcher) run(ctx context.Context, it *item, stop int) bool {
	s := &seq{it: it, stop: stop, prefill: len(it.prompt), finished: make(chan struct{})}
	b.mu.Lock()
	b.waiting = append(b.waiting, s)
	if !b.looping {
		b.looping = true
		go b.loop()
	}
	b.mu.Unlock()
	select {
	case <-s.finished:
		it.produced = s.done
		return true
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !s.gone {
		b.drop(s)
	}
	it.produced = s.done
	return false
}

// drop removes s, waiting or running, for a client that went away.
// b.mu is held.
func (b *batcher) drop(s *seq) {
	s.gone = true
	if b.isRunning(s) {
		b.running = without(b.running, s)
		b.held -= s.kv
		s.kv = 0
		b.slots.release()
		return
	}
	b.waiting = without(b.waiting, s)
}

func (b *batcher) isRunning(s *seq) bool {
	for _, r := range b.running {
		if r == s {
			return true
		}
	}
	return false
}

func without(list []*seq, s *seq) []*seq {
	for i, r := range list {
		if r == s {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// loop runs steps while any item waits or runs, then exits.
func (b *batcher) loop() {
	for {
		b.mu.Lock()
		if len(b.running) == 0 && len(b.waiting) == 0 {
			b.looping = false
			b.mu.Unlock()
			return
		}
		prefill := 0
		// vLLM admits waiting items only in a step that preempted none.
		if b.cfg.Flavor != FlavorVLLM || !b.preempt() {
			prefill = b.admit()
		}
		batch := append([]*seq(nil), b.running...)
		d := b.stepTime(len(batch), prefill)
		b.mu.Unlock()

		b.sleep(d)

		b.mu.Lock()
		b.clock += d
		b.advance(batch, time.Now())
		b.mu.Unlock()
	}
}

// stepTime is one step's duration for a batch of n items that prefills
// prefill tokens.
func (b *batcher) stepTime(n, prefill int) time.Duration {
	d := b.cfg.StepBase + time.Duration(n)*b.cfg.StepPerReq
	if b.cfg.StepBase == 0 && b.cfg.StepPerReq == 0 {
		d = perToken(1, b.cfg.DecodeTokensPerSec)
	}
	return d + perToken(prefill, b.cfg.PrefillTokensPerSec)
}

// advance gives each item of batch still running its step's token and
// finishes those done. b.mu is held.
func (b *batcher) advance(batch []*seq, now time.Time) {
	for _, s := range batch {
		if s.gone {
			continue
		}
		if s.it.prefilled.IsZero() {
			s.it.prefilled = now
		}
		if s.done < s.stop {
			s.done++
			s.kv++
			b.held++
			b.decoded++
		}
		if s.done >= s.stop {
			b.running = without(b.running, s)
			b.held -= s.kv
			s.kv, s.gone = 0, true
			b.slots.release()
			close(s.finished)
		}
	}
}

// admit moves items from the head of the queue into the batch while the
// flavor's policy lets them in, and returns the tokens they prefill.
// b.mu is held.
func (b *batcher) admit() int {
	prefill := 0
	for len(b.waiting) > 0 && len(b.running) < b.cfg.Slots {
		s := b.waiting[0]
		if len(b.running) > 0 && !b.fits(s) {
			break
		}
		b.waiting = b.waiting[1:]
		b.running = append(b.running, s)
		s.kv = s.prefill
		b.held += s.kv
		prefill += s.prefill
		if err := b.slots.acquire(context.Background()); err != nil {
			panic("sim: the batch outgrew its slots")
		}
	}
	return prefill
}

// fits reports whether s may join the batch under the flavor's policy.
// b.mu is held.
func (b *batcher) fits(s *seq) bool {
	pool := b.cfg.MaxTotalTokens
	switch b.cfg.Flavor {
	case FlavorLlamaCpp:
		return true // each slot has its own context: only slots bind
	case FlavorSGLang:
		reserved := 0
		for _, r := range b.running {
			reserved += r.kv + min(r.it.budget-r.done, sglangClipNewTokens)
		}
		return reserved+s.prefill+min(s.it.budget, sglangClipNewTokens) <= pool
	}
	// vLLM: the prompt (or what a preempted item recomputes) and its first
	// token fit beside the running items' next tokens.
	return b.held+len(b.running)+s.prefill+1 <= pool
}

// preempt evicts the newest running items, vLLM's way, until every running
// item's next token fits in the pool; one item always keeps running. It
// reports whether it evicted any. b.mu is held.
func (b *batcher) preempt() bool {
	evicted := false
	for len(b.running) > 1 && b.held+len(b.running) > b.cfg.MaxTotalTokens {
		s := b.running[len(b.running)-1]
		b.running = b.running[:len(b.running)-1]
		b.held -= s.kv
		s.kv = 0
		s.prefill = len(s.it.prompt) + s.done
		b.recomputed += int64(s.prefill)
		b.preemptions++
		b.slots.release()
		b.waiting = append([]*seq{s}, b.waiting...)
		evicted = true
	}
	return evicted
}

// batchSnapshot is the batcher's state at one moment.
type batchSnapshot struct {
	queued, held        int
	clock               time.Duration
	decoded, recomputed int64
	preemptions         int64
}

func (b *batcher) snapshot() batchSnapshot {
	b.mu.Lock()
	defer b.mu.Unlock()
	return batchSnapshot{queued: len(b.waiting), held: b.held, clock: b.clock, decoded: b.decoded,
		recomputed: b.recomputed, preemptions: b.preemptions}
}
