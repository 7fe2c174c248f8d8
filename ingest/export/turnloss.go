package export

// The loss of a conversation's earlier turns in its ids record. The
// record is the last turn's prompt ids (the whole conversation as the
// server rendered it) and that turn's output ids; each earlier turn's own
// output ids must carry the loss where the prompt holds that turn.
//
// A server renders a turn from its message, not from the ids the model
// generated, and may render it otherwise: vLLM's tool parser keeps the
// text before a call as it is, so a template that puts a blank line
// between content and call renders "text\n\n" + call with another one;
// a parser re-serializes a call's arguments; a template ends the turn
// with its own end token, not the stop token generated. Each earlier turn
// i is placed so:
//
//  1. Its place in the prompt comes from the server's own count: turn i
//     was asked on a prompt of prompt_tokens ids, which the last prompt
//     begins with (the history is rendered alike each time), so the turn
//     starts there and ends before turn i+1's start. The count is trusted
//     only when the last turn's prompt_tokens is the number of prompt ids,
//     and the ids just before the start end as the last prompt does (with
//     the generation prompt, at least 2 ids).
//  2. Within its place, the turn's output ids found verbatim (or without
//     their last, the stop token the template renders as its own end of
//     turn) carry the loss where they are.
//  3. Else the rendered turn is replaced by the model's own ids. It
//     begins with a stretch of them (the start the two share, or what the
//     template kept: the text after dropped thinking, stripped), and when
//     the output goes on after that stretch, the longest tail of it found
//     next (at once, or long enough not to be there by chance: minTail)
//     ends it (a call after another blank line, re-serialized arguments);
//     a tail not found was dropped (stripped spaces). The template's end
//     of turn after it stays. The record then holds the model's own ids,
//     all under loss.
//  4. A turn whose place is not known (or not there) is looked for
//     verbatim after the turn before it.
//  5. Else the longest tail of its output ids found there, when it starts
//     right after a generation prompt, is the turn as the template
//     rendered it with the start of the output dropped (a template that
//     drops an earlier turn's thinking: Qwen3's): the whole output takes
//     its place.
//
// A turn placed by none of these has no loss: the answer is excluded
// (ReasonNoTurnLoss), never written as a record that trains on nothing
// there.

import (
	"strconv"
)

// lossSpan is a stretch of the last prompt that an earlier turn's loss
// covers: prompt[from:to], or, when own is not nil, the turn's own ids
// in its place.
type lossSpan struct {
	from, to int
	own      []int
}

// turnPlaces places the earlier turns of a conversation (outs[i] the
// output ids of turn i, starts[i] its prompt_tokens or store.Unknown, for
// every turn) in prompt, its last turn's prompt ids. On failure it
// returns the turn (from 0) that cannot be placed and why.
func turnPlaces(prompt []int, outs [][]int, starts []int64) (spans []lossSpan, failed int, why string) {
	k := len(starts)
	trusted := starts[k-1] == int64(len(prompt))
	from := 0
	for i, out := range outs {
		if len(out) == 0 { // nothing to train on
			continue
		}
		s, limit := int(starts[i]), len(prompt)
		if trusted && starts[i+1] >= int64(from) && starts[i+1] <= int64(len(prompt)) {
			limit = int(starts[i+1])
		}
		if trusted && starts[i] >= 0 && s >= from && s < limit && genPromptBefore(prompt, s) {
			if sp, ok := placeAt(prompt[s:limit], out); ok {
				sp.from, sp.to = sp.from+s, sp.to+s
				spans = append(spans, sp)
				from = sp.to
				continue
			}
		}
		sp, ok := findTurn(prompt, from, limit, out)
		if !ok {
			why := "the server rendered it otherwise than the model generated it, and the answer does not say where the turn starts in the prompt (no prompt_tokens for it)"
			if trusted && starts[i] >= 0 {
				why = "the server rendered it otherwise than the model generated it, and not at the place its prompt_tokens (" + strconv.FormatInt(starts[i], 10) + ") give"
			}
			return nil, i, why
		}
		spans = append(spans, sp)
		from = sp.to
	}
	return spans, -1, ""
}

// findTurn looks for a turn whose place is not known in prompt[from:]
// (steps 4 and 5 above): its output ids verbatim, or the longest tail of
// them right after a generation prompt, before limit.
func findTurn(prompt []int, from, limit int, out []int) (lossSpan, bool) {
	if at, n := verbatim(prompt[from:], out); at >= 0 {
		return lossSpan{from: from + at, to: from + at + n}, true
	}
	for _, own := range [][]int{out, out[:len(out)-1]} {
		if len(own) == 0 {
			continue
		}
		b, at := longestSuffixIn(prompt[from:limit], own)
		if b > 0 && genPromptBefore(prompt, from+at) {
			return lossSpan{from: from + at, to: from + at + b, own: own}, true
		}
	}
	return lossSpan{}, false
}

// genPromptBefore reports whether prompt[:s] ends as prompt does, with
// its generation prompt (at least 2 ids): a turn may start at s.
func genPromptBefore(prompt []int, s int) bool {
	n := len(prompt)
	return s >= 2 && n >= 2 && prompt[s-1] == prompt[n-1] && prompt[s-2] == prompt[n-2]
}

// verbatim returns the first place of out in s (or of out without its
// last id, the stop token a template may render as its own end of turn)
// and the length found; at is -1 when neither is there.
func verbatim(s, out []int) (at, n int) {
	if len(out) == 0 {
		return -1, 0
	}
	if at := index(s, out); at >= 0 {
		return at, len(out)
	}
	if len(out) > 1 {
		if at := index(s, out[:len(out)-1]); at >= 0 {
			return at, len(out) - 1
		}
	}
	return -1, 0
}

// minTail is the fewest ids of an output that, found after other
// rendered ids (or alone), mark a place in its rendered turn; fewer may be
// found there by chance.
const minTail = 8

// placeAt places a turn's output ids out in x, the place of its rendering
// (steps 2 and 3 above; offsets in x).
func placeAt(x, out []int) (lossSpan, bool) {
	if at, n := verbatim(x, out); at >= 0 {
		return lossSpan{from: 0, to: at + n}, true
	}
	// First with the stop token, whose tail must then be found; else
	// without it (rendered as another end of turn, or dropped).
	for i, own := range [][]int{out, out[:len(out)-1]} {
		if end, ok := renderedEnd(x, own, i == 0); ok {
			return lossSpan{from: 0, to: end, own: own}, true
		}
	}
	return lossSpan{}, false
}

// renderedEnd returns where in x the rendering of own ends: x begins with
// a stretch of own (the longest found in it: the shared start, or what the
// template kept of the output), and when own goes on after that stretch,
// the longest tail of own found in the rest of x ends it (found at once,
// or long enough: minTail); a tail not found so was dropped by the
// template, unless tailNeeded. Too little found of own is no place,
// unless the stretch (3 ids at least) runs to its end but for at most 2
// ids, as a template strips them (a short answer after thinking).
func renderedEnd(x, own []int, tailNeeded bool) (int, bool) {
	l, p := longestPrefixIn(own, x)
	if l == 0 {
		return 0, false
	}
	end, found := l, l
	if tail := own[p+l:]; len(tail) > 0 {
		b, at := longestSuffixIn(x[l:], tail)
		switch {
		case b > 0 && (at == 0 || b >= minTail):
			end, found = l+at+b, l+b
		case tailNeeded:
			return 0, false
		}
	}
	return end, found >= min(minTail, len(own)) || l >= 3 && len(own)-(p+l) <= 2
}

// longestPrefixIn returns the length of the longest start of x found in
// s, and where it is first found.
func longestPrefixIn(s, x []int) (n, at int) {
	lo, hi := 0, min(len(x), len(s))
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if index(s, x[:mid]) >= 0 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo, index(s, x[:lo])
}

// longestSuffixIn returns the length of the longest suffix of tail found
// in x, and where it is first found (0, -1 when not even its last id is).
func longestSuffixIn(x, tail []int) (n, at int) {
	lo, hi := 0, len(tail) // a suffix of length lo is found; hi is the most
	at = -1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if p := index(x, tail[len(tail)-mid:]); p >= 0 {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo > 0 {
		at = index(x, tail[len(tail)-lo:])
	}
	return lo, at
}

// withOwnIDs returns prompt with the turns' own ids in their places, and
// which of its positions carry loss.
func withOwnIDs(prompt []int, spans []lossSpan) (ids []int, mask []bool) {
	ids = make([]int, 0, len(prompt))
	mask = make([]bool, 0, len(prompt))
	at := 0
	for _, sp := range spans {
		ids = append(ids, prompt[at:sp.from]...)
		mask = append(mask, make([]bool, sp.from-at)...)
		loss := prompt[sp.from:sp.to]
		if sp.own != nil {
			loss = sp.own
		}
		ids = append(ids, loss...)
		for range loss {
			mask = append(mask, true)
		}
		at = sp.to
	}
	ids = append(ids, prompt[at:]...)
	mask = append(mask, make([]bool, len(prompt)-at)...)
	return ids, mask
}

// earlierTurnsLoss gives the earlier turns of conversation a their loss
// in promptIDs (its last turn's prompt ids): the prompt ids of its record,
// which positions carry loss, and how many turns hold the model's own ids
// in place of the server's rendering. An answer whose turn cannot be
// given its loss is excluded (ex).
func earlierTurnsLoss(j *job, a answer, promptIDs []byte, turnOf func(int) string) (ids []byte, mask []bool, own int, ex *outcome) {
	k := len(a.turns)
	prompt, ok := parseIDs(promptIDs)
	if !ok {
		return nil, nil, 0, excluded(ReasonBadAnswer, "%s: the prompt ids are not a list of token ids", j.where())
	}
	outs := make([][]int, k-1)
	starts := make([]int64, k)
	for i, t := range a.turns {
		starts[i] = t.promptTokens
		if i == k-1 {
			break
		}
		if outs[i], ok = parseIDs(t.outputIDs); !ok {
			return nil, nil, 0, excluded(ReasonBadAnswer, "%s: %soutput_ids is not a list of token ids", j.where(), turnOf(i))
		}
	}
	spans, failed, why := turnPlaces(prompt, outs, starts)
	if failed >= 0 {
		return nil, nil, 0, excluded(ReasonNoTurnLoss, "%sits %d output ids are not in the conversation's prompt ids: %s; no loss could be given to it (its conversations record can: --format conversations)",
			turnOf(failed), len(outs[failed]), why)
	}
	for _, sp := range spans {
		if sp.own != nil {
			own++
		}
	}
	if own == 0 {
		mask = make([]bool, len(prompt))
		for _, sp := range spans {
			for p := sp.from; p < sp.to; p++ {
				mask[p] = true
			}
		}
		return promptIDs, mask, 0, nil
	}
	withOwn, mask := withOwnIDs(prompt, spans)
	ids = make([]byte, 0, 8*len(withOwn)+2)
	ids = append(ids, '[')
	for i, id := range withOwn {
		if i > 0 {
			ids = append(ids, ',')
		}
		ids = strconv.AppendInt(ids, int64(id), 10)
	}
	return append(ids, ']'), mask, own, nil
}
