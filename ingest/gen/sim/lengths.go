package sim

import "math"

// Natural lengths of the simulated answers, in tokens. A real model's answer
// does not know max_new_tokens: it has a length of its own, and the limit
// only cuts the answers longer than it. So the simulator draws each answer's
// length from its prompt and seed alone, log-normal (a long tail, as real
// answer lengths have):
//
//   - the answer (content before EOS) has a median of 64 tokens and
//     sigma 1 (mean about 105): SGLang's default 128 tokens cuts about one in
//     four answers, 256 one in twelve, 1,024 about one in 350, 8,192 none in
//     practice;
//   - a reasoning model first thinks for a median of 256 tokens, sigma 1
//     (its answer then follows): 128 tokens cuts nearly every such answer,
//     1,024 about one in ten, 4,096 one in 300 and 8,192 about one in 4,000.
//
// Raising the limit therefore cuts fewer answers, as on a real server, and
// an answer cut at a lower limit is the prefix of the same answer at a higher
// one (the token stream does not depend on the limit either).
const (
	answerMedian = 64.0
	answerSigma  = 1.0
	thinkMedian  = 256.0
	thinkSigma   = 1.0
	// maxNatural bounds a drawn length; a budget is always below it.
	maxNatural = 1 << 24
)

// logNormal draws a length with the given median and sigma from r (at least
// 1 token).
func logNormal(r *rng, median, sigma float64) int {
	// Box-Muller: 1-u is in (0, 1], so the log is finite.
	u, v := 1-r.float(), r.float()
	z := math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*v)
	return max(1, int(min(median*math.Exp(sigma*z), maxNatural)))
}

// naturalLengths draws the answer length and, for a reasoning model, the
// thinking length of the item with this seed; neither depends on the budget.
func naturalLengths(seed uint64, think bool) (answer, thinkLen int) {
	r := rng{state: seed ^ 0x5DEECE66D}
	answer = logNormal(&r, answerMedian, answerSigma)
	if think {
		thinkLen = logNormal(&r, thinkMedian, thinkSigma)
	}
	return answer, thinkLen
}
