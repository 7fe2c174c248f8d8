package query

import (
	"fmt"
	"testing"
)

// TestRepeatedTextBlocks: one answer text given to 3 or more prompts (and
// more than 1% of the records) is a sign of a broken template or server:
// repeated_text blocks, counting every answer with such a text; texts
// given to fewer prompts say nothing.
func TestRepeatedTextBlocks(t *testing.T) {
	for _, c := range []struct {
		records uint64
		texts   []uint64 // the answers with each text
		want    uint64   // repeated_text's count; 0: none
	}{
		{10, []uint64{3, 1, 1, 1, 1, 1, 1, 1}, 3},
		{10, []uint64{2, 2, 2, 2, 2}, 0},
		{10, []uint64{4, 3, 1, 1, 1}, 7},
		{500, []uint64{5, 4}, 0}, // at 500 records: 6 or more
		{500, []uint64{6, 4}, 6},
	} {
		rs := recordStats{read: true, records: c.records, texts: map[uint64]uint64{}}
		for i, n := range c.texts {
			rs.texts[uint64(i)] = n
		}
		var got *finding
		for _, f := range rs.content("DIR") {
			if f.reason == ReasonRepeated {
				got = &f
			}
		}
		name := fmt.Sprintf("%d records, texts %v", c.records, c.texts)
		switch {
		case c.want == 0 && got != nil:
			t.Errorf("%s: %+v; want no repeated_text", name, *got)
		case c.want > 0 && (got == nil || !got.blocks || got.count != c.want):
			t.Errorf("%s: %+v; want repeated_text, blocking, %d answers", name, got, c.want)
		}
	}
}
