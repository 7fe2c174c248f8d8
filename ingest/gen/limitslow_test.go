package gen

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// stepServer is a server whose decode step takes base + per x batch, with
// slots requests at most at once (the rest queued), answering out tokens
// a request: what the rule reads of it, reading by reading, with gen
// keeping its limit in flight. noise moves each reading's count of
// answers by a random share of one reading's answers in [-noise, +noise]
// (answers end in lumps: one comes a reading early or late), as a
// jitter around the true count, not a drift from it (a server's answers
// so far are what it did).
type stepServer struct {
	base, per  time.Duration
	slots, out int
	noise      float64
	rng        *rand.Rand
	at         int64   // ms
	done       float64 // the answers so far, without the jitter
}

// read advances the server by every (gen at limit) and returns the reading.
func (s *stepServer) read(limit int, every time.Duration) limitReading {
	run := min(limit, s.slots)
	step := (s.base + time.Duration(run)*s.per).Seconds()
	due := float64(run) / step / float64(s.out) * every.Seconds() // answers in this reading
	s.done += due
	s.at += every.Milliseconds()
	answers := s.done
	if s.noise > 0 {
		answers += due * s.noise * (2*s.rng.Float64() - 1)
	}
	return limitReading{inFlight: limit, running: float64(run), queued: float64(limit - run), hasRunning: true, hasQueued: true,
		secs: every.Seconds(), at: s.at, answers: answers, tokens: answers * float64(s.out)}
}

// runSteps runs a rule that started at what s states for n readings of
// every, and returns it and the reasons it gave.
func runSteps(s *stepServer, timeout time.Duration, n int, every time.Duration) (*limitRule, []string) {
	r := newLimitRule(holdLimit, MaxAdaptive)
	r.slow.timeout = timeout.Seconds()
	r.start(startFacts{running: s.slots})
	var whys []string
	for range n {
		if _, why := r.next(s.read(r.limit, every)); why != "" {
			whys = append(whys, why)
		}
	}
	return r, whys
}

// TestSlowAnswersCutToTheKnee: a server that states 1,024 slots but whose
// total tokens/s flattens long before (a step of 1.2 ms + 0.1 ms a
// request: from 1,024 running to 272 its total falls 3%, to 136 8%) has
// the limit cut below what it states, with an "answers slow" reason
// naming both rates, under noisy readings, and keeps within 1/16 of the
// total at what it states (a little more where one window's noise
// decides a halving): answers come sooner for almost nothing.
func TestSlowAnswersCutToTheKnee(t *testing.T) {
	total := func(run int) float64 { return float64(run) / (1.2 + 0.1*float64(run)) }
	for seed := range uint64(20) {
		s := &stepServer{base: 1200 * time.Microsecond, per: 100 * time.Microsecond, slots: 1024, out: 16,
			noise: 0.3, rng: rand.New(rand.NewPCG(seed, 1))}
		r, whys := runSteps(s, 0, 1200, 250*time.Millisecond)
		if r.limit < 136 || r.limit > 544 {
			t.Errorf("seed %d: limit %d, want 136 to 544 (%q)", seed, r.limit, whys)
		}
		if kept := total(min(r.limit, 1024)) / total(1024); kept < 1-1.5/16 {
			t.Errorf("seed %d: limit %d keeps %.3f of the total at 1,024: too much lost (%q)", seed, r.limit, kept, whys)
		}
		slow := false
		for _, w := range whys {
			slow = slow || strings.HasPrefix(w, whySlow+" (") && strings.Contains(w, "tok/s at 1088")
		}
		if !slow {
			t.Errorf("seed %d: no %q reason: %q", seed, whySlow, whys)
		}
	}
}

// TestSlowAnswersNotWhileTotalRises: a server whose total still rises by
// half at each doubling up to its slots (the bench's steps servers: a
// step of base = per x slots), answers taking seconds, is probed at half
// and goes back to its slots and queue, its answers found not slow, under
// noise too, and is not probed again for a long while (a probe costs it a
// third of its total for a few answer times); answers under a second are
// never probed.
func TestSlowAnswersNotWhileTotalRises(t *testing.T) {
	for seed := range uint64(20) {
		s := &stepServer{base: 102400 * time.Microsecond, per: 100 * time.Microsecond, slots: 1024, out: 16,
			noise: 0.3, rng: rand.New(rand.NewPCG(seed, 2))}
		r, whys := runSteps(s, 0, 1200, 250*time.Millisecond)
		if want := 1024 + queueKeep(1024); r.limit != want {
			t.Errorf("seed %d: limit %d, want %d (%q)", seed, r.limit, want, whys)
		}
		back, probes := false, 0
		for _, w := range whys {
			back = back || strings.HasPrefix(w, "answers not slow")
			if strings.HasPrefix(w, whySlow+"?") {
				probes++
			}
			if strings.HasPrefix(w, whySlow+" (") {
				t.Errorf("seed %d: cut for %q", seed, w)
			}
		}
		if !back || probes != 1 {
			t.Errorf("seed %d: %d probes in 5 minutes, want 1 (found not slow): %q", seed, probes, whys)
		}
	}
	s := &stepServer{base: 2 * time.Millisecond, per: 100 * time.Microsecond, slots: 1024, out: 4}
	if r, whys := runSteps(s, 0, 1200, 250*time.Millisecond); len(whys) != 0 || r.limit != 1024+queueKeep(1024) {
		t.Errorf("answers of 0.4 s: limit %d, reasons %q, want no change", r.limit, whys)
	}
}

// TestSlowAnswersNearTheTimeout: answers whose mean nears
// --request-timeout cut the limit (every request past it is work thrown
// away), saying so, to where they take about a third of it, and the
// limit grows no further than that for a long while; it may again after.
func TestSlowAnswersNearTheTimeout(t *testing.T) {
	// The total still rises (a step of 102.4 ms + 0.1 ms a request), but
	// at 1,024 running and 64 queued an answer of 16 tokens takes 3.5 s.
	s := &stepServer{base: 102400 * time.Microsecond, per: 100 * time.Microsecond, slots: 1024, out: 16}
	r, whys := runSteps(s, 4*time.Second, 80, 250*time.Millisecond)
	if len(whys) != 1 || !strings.HasPrefix(whys[0], whySlow+" (3.48s each, --request-timeout 4s)") {
		t.Fatalf("reasons %q, want a cut for the timeout", whys)
	}
	cut := r.limit
	if want := 1088 * 4 / 3 / 3.48; float64(cut) < want*0.9 || float64(cut) > want*1.1 {
		t.Errorf("limit %d after the cut, want about %.0f (a third of the timeout)", cut, want)
	}
	most := 0
	for range 2000 { // 500 s
		r.next(s.read(r.limit, 250*time.Millisecond))
		most = max(most, r.limit)
	}
	if most > cut {
		t.Errorf("the limit grew past the cut (%d) to %d within 10 minutes", cut, most)
	}
	for range 2800 { // 700 s more: the ceiling lifts
		r.next(s.read(r.limit, 250*time.Millisecond))
		most = max(most, r.limit)
	}
	if most <= cut {
		t.Errorf("the limit stayed at %d after the ceiling's while", r.limit)
	}
}
