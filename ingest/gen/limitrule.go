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
//     that size) in two readings in a row: cut to what of gen's runs plus that small queue (at most
//     to a quarter of the limit in one cut), so no slot waits for gen and
//     nothing more waits in the server's queue (a shared server's other
//     users behind it, and --request-timeout counting);
//   - room (no queue, no new preemption, KV not full, gen using its
//     limit, and the server holding what gen sent, not the way there or
//     back): grow, doubling before the first cut (slow start), by 1/16
//     after it; never past what the KV cache holds (KV use per running
//     request times the new limit at most kvTarget), nor past the
//     capacity it states (SGLang's max_running_requests) and the small
//     queue.
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
// did not; why is the event's detail after "from -> to: ").
func (r *limitRule) next(rd limitReading) (int, string) {
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
	longAgain := long && r.queueLastTime // not one step's arrivals
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
		if to <= r.limit {
			return r.limit, ""
		}
		return r.grow(min(to, r.bound), why)
	}
	return r.limit, ""
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

// stated starts the rule at the capacity the server states and a small
// queue, unless it was cut already: its max_running_requests, or fewer
// when its KV pool (poolTokens, 0: not stated) holds fewer requests of
// reqTokens (a request's max_new_tokens, what SGLang reserves for it at
// most besides its prompt; 0: unknown). The limit grows no further than
// max_running_requests and the small queue; the pool only sets the
// start, for SGLang reserves less than max_new_tokens once no request
// was retracted (its new_token_ratio), so the pool holds more.
func (r *limitRule) stated(running, poolTokens, reqTokens int) (int, string) {
	r.capacity = max(running, 0)
	start, why := running, fmt.Sprintf("its max_running_requests (%d)", running)
	if poolTokens > 0 && reqTokens > 0 && poolTokens/reqTokens < running {
		start = max(poolTokens/reqTokens, 1)
		why = fmt.Sprintf("its KV pool (%d tokens: %d requests of %d new tokens)", poolTokens, start, reqTokens)
	}
	to := min(start+queueKeep(start), r.bound)
	if r.cut || running <= 0 || to == r.limit {
		return r.limit, ""
	}
	r.limit = to
	return to, fmt.Sprintf("%s and a queue of %d", why, queueKeep(start))
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
