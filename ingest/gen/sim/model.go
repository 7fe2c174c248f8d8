package sim

import (
	"bytes"
	"strconv"
)

// finishReason is meta_info.finish_reason. Its JSON form depends on kind.
type finishReason struct {
	kind       finishKind
	length     int    // finishLength
	matchedID  int    // finishStopToken
	matchedStr string // finishStopString
	message    string // aborts
	statusCode int    // finishAbortStatus
}

type finishKind int

const (
	finishLength      finishKind = iota + 1 // {"type":"length","length":N}
	finishStopToken                         // {"type":"stop","matched":ID}
	finishStopString                        // {"type":"stop","matched":"s"}
	finishAbort                             // {"type":"abort","message":m,"status_code":null,"err_type":null}
	finishAbortStatus                       // {"type":"abort","message":m,"status_code":C,"err_type":"BadRequestError"}
)

// typ returns the OpenAI finish_reason string.
func (f *finishReason) typ() string {
	switch f.kind {
	case finishLength:
		return "length"
	case finishStopToken, finishStopString:
		return "stop"
	}
	return "abort"
}

// matched returns the OpenAI matched_stop value: an int, a string or nil.
func (f *finishReason) matched() any {
	switch f.kind {
	case finishStopToken:
		return f.matchedID
	case finishStopString:
		return f.matchedStr
	}
	return nil
}

// MarshalJSON writes the SGLang finish reason object.
func (f *finishReason) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	switch f.kind {
	case finishLength:
		b.WriteString(`{"type":"length","length":` + strconv.Itoa(f.length) + `}`)
	case finishStopToken:
		b.WriteString(`{"type":"stop","matched":` + strconv.Itoa(f.matchedID) + `}`)
	case finishStopString:
		b.WriteString(`{"type":"stop","matched":`)
		b.Write(quote(f.matchedStr))
		b.WriteString(`}`)
	case finishAbort:
		b.WriteString(`{"type":"abort","message":`)
		b.Write(quote(f.message))
		b.WriteString(`,"status_code":null,"err_type":null}`)
	default:
		b.WriteString(`{"type":"abort","message":`)
		b.Write(quote(f.message))
		b.WriteString(`,"status_code":` + strconv.Itoa(f.statusCode) + `,"err_type":"BadRequestError"}`)
	}
	return b.Bytes(), nil
}

// plan is the complete deterministic output of one item, decided before it
// runs; running only paces it (or cuts it short on abort).
type plan struct {
	ids       []int
	finish    finishReason
	trimToken bool   // text omits the last id (matched stop token or EOS)
	trimStr   int    // bytes of a matched stop string to cut from the text
	thinkEnd  int    // index just past </think> in ids, or -1
	reasoning bool   // output starts with <think>
	seed      uint64 // the item's seed: draws the drafter's acceptances (see spec)
}

// plan decides the output of one item. budget is the effective
// max_new_tokens (already clipped to the context).
//
// The item's natural length (content tokens before EOS, the thinking of a
// reasoning model included) is drawn from the prompt and seeds alone (see
// naturalLengths): an item whose natural length fits the budget ends with
// EOS, a longer one finishes with "length". Neither the lengths nor the
// token stream depend on the budget, so shorter budgets give prefixes of
// longer outputs.
func (e *engine) plan(prompt []int, sp *samplingParams, budget int) *plan {
	seed := uint64(e.cfg.Seed)*0x9E3779B97F4A7C15 ^ hashIDs(prompt)
	if sp.salt != 0 {
		seed = mix(seed ^ sp.salt)
	}
	if !sp.greedy && sp.hasSeed {
		seed = mix(seed ^ mix(uint64(sp.seed)+0x51))
	}
	think := e.cfg.ReasoningParser && endsWithGenerationPrompt(prompt)
	answer, thinkLen := naturalLengths(seed, think)
	var call []int // a tool call's answer up to EOS (see tools.go)
	if e.cfg.ToolCalls && !sp.noToolCall && asksAnswer(prompt) {
		if call = e.tools.planCall(seed, prompt, sp.oneCall); call != nil {
			answer = len(call)
		}
	}
	natural := answer
	if think {
		natural += thinkLen + 6 // <think> \n words \n </think> \n \n
	}
	if sp.minNewTokens > natural+1 {
		natural = sp.minNewTokens - 1
	}

	p := &plan{ids: []int{}, thinkEnd: -1, reasoning: think, seed: seed}
	if budget == 0 {
		p.finish = finishReason{kind: finishLength, length: 0}
		return p
	}
	eos := !sp.ignoreEOS && natural+1 <= budget
	content := budget
	if eos {
		content = natural
	}
	p.ids = make([]int, 0, content+1)
	if think {
		tg := wordGen{r: &rng{state: seed ^ 0x7F4A7C15}}
		p.ids = appendLimited(p.ids, content, ThinkStartID, ByteBase+'\n')
		p.ids = tg.appendWords(p.ids, thinkLen, content)
		p.ids = appendLimited(p.ids, content, ByteBase+'\n', ThinkEndID, ByteBase+'\n', ByteBase+'\n')
		if content >= thinkLen+4 {
			p.thinkEnd = thinkLen + 4
		}
	}
	p.ids = appendLimited(p.ids, content, call...)
	ag := wordGen{r: &rng{state: seed}}
	p.ids = ag.appendWords(p.ids, content-len(p.ids), content)
	if eos {
		p.ids = append(p.ids, EOSID)
		p.finish = finishReason{kind: finishStopToken, matchedID: EOSID}
		p.trimToken = true
	} else {
		p.finish = finishReason{kind: finishLength, length: budget}
	}
	p.applyStops(sp)
	return p
}

// appendLimited appends ids to dst while len(dst) < limit.
func appendLimited(dst []int, limit int, ids ...int) []int {
	for _, id := range ids {
		if len(dst) >= limit {
			break
		}
		dst = append(dst, id)
	}
	return dst
}

// applyStops cuts the plan at the first stop token id or stop string that
// occurs at or after min_new_tokens, as the scheduler's check_finished does
// after every token.
func (p *plan) applyStops(sp *samplingParams) {
	if len(sp.stopTokenIDs) == 0 && len(sp.stop) == 0 {
		return
	}
	var text []byte
	for i, id := range p.ids {
		text = appendToken(text, id, sp.skipSpecial)
		if i+1 < sp.minNewTokens || (i == len(p.ids)-1 && p.finish.kind == finishStopToken) {
			continue
		}
		for _, stop := range sp.stopTokenIDs {
			if id == stop {
				p.ids = p.ids[:i+1]
				p.finish = finishReason{kind: finishStopToken, matchedID: id}
				p.trimToken = true
				p.fixThinkEnd()
				return
			}
		}
		for _, stop := range sp.stop {
			if bytes.HasSuffix(text, []byte(stop)) {
				p.ids = p.ids[:i+1]
				p.finish = finishReason{kind: finishStopString, matchedStr: stop}
				p.trimToken = false
				p.trimStr = len(stop)
				p.fixThinkEnd()
				return
			}
		}
	}
}

func (p *plan) fixThinkEnd() {
	if p.thinkEnd > len(p.ids) {
		p.thinkEnd = -1
	}
}

// text renders the first k output ids. final applies the stop trimming of a
// finished output unless noStopTrim.
func (p *plan) text(k int, sp *samplingParams, final bool) string {
	ids := p.ids[:k]
	trimStr := 0
	if final && !sp.noStopTrim {
		if p.trimToken && k == len(p.ids) && k > 0 {
			ids = ids[:k-1]
		}
		if k == len(p.ids) {
			trimStr = p.trimStr
		}
	}
	var b []byte
	for _, id := range ids {
		b = appendToken(b, id, sp.skipSpecial)
	}
	return string(b[:len(b)-min(trimStr, len(b))])
}

// reasoningTokens counts the output tokens up to and including </think>
// among the first k, as SGLang's update_reasoning_tokens does; 0 unless the
// model reasons.
func (p *plan) reasoningTokens(k int) int {
	if !p.reasoning {
		return 0
	}
	if p.thinkEnd >= 0 && k >= p.thinkEnd {
		return p.thinkEnd
	}
	return k
}

// words is the vocabulary of the simulated answers.
var words = []string{
	"the", "model", "answer", "data", "result", "value", "system", "request",
	"server", "token", "batch", "index", "query", "record", "field", "table",
	"each", "every", "some", "many", "few", "first", "next", "last",
	"is", "are", "was", "will", "can", "should", "may", "must",
	"read", "write", "send", "return", "check", "store", "build", "count",
	"quickly", "often", "rarely", "always", "then", "also", "still", "again",
	"small", "large", "simple", "clear", "stable", "useful", "short", "long",
	"and", "or", "but", "so", "with", "from", "into", "for",
}

// wordGen writes pseudo-random sentences as byte tokens.
type wordGen struct {
	r        *rng
	inSent   int // words left in the current sentence
	sentence int // sentences written
	pending  []byte
}

// appendWords appends want tokens of text to ids, stopping early at limit
// total ids.
func (g *wordGen) appendWords(ids []int, want, limit int) []int {
	for want > 0 && len(ids) < limit {
		if len(g.pending) == 0 {
			g.next()
		}
		ids = append(ids, ByteBase+int(g.pending[0]))
		g.pending = g.pending[1:]
		want--
	}
	return ids
}

// next queues the next word with its separator.
func (g *wordGen) next() {
	w := words[g.r.intn(len(words))]
	var b []byte
	if g.inSent == 0 {
		if g.sentence > 0 {
			if g.sentence%4 == 0 {
				b = append(b, '\n', '\n')
			} else {
				b = append(b, ' ')
			}
		}
		g.inSent = 5 + g.r.intn(10)
		g.sentence++
		b = append(b, w[0]-'a'+'A')
		b = append(b, w[1:]...)
	} else {
		b = append(b, ' ')
		b = append(b, w...)
	}
	g.inSent--
	if g.inSent == 0 {
		b = append(b, '.')
	}
	g.pending = append(g.pending[:0], b...)
}

// rng is splitmix64: small, fast and deterministic.
type rng struct{ state uint64 }

func (r *rng) next() uint64 {
	r.state += 0x9E3779B97F4A7C15
	return mix(r.state)
}

// float returns a uniform value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

// intn returns a uniform value in [0, n).
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// mix is the splitmix64 finalizer.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// hashIDs hashes a token sequence (FNV-1a over the ids, then mixed).
func hashIDs(ids []int) uint64 {
	h := uint64(14695981039346656037)
	for _, id := range ids {
		h ^= uint64(id)
		h *= 1099511628211
	}
	return mix(h ^ uint64(len(ids)))
}
