package sim

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// engine is the simulated model and its scheduler: it renders prompts
// (chatPrompt), plans each item's output (plan, model.go), registers items
// by rid, and runs them through the decode slots at the configured speed
// (run). It owns the slot pool and the registry; it reports to meters
// (what decodes, what finished) and asks the tool model whether an answer
// calls a tool. It never writes an HTTP answer nor draws a fault: a
// request's injected abort reaches it as the item's abortAt.
type engine struct {
	cfg   Config
	slots *slotPool
	batch *batcher // the knee scheduler, or nil for the slot model
	reqs  registry
	meter *meters
	tools *toolModel
}

// newEngine returns the engine of cfg, running items in slots, or through
// batch when it is not nil (Config.Knee).
func newEngine(cfg Config, slots *slotPool, batch *batcher, m *meters, tools *toolModel) *engine {
	return &engine{cfg: cfg, slots: slots, batch: batch, meter: m, tools: tools}
}

// register adds it to the items in flight; a rid already in flight is
// SGLang's duplicate request error.
func (e *engine) register(it *item) *apiError { return e.reqs.add(it) }

// unregister removes a finished item.
func (e *engine) unregister(it *item) { e.reqs.remove(it) }

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
	// it decodes; guarded by the mutex of meters' load.
	kvStart time.Time
	kvStop  int

	// Outcome, written by run.
	produced int
	finish   *finishReason
	canceled bool // the client went away
	finished time.Time
	// prefilled is when the prompt was processed (the first token's time).
	prefilled time.Time
	// stop ends the item's context and abortAsked says /abort_request
	// named it (abort.go); both guarded by the registry's mutex.
	stop       context.CancelFunc
	abortAsked bool
}

// reasoningTokens is meta_info.reasoning_tokens of the output so far.
func (it *item) reasoningTokens() int { return it.plan.reasoningTokens(it.produced) }

// finalText is the text of a finished item: trimmed at the matched stop
// unless no_stop_trim, untrimmed for aborts.
func (it *item) finalText() string {
	if it.finish == &it.plan.finish {
		return it.plan.text(it.produced, it.sp, true)
	}
	return it.plan.text(it.produced, it.sp, false)
}

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
// as its planned output needs, and reports whether the client is still
// there. On return it.finish is set unless the client went away
// (it.canceled).
func (e *engine) run(ctx context.Context, it *item) bool {
	ctx, release := e.itemContext(ctx, it) // abort.go
	defer release()
	e.drive(ctx, it)
	return !it.canceled
}

// drive is run's work: it records the item, however it ends.
func (e *engine) drive(ctx context.Context, it *item) {
	defer func() {
		e.settleAbort(it) // abort.go
		it.finished = time.Now()
		e.meter.record(it)
	}()
	if it.schedErr != "" {
		it.finish = &finishReason{kind: finishAbortStatus, message: it.schedErr, statusCode: 400}
		return
	}
	if e.batch != nil {
		e.driveBatch(ctx, it)
		return
	}
	if err := e.slots.acquire(ctx); err != nil {
		it.canceled = true
		return
	}
	defer e.slots.release()

	stop := len(it.plan.ids)
	if it.abortAt >= 0 && it.abortAt < stop {
		stop = it.abortAt
	}
	e.meter.decoding(it, stop)
	defer e.meter.decoded(it)
	if !wait(ctx, perToken(len(it.prompt), e.cfg.PrefillTokensPerSec)) {
		it.canceled = true
		return
	}
	rate := e.cfg.DecodeTokensPerSec
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

// driveBatch is drive's work under the knee scheduler: the batcher paces
// the tokens and owns the slots.
func (e *engine) driveBatch(ctx context.Context, it *item) {
	stop := len(it.plan.ids)
	if it.abortAt >= 0 && it.abortAt < stop {
		stop = it.abortAt
	}
	if !e.batch.run(ctx, it, stop) {
		it.canceled = true
		return
	}
	if stop < len(it.plan.ids) {
		it.finish = &finishReason{kind: finishAbort, message: "Aborted"}
	} else {
		it.finish = &it.plan.finish
	}
}

// spec returns the speculative decoding counts of the tokens it produced.
func (it *item) spec(draftTokens int) specStats {
	if it.plan == nil {
		return specStats{}
	}
	return it.plan.spec(it.produced, draftTokens)
}

// chatPrompt renders the prompt ids of a chat request (or of /v1/tokenize
// with messages): the fake chat template with the generation prompt, unless
// continue_final_message. chat_template_kwargs.enable_thinking (or
// reasoning_effort "none") false disables thinking.
func (e *engine) chatPrompt(m map[string]json.RawMessage, msgs []chatMessage) []int {
	t := chatTemplate{addGenerationPrompt: true, reasoningModel: e.cfg.ReasoningParser}
	if boolField(m, "continue_final_message", false) && len(msgs) > 0 && msgs[len(msgs)-1].role == "assistant" {
		t.continueFinalMessage, t.addGenerationPrompt = true, false
	}
	if effort, ok := asString(m["reasoning_effort"]); ok && effort == "none" {
		t.disableThinking = true
	}
	if kw, ok := asObject(m["chat_template_kwargs"]); ok {
		for _, k := range []string{"enable_thinking", "thinking"} {
			if v, ok := asBool(kw[k]); ok {
				t.disableThinking = !v
				break
			}
		}
	}
	t.tools, t.format = e.tools.promptLines(m), e.tools.format()
	return applyChatTemplate(msgs, t)
}
