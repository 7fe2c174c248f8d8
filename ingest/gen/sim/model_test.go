package sim

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// testEngine returns the engine New(cfg) would build.
func testEngine(cfg Config) *engine {
	cfg = cfg.withDefaults()
	slots := newSlotPool(cfg.Slots)
	return newEngine(cfg, slots, nil, newMeters(cfg, slots, nil, time.Now()), &toolModel{cfg: cfg})
}

// params returns verified sampling params from a JSON object.
func params(t *testing.T, js string) *samplingParams {
	t.Helper()
	m, ok := asObject([]byte(js))
	if !ok {
		t.Fatalf("bad params %s", js)
	}
	sp, err := parseSamplingParams(m, 128)
	if err != nil {
		t.Fatalf("params %s: %v", js, err)
	}
	return sp
}

func TestPlanDeterministic(t *testing.T) {
	e := testEngine(Config{Seed: 7})
	sp := params(t, `{}`)
	a := e.plan(Encode("same prompt", true), sp, 128)
	b := e.plan(Encode("same prompt", true), sp, 128)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same prompt gave different plans")
	}
	c := testEngine(Config{Seed: 8}).plan(Encode("same prompt", true), sp, 128)
	if reflect.DeepEqual(a.ids, c.ids) {
		t.Error("another Seed gave the same output")
	}
}

func TestPlanLengthDistribution(t *testing.T) {
	e := testEngine(Config{})
	sp := params(t, `{}`)
	const n, budget = 2000, 128
	lengths := 0
	for i := range n {
		p := e.plan([]int{BOSID, ByteBase + i%256, ByteBase + i/256}, sp, budget)
		switch p.finish.kind {
		case finishLength:
			lengths++
			if len(p.ids) != budget || p.finish.length != budget {
				t.Fatalf("length finish with %d ids, length %d", len(p.ids), p.finish.length)
			}
		case finishStopToken:
			if len(p.ids) > budget || p.ids[len(p.ids)-1] != EOSID {
				t.Fatalf("stop finish with %d ids ending %d", len(p.ids), p.ids[len(p.ids)-1])
			}
		default:
			t.Fatalf("finish %v", p.finish)
		}
		if txt := p.text(len(p.ids), sp, true); strings.ContainsFunc(txt, func(r rune) bool {
			return !(r == ' ' || r == '.' || r == '\n' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
		}) {
			t.Fatalf("unreadable text %q", txt)
		}
	}
	if frac := float64(lengths) / n; frac < 0.05 || frac > 0.3 {
		t.Errorf("%.2f of outputs hit the length limit, want most to stop", frac)
	}
}

func TestPlanIgnoreEOSAndPrefix(t *testing.T) {
	e := testEngine(Config{})
	prompt := Encode("prefix property", true)
	long := e.plan(prompt, params(t, `{"ignore_eos":true}`), 300)
	if len(long.ids) != 300 || long.finish.kind != finishLength {
		t.Fatalf("ignore_eos gave %d ids, finish %v", len(long.ids), long.finish)
	}
	short := e.plan(prompt, params(t, `{"ignore_eos":true}`), 40)
	if !reflect.DeepEqual(short.ids, long.ids[:40]) {
		t.Error("a smaller budget is not a prefix of a larger one")
	}
}

func TestPlanStops(t *testing.T) {
	e := testEngine(Config{})
	prompt := Encode("stops", true)
	base := e.plan(prompt, params(t, `{"ignore_eos":true}`), 200)
	text := base.text(200, params(t, `{}`), false)
	space := strings.IndexByte(text, ' ')

	p := e.plan(prompt, params(t, `{"ignore_eos":true,"stop_token_ids":[288]}`), 200) // ' '
	if len(p.ids) != space+1 || p.finish.matched() != int(ByteBase+' ') {
		t.Fatalf("stop token: %d ids, matched %v; want %d", len(p.ids), p.finish.matched(), space+1)
	}
	if got := p.text(len(p.ids), params(t, `{}`), true); got != text[:space] {
		t.Errorf("stop token text %q, want %q", got, text[:space])
	}

	word := text[space+1 : space+4]
	sp := params(t, `{"ignore_eos":true,"stop":["`+word+`"]}`)
	p = e.plan(prompt, sp, 200)
	end := strings.Index(text, word) + len(word)
	if p.finish.matched() != word || len(p.ids) != end {
		t.Fatalf("stop string: matched %v with %d ids, want %q at %d", p.finish.matched(), len(p.ids), word, end)
	}
	if got := p.text(len(p.ids), sp, true); got != text[:end-len(word)] {
		t.Errorf("stop string text %q, want %q", got, text[:end-len(word)])
	}
	keep := params(t, `{"ignore_eos":true,"no_stop_trim":true,"stop":["`+word+`"]}`)
	if got := p.text(len(p.ids), keep, true); got != text[:end] {
		t.Errorf("no_stop_trim text %q, want %q", got, text[:end])
	}

	minNew := params(t, `{"ignore_eos":true,"min_new_tokens":50,"stop_token_ids":[288]}`)
	if p = e.plan(prompt, minNew, 200); len(p.ids) < 50 {
		t.Errorf("min_new_tokens 50 stopped after %d", len(p.ids))
	}
}

func TestPlanSamplingSeed(t *testing.T) {
	e := testEngine(Config{})
	prompt := Encode("seeded", true)
	a := e.plan(prompt, params(t, `{"sampling_seed":1,"ignore_eos":true}`), 64)
	b := e.plan(prompt, params(t, `{"sampling_seed":2,"ignore_eos":true}`), 64)
	if reflect.DeepEqual(a.ids, b.ids) {
		t.Error("different sampling seeds gave the same output")
	}
	g1 := e.plan(prompt, params(t, `{"sampling_seed":1,"temperature":0,"ignore_eos":true}`), 64)
	g2 := e.plan(prompt, params(t, `{"sampling_seed":2,"temperature":0,"ignore_eos":true}`), 64)
	if !reflect.DeepEqual(g1.ids, g2.ids) {
		t.Error("greedy output depends on sampling_seed")
	}
}

func TestPlanReasoning(t *testing.T) {
	e := testEngine(Config{ReasoningParser: true})
	prompt := applyChatTemplate([]chatMessage{{role: "user", content: "why"}}, chatTemplate{addGenerationPrompt: true})
	p := e.plan(prompt, params(t, `{"max_new_tokens":null}`), 4000)
	if p.ids[0] != ThinkStartID || p.thinkEnd < 0 || p.ids[p.thinkEnd-1] != ThinkEndID {
		t.Fatalf("no think section: %v", p.ids[:min(10, len(p.ids))])
	}
	if got := p.reasoningTokens(len(p.ids)); got != p.thinkEnd {
		t.Errorf("reasoning tokens %d, want %d", got, p.thinkEnd)
	}
	r, c := splitReasoning(p.text(len(p.ids), params(t, `{}`), true))
	if r == "" || c == "" || strings.Contains(c, "think>") {
		t.Errorf("split reasoning %q / content %q", r, c)
	}
	plain := e.plan(Encode("raw text", true), params(t, `{}`), 200)
	if plain.reasoning || plain.reasoningTokens(len(plain.ids)) != 0 {
		t.Error("raw prompt made the model reason")
	}
}

func TestSamplingParamErrors(t *testing.T) {
	for _, tc := range []struct{ js, msg string }{
		{`{"top_p":0.0}`, "top_p must be in (0, 1], got 0.0."},
		{`{"top_p":0}`, "top_p must be in (0, 1], got 0."},
		{`{"temperature":-0.5}`, "temperature must be a non-negative finite number, got -0.5."},
		{`{"top_k":0}`, "top_k must be -1 (disable) or at least 1, got 0."},
		{`{"min_p":1.5}`, "min_p must be in [0, 1], got 1.5."},
		{`{"presence_penalty":3}`, "presence_penalty must be in [-2, 2], got 3."},
		{`{"repetition_penalty":0.0}`, "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 0.0."},
		{`{"max_new_tokens":-1}`, "max_new_tokens must be at least 0, got -1."},
		{`{"max_new_tokens":4,"min_new_tokens":5}`, "min_new_tokens must be in [0, max_new_tokens(4)], got 5."},
		{`{"logit_bias":{"999999":1}}`, "logit_bias must has keys in [0, 151935], got 999999."},
		{`{"regex":"a","ebnf":"b"}`, "Only one of regex, json_schema, or ebnf can be set."},
	} {
		m, _ := asObject([]byte(tc.js))
		_, err := parseSamplingParams(m, 128)
		if err == nil || err.kind != kindValue || err.msg != tc.msg {
			t.Errorf("%s: got %v, want ValueError %q", tc.js, err, tc.msg)
		}
	}
	for _, js := range []string{`{"max_tokens":3}`, `{"temperature":"hot"}`} {
		m, _ := asObject([]byte(js))
		if _, err := parseSamplingParams(m, 128); err == nil || err.kind != kindType {
			t.Errorf("%s: got %v, want TypeError", js, err)
		}
	}
	if sp := params(t, `{"temperature":null,"top_p":null,"max_new_tokens":null}`); sp.maxNewTokens != unlimited {
		t.Errorf("null max_new_tokens = %d, want unlimited", sp.maxNewTokens)
	}
}

func TestPyFloat(t *testing.T) {
	for f, want := range map[float64]string{0: "0.0", 0.5: "0.5", -2.5: "-2.5", 1e-7: "1e-07", 1e16: "1e+16", 123456.0: "123456.0", 0.0001: "0.0001"} {
		if got := pyFloat(f); got != want {
			t.Errorf("pyFloat(%v) = %q, want %q", f, got, want)
		}
	}
}

// TestPlanNaturalLengths: an output's length is its own, not the limit's.
// The same prompt and seed give the same output at any budget, an output cut
// at a budget is the prefix of the output at a higher one (a reasoning
// model's thinking included), and a higher budget cuts fewer outputs; about
// a quarter at the default 128 and next to none at 8192.
func TestPlanNaturalLengths(t *testing.T) {
	budgets := []int{16, 64, 128, 256, 1024, 8192}
	for _, reasoning := range []bool{false, true} {
		e := testEngine(Config{Seed: 3, ReasoningParser: reasoning})
		cut := make([]int, len(budgets))
		const n = 1000
		for i := range n {
			prompt := applyChatTemplate([]chatMessage{{role: "user", content: fmt.Sprintf("question %d", i)}}, chatTemplate{addGenerationPrompt: true})
			var prev *plan
			for j, budget := range budgets {
				p := e.plan(prompt, params(t, `{}`), budget)
				if again := e.plan(prompt, params(t, `{}`), budget); budget == 256 && !reflect.DeepEqual(p, again) {
					t.Fatalf("prompt %d, budget %d: two plans differ", i, budget)
				}
				if p.finish.kind == finishLength {
					cut[j]++
				}
				if prev != nil && prev.finish.kind == finishLength {
					if len(p.ids) < len(prev.ids) || !reflect.DeepEqual(p.ids[:len(prev.ids)], prev.ids) {
						t.Fatalf("prompt %d: the output cut at %d is not a prefix of the output at %d", i, budgets[j-1], budget)
					}
				}
				if prev != nil && prev.finish.kind != finishLength && !reflect.DeepEqual(p, prev) {
					t.Fatalf("prompt %d: the output that ended at budget %d changed at %d", i, budgets[j-1], budget)
				}
				prev = p
			}
		}
		for j := 1; j < len(budgets); j++ {
			if cut[j] >= cut[j-1] && cut[j-1] > 0 {
				t.Errorf("reasoning %v: budget %d cut %d of %d, budget %d cut %d: a higher limit must cut fewer", reasoning, budgets[j-1], cut[j-1], n, budgets[j], cut[j])
			}
		}
		if frac := float64(cut[2]) / n; !reasoning && (frac < 0.15 || frac > 0.35) {
			t.Errorf("%.2f of the outputs cut at 128 tokens; want about a quarter", frac)
		}
		if last := cut[len(cut)-1]; last > n/200 {
			t.Errorf("reasoning %v: %d of %d outputs cut at 8192 tokens; want very few", reasoning, last, n)
		}
		t.Logf("reasoning %v: cut of %d at %v: %v", reasoning, n, budgets, cut)
	}
}
