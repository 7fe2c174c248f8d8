package gen

import (
	"fmt"
	"math"
)

// limitRule is the rule that moves one server's limit on gen's requests
// in flight (limit.go applies it): a pure function of the server's own
// readings (its /metrics, as scrape.go reads them) and gen's requests in
// flight on it. It keeps only what it needs between two readings and
// touches nothing else: no clock but the readings' times, no I/O.
//
// The rule, per reading:
//   - preemptions (vLLM; SGLang's retractions) at a sustained rate (new
//     ones in two readings in a row, or many in one): cut to what of gen's
//     runs and the small queue, at most 3/4 of the limit, at least a
//     quarter of it;
//   - a queue longer than a small one (queueKeep, for a running batch of
//     that size) in two readings in a row, or in one with the KV cache
//     near full: cut to what of gen's runs plus that small queue (at most
//     to a quarter of the limit in one cut), so no slot waits for gen and
//     nothing more waits in the server's queue (a shared server's other
//     users behind it, and --request-timeout counting); on a server that
//     preempts, with gen alone on it, not below what its pool holds (the
//     queue waits for gen's own requests to free the pool);
//   - room (no queue, no new preemption, KV not full, gen using its
//     limit, and the server holding what gen sent, not the way there or
//     back): grow, doubling before the first cut (slow start), by 1/16
//     after it; never past what the KV cache holds (KV use per running
//     request times the new limit at most kvTarget), nor past the
//     capacity it states (SGLang's max_running_requests) and the small
//     queue, nor, on a server that preempts (vLLM), past what its stated
//     pool holds of the run's requests once answered;
//   - else gen's own answers (slowWatch): cut where they near
//     --request-timeout, or where a probe shows that half the requests at
//     once answer nearly as many tokens/s ("answers slow").
//
// The first limit is what the server states (start), before any reading.
//
// A cut for preemptions waits until gen's requests in flight are down to
// the limit (the last cut took effect), so one burst is not cut for twice;
// a cut for the queue need not: it goes to what runs, however many wait.
type limitRule struct {
	bound int // the most the limit may be (the run's slots)
	limit int
	// cut is set once the limit was first cut: growth is slow from then
	// on (TCP's slow start, then congestion avoidance).
	cut bool
	// The preemptions counter at the last reading (hasPre: read), and
	// whether that reading found new ones.
	pre         float64
	hasPre      bool
	preLastTime bool
	// queueLastTime: the reading before found a long queue too.
	queueLastTime bool
	// capacity is what the server states (0: none): the limit grows no
	// further than it and the small queue.
	capacity int
	// pool is its KV pool in tokens (0: not stated); preempts: past it
	// the server preempts (vLLM), so the limit grows no further than the
	// pool holds of the run's requests (limitReading.perRequest).
	pool     int
	preempts bool
	// slow watches gen's answers for the limit past which they slow
	// for too little (limitslow.go).
	slow slowWatch
}

// limitReading is what one look at a server gives the rule.
type limitReading struct {
	inFlight int // gen's requests in flight on the server
	// The server's own gauges; has* false: not reported.
	running, queued, kv   float64
	hasRunning, hasQueued bool
	hasKV                 bool
	preemptions           float64 // counter
	hasPreemptions        bool
	secs                  float64 // since the reading before (for the reason's text)
	// perRequest is the KV tokens one of the run's requests holds at
	// most, as gen knows it now (0: unknown).
	perRequest int
	// at is the reading's time (Unix ms; 0: none, answers not watched);
	// answers and tokens count gen's answers from the server so far and
	// their output tokens.
	at              int64
	answers, tokens float64
	// answeredAt is when the last of those answers came (Unix ms; 0:
	// at): a window measured from answer to answer is exact where
	// answers come in lumps (a batch started together ends together).
	answeredAt int64
}

// Why a limit changed, the start of an event's detail.
const (
	whyRoom        = "room"
	whyQueue       = "queue grew"
	whyPreemptions = "preemptions"
	whyKVFull      = "KV full"
)

// minLimit is the lowest limit: one running, one waiting.
const minLimit = 2

// kvTarget is the KV use the rule grows toward, at most.
const kvTarget = 0.9

// queueKeep is the queue kept on a server running running requests, so a
// slot that frees finds a request waiting: 1/16 of the batch, 2 to 64.
func queueKeep(running int) int { return min(max(running/16, 2), 64) }

// newLimitRule starts a rule at start, within bound.
func newLimitRule(start, bound int) *limitRule {
	return &limitRule{bound: bound, limit: min(max(start, minLimit), bound)}
}

// next reads rd and returns the new limit and why it changed ("" when it
// did not; why is the event's detail after "from -> to: "): by the
// server's gauges (step), else by gen's answers from it (slowWatch).
func (r *limitRule) next(rd limitReading) (int, string) {
	if to, why := r.step(rd); why != "" {
		r.slow.observe(rd, to) // a new limit: its window starts
		return to, why
	}
	switch to, why := r.slow.observe(rd, r.limit); {
	case to < r.limit:
		return r.set(to, why)
	case to > r.limit:
		return r.grow(min(to, r.bound), why)
	}
	return r.limit, ""
}

// step is the rule by the server's gauges.
func (r *limitRule) step(rd limitReading) (int, string) {
	newPre := r.newPreemptions(rd)
	sustained := newPre > 0 && r.preLastTime
	r.preLastTime = newPre > 0
	if !rd.hasQueued || !rd.hasRunning {
		return r.limit, "" // nothing to go by
	}
	run, queued, f := int(rd.running), int(rd.queued), rd.inFlight
	keep := queueKeep(max(run, f-queued)) // what runs, or is on its way
	settled := f <= r.limit+keep          // the last cut took effect
	long := queued > 2*keep+2
	// Not one step's arrivals: a long queue twice, or once with the KV
	// cache near full (what waits cannot be admitted).
	longAgain := long && (r.queueLastTime || rd.hasKV && rd.kv >= kvTarget)
	r.queueLastTime = long
	switch {
	case settled && (sustained || newPre >= float64(max(8, run/16))):
		// What of gen's runs (the preempted wait in the queue) and the
		// small queue, at most 3/4 of the limit: what runs right after a
		// preemption is less than fits, so no more than a quarter at once.
		to := min(f-queued+keep, r.limit*3/4)
		to = max(minLimit, r.limit/4, to)
		return r.set(to, fmt.Sprintf("%s (%.0f in %s)", whyPreemptions, newPre, secsText(rd.secs)))
	case longAgain:
		// What of gen's runs (its requests less the queue, when the
		// queue is its own), plus the small queue kept.
		to := f - queued + keep
		if to >= r.limit && settled {
			to = r.limit * 7 / 8 // the queue is others': a fair share less
		}
		to = max(minLimit, r.limit/4, to)
		if fits := r.poolFits(rd); fits > 0 && run+queued <= f+keep {
			// gen alone on a server that preempts, within what its pool
			// holds: the queue waits for gen's own requests to free it.
			to = max(to, min(r.limit, fits))
		}
		why := fmt.Sprintf("%s (%d)", whyQueue, queued)
		if rd.hasKV && rd.kv >= 0.95 {
			why = fmt.Sprintf("%s (%d queued)", whyKVFull, queued)
		}
		return r.set(to, why)
	case queued <= keep/2 && newPre == 0 && f >= r.limit-r.limit/8 && run+queued >= f-f/4 && r.limit < r.bound:
		to := r.limit * 2
		if r.cut {
			to = r.limit + max(1, r.limit/16)
		}
		why := fmt.Sprintf("%s (running %d, queue %d)", whyRoom, run, queued)
		if rd.hasKV && rd.kv > 0 && run > 0 {
			// KV use grows with the running requests: stay within kvTarget.
			if most := int(float64(run) * kvTarget / rd.kv); most < to {
				to = most
				why = fmt.Sprintf("%s (running %d, KV %.0f%% used)", whyRoom, run, 100*rd.kv)
			}
		}
		if most := r.capacity + queueKeep(r.capacity); r.capacity > 0 && most < to {
			to = most // it runs no more than it says it can
		}
		if most := r.slow.most(); most > 0 && most < to {
			to = most // answers slow past it, or a probe is under way
		}
		if fits := r.poolFits(rd); fits > 0 && fits < to {
			// It admits all it can and preempts when they grow: no more
			// than its pool holds once each has its answer.
			to = fits
			why = fmt.Sprintf("%s (running %d, its KV pool holds %d)", whyRoom, run, to)
		}
		if to <= r.limit {
			return r.limit, ""
		}
		return r.grow(min(to, r.bound), why)
	}
	return r.limit, ""
}

// poolFits is how many of the run's requests the pool of a server that
// preempts holds once answered (0: it queues, or a size is unknown).
func (r *limitRule) poolFits(rd limitReading) int {
	if !r.preempts || r.pool <= 0 || rd.perRequest <= 0 {
		return 0
	}
	return max(r.pool/rd.perRequest, 1)
}

// pending reports whether the last reading found what a second one in a
// row would cut for (a long queue, new preemptions).
func (r *limitRule) pending() bool { return r.queueLastTime || r.preLastTime }

// newPreemptions is how many preemptions the counter gained since the
// reading before (0 at the first, and when it went back: a restart).
func (r *limitRule) newPreemptions(rd limitReading) float64 {
	if !rd.hasPreemptions {
		r.hasPre = false
		return 0
	}
	d := rd.preemptions - r.pre
	if !r.hasPre || d < 0 || math.IsNaN(d) {
		d = 0
	}
	r.pre, r.hasPre = rd.preemptions, true
	return d
}

// set cuts the limit to to (when it is lower).
func (r *limitRule) set(to int, why string) (int, string) {
	if to >= r.limit {
		return r.limit, ""
	}
	r.limit, r.cut = to, true
	return to, why
}

func (r *limitRule) grow(to int, why string) (int, string) {
	r.limit = to
	return to, why
}

// startFacts is what sets a server's first limit: what it states of its
// capacity and what gen knows of its requests (0: unknown).
type startFacts struct {
	running    int // the requests it runs at once (SGLang's max_running_requests)
	poolTokens int // its KV pool in tokens
	// A request's tokens: its prompt (the mean of those gen sent as ids,
	// or what the server holds per running request at its first reading)
	// and its output (max_new_tokens, or less once gen's answers show
	// they stop sooner; see outTokens).
	promptTokens, outTokens int
	// preempts: past its pool the server preempts running requests
	// (vLLM) rather than queueing new ones (SGLang).
	preempts bool
}

// perRequest is the KV tokens one request holds at most (0: unknown).
func (f startFacts) perRequest() int {
	if f.outTokens <= 0 {
		return 0
	}
	return max(f.promptTokens, 0) + f.outTokens
}

// fits is how many requests the pool holds at once (0: unknown).
func (f startFacts) fits() int {
	if n := f.perRequest(); n > 0 && f.poolTokens > 0 {
		return max(f.poolTokens/n, 1)
	}
	return 0
}

// maxPoolStart is the most a server that states only its pool starts at:
// vLLM's largest default max_num_seqs (1,024, on large GPUs), which it
// does not state; the rule grows on from there while it has room.
const maxPoolStart = 1024

// start sets the rule's first limit from f, and returns it and why ("":
// nothing stated, AdaptiveStart): the requests the server runs at once,
// or fewer when its pool holds fewer of the run's requests (prompt and
// output), and a small queue where the server queues; a server that
// preempts gets no queue past its pool (it would admit the queue and
// preempt), and a ceiling at what its pool holds (pool). The limit grows
// no further than what the server states it runs and the small queue.
func (r *limitRule) start(f startFacts) (int, string) {
	r.capacity, r.preempts, r.pool = max(f.running, 0), f.preempts, max(f.poolTokens, 0)
	r.slow = slowWatch{timeout: r.slow.timeout} // a new start: what was measured is of the server before
	start, why := AdaptiveStart, ""
	fits := f.fits()
	switch {
	case f.running > 0 && (fits == 0 || fits >= f.running):
		start, why = f.running, fmt.Sprintf("its max_running_requests (%d)", f.running)
	case fits > 0:
		start = fits
		if f.running == 0 {
			start = min(fits, maxPoolStart)
		}
		why = fmt.Sprintf("its KV pool (%d tokens: %d requests of %d+%d tokens)", f.poolTokens, fits, max(f.promptTokens, 0), f.outTokens)
	}
	if why != "" && !f.preempts {
		why += fmt.Sprintf(" and a queue of %d", queueKeep(start))
		start += queueKeep(start)
	}
	r.limit, r.cut = min(max(start, minLimit), r.bound), false
	return r.limit, why
}

// secsText is a reading's interval as a reason says it: 0.3s, 5s.
func secsText(s float64) string {
	if s <= 0 {
		return "one reading"
	}
	if s < 10 {
		return fmt.Sprintf("%.1fs", s)
	}
	return fmt.Sprintf("%.0fs", s)
}
