package gen

import (
	"fmt"
	"time"
)

// slowWatch is the rule's "answers slow" signal (limitRule.next asks it
// at each reading the rest of the rule leaves the limit alone): it
// measures gen's own answers from a server over windows at one limit, and
// cuts where more requests at once no longer pay.
//
// A window opens once the batch turned over at the limit (twice as many
// answers as the limit came since it was set: those in flight before, and
// one batch at it) and closes after windowTurns times as many, over
// minWindowReadings readings and minWindowSecs at least, timed from
// answer to answer; any change of the limit by more than an eighth, or
// gen not pressing on it (a lull, the run's end), starts it again. A
// window gives the output tokens/s (gen's, as counted) and, by Little's
// law, the mean answer time (requests in flight / answers per s).
// Readings every 100-250 ms are noisy; a window of several batches is not.
//
// At a window's close:
//   - answers nearing --request-timeout (mean past timeoutShare of it) cut
//     the limit to where their time would be a third of it, at most to a
//     quarter at once: a request past the timeout is GPU work thrown away;
//   - answers that take slowAfter or more, at a limit that was not probed
//     lately, start a probe: half the limit for a window. While the half
//     does nearly as well as the top (its total tokens/s within slowGain
//     of the top's, its answers sooner), the top slowed answers for
//     nothing: it halves again. At the first half that does
//     worse, or at minProbe, the limit goes back to the last that paid
//     and is held there as a ceiling for reprobeAfter ("answers slow");
//     when the first half did worse, it goes back to where it began and
//     is not probed again for reprobeAfter, or 50 times what the probe
//     took if longer (a probe at half costs a server whose total rises a
//     third of its throughput for a few answer times: a fiftieth of that).
//     A window at each half takes less time than the one before (fewer
//     answers, each sooner).
//
// It touches nothing but its own state; its clock is the readings' times.
type slowWatch struct {
	timeout float64 // --request-timeout in seconds (0: none)
	// The window: limit it measures, answers when the limit was set, and
	// from its opening (open) the counts then and the sums since.
	limit  int
	setAt  float64
	open   bool
	t0     int64
	a0, k0 float64
	sumIn  float64
	n      int
	// The probe under way (probeFrom > 0): the limit it halved last, and
	// what the window there measured; top, where it began.
	probeFrom             int
	fromRate              float64
	fromSecs              float64
	top                   int
	topRate, topSecs      float64
	topAt                 int64 // Unix ms
	ceiling               int   // the most the limit may grow to (0: none)
	ceilingUntil, quietTo int64 // Unix ms: the ceiling lifts; probes may start again
}

// slowMeasure is what one window measured.
type slowMeasure struct {
	rate float64 // output tokens/s (answers/s when no counts)
	secs float64 // mean answer time
	// tokens: rate counts output tokens (false: answers, none counted)
	tokens bool
}

const (
	windowTurns       = 3
	minWindowReadings = 12
	minWindowSecs     = 2
	// slowAfter is the mean answer time past which a probe may start:
	// under it nobody waits long, and a window is too short to measure.
	slowAfter = 1.0
	// slowGain: a limit whose total is within this share of the top's
	// (the probe's start) holds (the top slowed answers for too little):
	// the total kept is within it of the top's, whatever the halvings, so
	// the signal never costs a 20-hour run more than that of its
	// throughput for answers that come sooner.
	slowGain     = 1.0 / 16
	timeoutShare = 0.5
	minProbe     = 8              // the least limit halved by a probe
	reprobeAfter = 10 * 60 * 1000 // ms
)

// whySlow starts the reason of a change for slow answers.
const whySlow = "answers slow"

// observe reads rd at limit and returns a new limit and why ("": none).
func (w *slowWatch) observe(rd limitReading, limit int) (int, string) {
	if w.ceiling > 0 && rd.at >= w.ceilingUntil {
		w.ceiling = 0 // a long while: the workload may have changed
	}
	if d := limit - w.limit; rd.at == 0 || max(d, -d) > w.limit/8 {
		// A new limit (small moves, the rule's trims of a queue or its
		// slow growth, measure the same). A probe goes on: the rule
		// moved it no higher than most.
		w.restart(rd, limit)
		return limit, ""
	}
	if rd.inFlight < limit-limit/8 {
		w.restart(rd, limit) // gen does not press on it: nothing to measure
		return limit, ""
	}
	if !w.open {
		if rd.answers-w.setAt >= float64(2*limit) {
			w.open, w.t0, w.a0, w.k0, w.sumIn, w.n = true, rd.answerTime(), rd.answers, rd.tokens, 0, 0
		}
		return limit, ""
	}
	w.n++
	w.sumIn += float64(rd.inFlight)
	secs := float64(rd.answerTime()-w.t0) / 1000
	answers := rd.answers - w.a0
	if answers < float64(windowTurns*limit) || w.n < minWindowReadings || secs < minWindowSecs {
		return limit, ""
	}
	m := slowMeasure{rate: answers / secs, secs: w.sumIn / float64(w.n) / (answers / secs)}
	if k := rd.tokens - w.k0; k > 0 {
		m.rate, m.tokens = k/secs, true
	}
	w.setAt = rd.answers - float64(2*w.limit) // it turned over: the next window opens now
	w.open = false
	return w.judge(m, w.limit, rd.at)
}

// most is the most the limit may grow to now (0: no bound of its own):
// the probe's half while one is under way, else the ceiling.
func (w *slowWatch) most() int {
	if w.probeFrom > 0 {
		return w.probeFrom / 2
	}
	return w.ceiling
}

// probing reports whether a probe is under way (its windows want
// readings often: growEvery).
func (w *slowWatch) probing() bool { return w.probeFrom > 0 }

// restart starts the window at limit again from rd.
func (w *slowWatch) restart(rd limitReading, limit int) {
	w.limit, w.setAt, w.open = limit, rd.answers, false
}

// judge decides from m, a window at limit closed at the time at.
func (w *slowWatch) judge(m slowMeasure, limit int, at int64) (int, string) {
	if w.timeout > 0 && m.secs > timeoutShare*w.timeout {
		to := max(minLimit, limit/4, int(float64(limit)*w.timeout/3/m.secs))
		w.probeFrom, w.ceiling, w.ceilingUntil = 0, to, at+reprobeAfter
		return to, fmt.Sprintf("%s (%s each, --request-timeout %s)", whySlow, waitText(m.secs), waitText(w.timeout))
	}
	if from := w.probeFrom; from > 0 {
		// What the halvings from top to limit cost the total, against
		// what they saved each answer.
		loss := w.topRate/max(m.rate, 1e-9) - 1
		if loss < slowGain && w.topSecs > m.secs {
			if limit/2 >= minLimit && limit >= minProbe {
				w.probeFrom, w.fromRate, w.fromSecs = limit, m.rate, m.secs
				return limit / 2, fmt.Sprintf("%s? (%s at %d, %s at %d: trying %d)", whySlow, m.rateText(w.topRate), w.top, m.rateText(m.rate), limit, limit/2)
			}
			from = limit // as low as it goes
		}
		// Probes and ceilings last a long while: reprobeAfter, and 50
		// times what this probe took (its windows' cost, a fiftieth).
		w.probeFrom, w.quietTo = 0, at+max(reprobeAfter, 50*(at-w.topAt))
		if from == w.top {
			return from, fmt.Sprintf("answers not slow (%s at %d, %s at %d)", m.rateText(w.fromRate), from, m.rateText(m.rate), limit)
		}
		w.ceiling, w.ceilingUntil = from, w.quietTo
		rate, secs := w.fromRate, w.fromSecs
		if from == limit {
			rate, secs = m.rate, m.secs
		}
		return from, fmt.Sprintf("%s (%s at %d, %s at %d; %s each at %d, %s at %d)", whySlow,
			m.rateText(w.topRate), w.top, m.rateText(rate), from, waitText(w.topSecs), w.top, waitText(secs), from)
	}
	if m.secs < slowAfter || at < w.quietTo || limit < minProbe {
		return limit, ""
	}
	w.probeFrom, w.fromRate, w.fromSecs = limit, m.rate, m.secs
	w.top, w.topRate, w.topSecs, w.topAt = limit, m.rate, m.secs, at
	return limit / 2, fmt.Sprintf("%s? (%s each at %d: trying %d)", whySlow, waitText(m.secs), limit, limit/2)
}

// answerTime is when the answers rd counts had come.
func (rd limitReading) answerTime() int64 {
	if rd.answeredAt > 0 {
		return rd.answeredAt
	}
	return rd.at
}

// waitText is an answer's time (or --request-timeout) as a reason says
// it: 350ms, 1.3s, 1m30s.
func waitText(secs float64) string {
	d := time.Duration(secs * float64(time.Second))
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

// rateText is a window's output rate as a reason says it: 5120 tok/s.
func (m slowMeasure) rateText(r float64) string {
	if !m.tokens {
		return fmt.Sprintf("%.1f answers/s", r)
	}
	return fmt.Sprintf("%.0f tok/s", r)
}
