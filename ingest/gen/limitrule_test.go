package gen

import (
	"strings"
	"testing"
)

// full is a reading of a server that holds all gen sends: running as
// many as fit in capacity, the rest queued.
func full(inFlight, capacity int) limitReading {
	return limitReading{inFlight: inFlight, running: float64(min(inFlight, capacity)), queued: float64(max(inFlight-capacity, 0)),
		hasRunning: true, hasQueued: true, secs: 0.25}
}

// TestLimitGrowsWithRoom: while the server runs all gen sends and queues
// none, the limit doubles each reading (slow start) up to the run's
// bound; it does not grow while gen does not use it, nor while what gen
// sent is on its way rather than at the server.
func TestLimitGrowsWithRoom(t *testing.T) {
	r := newLimitRule(128, 4096)
	want := []int{256, 512, 1024, 2048, 4096, 4096}
	for i, w := range want {
		got, why := r.next(full(r.limit, 1<<20))
		if got != w {
			t.Fatalf("reading %d: limit %d (%q), want %d", i, got, why, w)
		}
		if i < 5 && !strings.HasPrefix(why, whyRoom) {
			t.Errorf("reading %d: why %q", i, why)
		}
	}

	r = newLimitRule(128, 4096)
	if got, why := r.next(full(100, 1<<20)); got != 128 {
		t.Errorf("gen uses 100 of 128: the limit moved to %d (%s)", got, why)
	}
	rd := full(128, 1<<20)
	rd.running = 40 // the rest on the way there or back (gen's CPU, the network)
	if got, why := r.next(rd); got != 128 {
		t.Errorf("the server holds 40 of gen's 128: the limit moved to %d (%s)", got, why)
	}
	// After a cut, growth is slow: a sixteenth.
	r = newLimitRule(1000, 4096)
	r.cut = true
	if got, _ := r.next(full(1000, 1<<20)); got != 1062 {
		t.Errorf("after a cut: %d, want 1062", got)
	}
}

// TestLimitFindsCapacity: against servers of 8 to 2048 slots that queue
// past them (SGLang's and vLLM's batch bounded by their slots), the limit
// goes from the start to the capacity and a small queue, and stays there.
func TestLimitFindsCapacity(t *testing.T) {
	for _, c := range []int{1, 8, 100, 512, 2048} {
		r := newLimitRule(DefaultConcurrency, MaxAdaptive)
		var queued int
		for range 40 {
			rd := full(r.limit, c)
			r.next(rd)
			queued = int(rd.queued)
		}
		keep := queueKeep(c)
		if r.limit <= c || r.limit > c+2*keep+2 {
			t.Errorf("capacity %d: limit %d, want above it by %d to %d", c, r.limit, 1, 2*keep+2)
		}
		if queued > 2*keep+2 {
			t.Errorf("capacity %d: %d queued at the end", c, queued)
		}
		for range 10 { // settled
			if got, why := r.next(full(r.limit, c)); why != "" {
				t.Errorf("capacity %d: moved to %d after settling (%s)", c, got, why)
			}
		}
	}
}

// TestLimitBacksOffOnQueue: a long queue in one reading (one step's
// arrivals) is no cut; in two in a row it is, to what gen has running
// and the small queue, a quarter of the limit at most in one cut; and
// while gen's requests in flight are still above the limit (the cut has
// not taken effect), there is no second cut.
func TestLimitBacksOffOnQueue(t *testing.T) {
	r := newLimitRule(1024, 4096)
	if got, why := r.next(full(1024, 512)); got != 1024 {
		t.Fatalf("one reading with 512 queued: cut to %d (%s)", got, why)
	}
	got, why := r.next(full(1024, 512))
	if want := 512 + queueKeep(512); got != want || !strings.HasPrefix(why, whyQueue+" (512)") {
		t.Fatalf("two readings with 512 queued: %d (%q), want %d", got, why, want)
	}
	// gen's requests in flight are still 1024: no second cut.
	if got, why := r.next(full(1024, 512)); got != 512+queueKeep(512) {
		t.Errorf("before the cut took effect: cut again to %d (%s)", got, why)
	}
	// A server of 8 behind a limit of 128: a quarter at most per cut.
	r = newLimitRule(128, 4096)
	r.next(full(128, 8))
	if got, _ := r.next(full(128, 8)); got != 32 {
		t.Errorf("capacity 8 at 128: cut to %d, want 32 (a quarter)", got)
	}
	// The queue of a full KV cache says so (and is cut at once:
	// TestLimitCutsAtOnceWhenKVFull).
	r = newLimitRule(256, 4096)
	rd := full(256, 128)
	rd.kv, rd.hasKV = 0.99, true
	if _, why := r.next(rd); !strings.HasPrefix(why, whyKVFull) {
		t.Errorf("KV 99%% and a queue: why %q", why)
	}
}

// TestLimitBacksOffOnPreemptions: one preemption now and then is no
// cut; preemptions in two readings in a row, or many in one, cut the
// limit to 3/4 of it, or to what runs and the small queue when that is
// less, but no more than to a quarter (what runs right after preempting
// is less than fits).
func TestLimitBacksOffOnPreemptions(t *testing.T) {
	r := newLimitRule(200, 4096)
	rd := full(200, 1<<20)
	rd.hasPreemptions = true
	for _, pre := range []float64{0, 1, 1, 1} { // a blip, then none
		rd.preemptions = pre
		if got, why := r.next(rd); got < 200 {
			t.Fatalf("preemptions counter %v: cut to %d (%s)", pre, got, why)
		}
		r.limit = 200
	}
	r = newLimitRule(200, 4096)
	rd.preemptions = 0
	r.next(rd)
	rd.preemptions = 2
	r.next(rd)
	rd.preemptions = 5
	r.limit = 200 // as the reading before found it (gen sends 200)
	got, why := r.next(rd)
	if got != 150 || !strings.HasPrefix(why, whyPreemptions+" (3 in 0.2s)") {
		t.Errorf("preemptions in two readings in a row: %d (%q), want 150", got, why)
	}
	r = newLimitRule(200, 4096)
	rd.preemptions = 0
	r.next(rd)
	rd.preemptions = 40
	r.limit = 200
	if got, _ := r.next(rd); got != 150 {
		t.Errorf("40 preemptions in one reading: %d, want 150", got)
	}
	// A counter that went back (a restart) is no preemption.
	rd.preemptions = 0
	if got, why := r.next(rd); why != "" && got < 150 {
		t.Errorf("counter back to 0: cut to %d (%s)", got, why)
	}
	// vLLM preempted down to 3 running, 37 waiting: a quarter at most.
	r = newLimitRule(40, 4096)
	rd = limitReading{inFlight: 40, running: 3, queued: 37, hasRunning: true, hasQueued: true, hasPreemptions: true, preemptions: 0}
	r.next(rd)
	rd.preemptions = 20
	if got, _ := r.next(rd); got != 10 {
		t.Errorf("preempted down to 3 running: cut to %d, want 10 (a quarter)", got)
	}
}

// TestLimitStaysWithinKV: growth stops where the KV cache would fill
// (KV use per running request), and past the capacity an SGLang server
// states (and the small queue).
func TestLimitStaysWithinKV(t *testing.T) {
	r := newLimitRule(100, 4096)
	rd := full(100, 1<<20)
	rd.kv, rd.hasKV = 0.6, true
	got, why := r.next(rd)
	if got != 150 || !strings.Contains(why, "KV 60% used") {
		t.Errorf("KV 60%% at 100 running: %d (%q), want 150", got, why)
	}
	rd = full(150, 1<<20)
	rd.kv, rd.hasKV = 0.92, true
	if got, why := r.next(rd); got != 150 {
		t.Errorf("KV 92%%: grew to %d (%s)", got, why)
	}

	r = newLimitRule(128, 4096)
	if got, _ := r.start(startFacts{running: 512}); got != 512+queueKeep(512) {
		t.Fatalf("stated 512: %d", got)
	}
	if got, why := r.next(full(r.limit, 512)); got != 512+queueKeep(512) {
		t.Errorf("running all 512 it states: grew to %d (%s)", got, why)
	}
	rd = full(r.limit, 512)
	rd.running, rd.queued = 450, 0 // slots free, the rest on the way
	if got, why := r.next(rd); got != 512+queueKeep(512) {
		t.Errorf("running 450 of the 512 it states: grew to %d (%s)", got, why)
	}
}

// TestLimitStartsAtWhatThePoolHolds: an SGLang server whose KV pool holds
// fewer of the run's requests (prompt and max_new_tokens each) than its
// max_running_requests starts there and a small queue, not at its slots
// (it would queue the rest); its slots still bound the growth, for the
// pool holds more once the server reserves less than max_new_tokens; a
// pool that holds more than its slots, or a request size unknown, starts
// at the slots.
func TestLimitStartsAtWhatThePoolHolds(t *testing.T) {
	r := newLimitRule(holdLimit, 4096)
	// The pool holds 128 requests of a 32-token prompt and 32 new tokens.
	got, why := r.start(startFacts{running: 512, poolTokens: 128 * 64, promptTokens: 32, outTokens: 32})
	if got != 128+queueKeep(128) || !strings.Contains(why, "KV pool (8192 tokens: 128 requests of 32+32 tokens)") {
		t.Fatalf("stated 512 slots, a pool of 128 requests: %d (%q), want %d", got, why, 128+queueKeep(128))
	}
	for range 10 { // the server runs more than the pool's estimate: room
		r.next(full(r.limit, 300))
	}
	if r.limit <= 300 || r.limit > 512+queueKeep(512) {
		t.Errorf("a server running 300: limit %d, want above it and within the 512 it states", r.limit)
	}
	for _, c := range []struct{ pool, prompt, out int }{{1 << 20, 32, 32}, {128 * 64, 32, 0}, {0, 32, 64}} {
		r := newLimitRule(holdLimit, 4096)
		if got, _ := r.start(startFacts{running: 512, poolTokens: c.pool, promptTokens: c.prompt, outTokens: c.out}); got != 512+queueKeep(512) {
			t.Errorf("pool %d, requests of %d+%d: %d, want the slots' %d", c.pool, c.prompt, c.out, got, 512+queueKeep(512))
		}
	}
	r = newLimitRule(holdLimit, 4096)
	if got, why := r.start(startFacts{}); got != AdaptiveStart || why != "" {
		t.Errorf("nothing stated: %d (%q), want AdaptiveStart and no reason", got, why)
	}
}

// TestLimitStartsWithinAPoolThatPreempts: a server that preempts past
// its pool (vLLM) and states only the pool starts at what the pool holds
// of the run's requests, with no queue (it would admit the queue and
// preempt), at most maxPoolStart; it grows no further than the pool
// holds of them (perRequest: shorter once answers show it), however
// empty its KV looks while its requests are young.
func TestLimitStartsWithinAPoolThatPreempts(t *testing.T) {
	r := newLimitRule(holdLimit, 4096)
	got, why := r.start(startFacts{poolTokens: 512, promptTokens: 32, outTokens: 32, preempts: true})
	if got != 8 || strings.Contains(why, "queue") {
		t.Fatalf("a pool of 8 requests that preempts: %d (%q), want 8 and no queue", got, why)
	}
	rd := full(8, 1<<20)
	rd.kv, rd.hasKV, rd.perRequest = 0.5, true, 64 // the prompts are in; the answers to come
	if got, why := r.next(rd); got != 8 {
		t.Errorf("KV half used by young requests: grew to %d (%s), past what the pool holds", got, why)
	}
	rd.perRequest = 40 // answers are shorter than max_new_tokens
	if got, why := r.next(rd); got != 12 || !strings.Contains(why, "its KV pool holds 12") {
		t.Errorf("requests of 40 tokens: %d (%q), want the 12 the pool holds", got, why)
	}
	// Its queue, gen alone on it, waits for gen's own requests to free
	// the pool: no cut below what the pool holds; another's queue is cut.
	r = newLimitRule(holdLimit, 4096)
	r.start(startFacts{poolTokens: 512 * 64, promptTokens: 32, outTokens: 32, preempts: true})
	rd = limitReading{inFlight: 512, running: 340, queued: 172, hasRunning: true, hasQueued: true, kv: 0.99, hasKV: true, perRequest: 64}
	for range 3 {
		if got, why := r.next(rd); got != 512 {
			t.Fatalf("gen's 512 in a pool of 512, 172 waiting for it: cut to %d (%s)", got, why)
		}
	}
	rd.queued = 400 // others' too
	r.next(rd)
	if got, _ := r.next(rd); got >= 512 {
		t.Errorf("400 queued, 228 of them others': no cut (%d)", got)
	}
	r = newLimitRule(holdLimit, 4096)
	if got, _ := r.start(startFacts{poolTokens: 1 << 24, promptTokens: 32, outTokens: 32, preempts: true}); got != maxPoolStart {
		t.Errorf("a pool of 262,144 requests: started at %d, want %d", got, maxPoolStart)
	}
}

// TestLimitCutsAtOnceWhenKVFull: a long queue with the KV cache near full
// is cut at its first reading (what waits cannot be admitted); a long
// queue alone waits for a second.
func TestLimitCutsAtOnceWhenKVFull(t *testing.T) {
	r := newLimitRule(1088, 4096)
	rd := full(1088, 512)
	if got, why := r.next(rd); got != 1088 {
		t.Fatalf("a long queue, KV unknown, once: cut to %d (%s)", got, why)
	}
	r = newLimitRule(1088, 4096)
	rd.kv, rd.hasKV = 0.97, true
	if got, why := r.next(rd); got != 512+queueKeep(512) || !strings.HasPrefix(why, whyKVFull) {
		t.Errorf("a long queue, KV full: %d (%q), want %d", got, why, 512+queueKeep(512))
	}
}
