package query

import (
	"fmt"
	"strings"
	"testing"

	"gendex/store"
)

// TestRepeatedTextBlocks: one answer text given to 3 or more prompts (and
// more than 1% of the prompts) is a sign of a broken template or server:
// repeated_text blocks, counting every answer with such a text; texts
// given to fewer prompts say nothing.
func TestRepeatedTextBlocks(t *testing.T) {
	for _, c := range []struct {
		prompts uint64
		texts   []int  // the prompts with each text
		want    uint64 // repeated_text's count; 0: none
	}{
		{10, []int{3, 1, 1, 1, 1, 1, 1, 1}, 3},
		{10, []int{2, 2, 2, 2, 2}, 0},
		{10, []int{4, 3, 1, 1, 1}, 7},
		{500, []int{5, 4}, 0}, // at 500 prompts: 6 or more
		{500, []int{6, 4}, 6},
	} {
		rs := newTextStats()
		var n int
		for i, k := range c.texts {
			for range k {
				rs.count(fmt.Sprintf("p%d", n), []uint64{uint64(i)})
				n++
			}
		}
		for ; uint64(n) < c.prompts; n++ { // the others, each its own text
			rs.count(fmt.Sprintf("p%d", n), []uint64{uint64(1000 + n)})
		}
		rs.endPrompt()
		got := rs.finding(ReasonRepeated)
		name := fmt.Sprintf("%d prompts, texts %v", c.prompts, c.texts)
		switch {
		case c.want == 0 && got != nil:
			t.Errorf("%s: %+v; want no repeated_text", name, *got)
		case c.want > 0 && (got == nil || !got.blocks || got.count != c.want):
			t.Errorf("%s: %+v; want repeated_text, blocking, %d answers", name, got, c.want)
		}
	}
}

// TestRepeatedTextCountsPromptsNotSamples: a prompt's samples (gen
// --samples) that gave one text are one prompt's text, not a text shared
// by prompts: they do not block as repeated_text (they were counted once
// per sample, so 3 alike samples of one prompt blocked), and say so as the
// note samples_alike, counting their answers; samples that differ say
// nothing; a text shared by 3 prompts still blocks, counting each of its
// samples' answers.
func TestRepeatedTextCountsPromptsNotSamples(t *testing.T) {
	walk := func(units map[string][]uint64) *recordStats {
		rs := newTextStats()
		var keys []string
		for p := range 10 {
			for s := range 3 {
				keys = append(keys, store.UnitID(fmt.Sprintf("p%02d", p), s))
			}
		}
		for _, k := range keys { // in key order, as the index walks them
			texts, ok := units[k]
			if !ok {
				texts = []uint64{uint64(len(rs.texts) + 100)}
			}
			rs.count(k, texts)
		}
		rs.endPrompt()
		return rs
	}
	alike := walk(map[string][]uint64{
		store.UnitID("p03", 0): {7, 8}, store.UnitID("p03", 1): {8, 7}, store.UnitID("p03", 2): {7, 8},
	})
	if f := alike.finding(ReasonRepeated); f != nil {
		t.Errorf("one prompt's 3 alike samples: %+v; want no repeated_text", *f)
	}
	if f := alike.finding(ReasonSamplesAlike); f == nil || f.blocks || f.count != uint64(3) || !strings.HasPrefix(f.detail, "answers of 1 prompt whose") {
		t.Errorf("one prompt's 3 alike samples: samples_alike %+v; want a note counting 3 answers of 1 prompt", f)
	}
	shared := walk(map[string][]uint64{
		store.UnitID("p01", 0): {7}, store.UnitID("p01", 1): {9},
		store.UnitID("p02", 2): {7}, store.UnitID("p05", 1): {7}, store.UnitID("p05", 2): {7},
	})
	if f := shared.finding(ReasonRepeated); f == nil || !f.blocks || f.count != uint64(4) {
		t.Errorf("a text of 3 prompts (4 answers): repeated_text %+v; want blocking, 4 answers", f)
	}
	if f := shared.finding(ReasonSamplesAlike); f != nil {
		t.Errorf("samples that differ: %+v; want no samples_alike", *f)
	}
}

// newTextStats is a walk's stats ready to count texts.
func newTextStats() *recordStats {
	return &recordStats{read: true, texts: map[uint64]uint64{}, textAnswers: map[uint64]uint64{}}
}

// finding is content's finding of reason (nil: none).
func (rs *recordStats) finding(reason string) *finding {
	for _, f := range rs.content("DIR") {
		if f.reason == reason {
			return &f
		}
	}
	return nil
}
