package export

import (
	"slices"
	"testing"
)

// A tiny ChatML: 3 <|im_start|>, 4 <|im_end|>, 5 user, 7 assistant, 8
// tool, 2 the model's stop token; 10.. content.
func chatML(msgs ...[]int) []int {
	var p []int
	for _, m := range msgs {
		p = append(append(p, 3), m...)
		p = append(p, 4)
	}
	return append(p, 3, 7)
}

// TestTurnPlaces: an earlier turn is placed where the server's count puts
// it, verbatim or with the model's own ids in place of the rendered turn
// (another blank line before a call, dropped thinking, stripped text), or
// found without counts; a rendering that shares too little with the
// output is no place.
func TestTurnPlaces(t *testing.T) {
	user := []int{5, 10, 11}
	tool := []int{8, 12, 13}
	call := []int{40, 41, 42, 43, 44, 45, 46, 47, 48} // a call's markup
	for _, tc := range []struct {
		name   string
		out    []int // turn 1's output ids
		turn   []int // turn 1 as the server rendered it (after its role)
		starts bool  // the answer gives prompt_tokens
		want   []int // the record's prompt ids; nil: no place
		loss   []int // its ids under loss
	}{
		{"verbatim", []int{20, 21, 4}, []int{20, 21}, true, nil, []int{20, 21, 4}},
		{"stop rendered as its end", []int{20, 21, 2}, []int{20, 21}, true, nil, []int{20, 21}},
		{"another blank line before the call", append([]int{20, 9, 9}, append(call, 2)...), append([]int{20, 9, 9, 9, 9}, call...), true,
			append([]int{20, 9, 9}, call...), append([]int{20, 9, 9}, call...)},
		{"thinking dropped, text stripped", []int{30, 31, 32, 33, 9, 9, 20, 21, 22, 9, 2}, []int{20, 21, 22}, true,
			[]int{30, 31, 32, 33, 9, 9, 20, 21, 22, 9}, []int{30, 31, 32, 33, 9, 9, 20, 21, 22, 9}},
		{"thinking dropped, no counts", []int{30, 31, 32, 33, 9, 9, 20, 21, 22, 2}, []int{20, 21, 22}, false,
			[]int{30, 31, 32, 33, 9, 9, 20, 21, 22}, []int{30, 31, 32, 33, 9, 9, 20, 21, 22}},
		{"another blank line, no counts", append([]int{20, 9, 9}, append(call, 2)...), append([]int{20, 9, 9, 9, 9}, call...), false, nil, nil},
		{"a rendering unlike the output", []int{60, 61, 62, 63, 64, 65, 66, 67, 10, 2}, []int{20, 21, 22, 10}, true, nil, nil},
		{"a rendering sharing ids by chance", []int{60, 61, 62, 63, 64, 65, 66, 67, 10, 2}, []int{62, 70, 71, 10}, true, nil, nil},
		{"a short answer after thinking", []int{30, 31, 32, 33, 9, 9, 20, 21, 22, 2}, []int{20, 21, 22}, true,
			[]int{30, 31, 32, 33, 9, 9, 20, 21, 22}, []int{30, 31, 32, 33, 9, 9, 20, 21, 22}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := chatML(user)
			prompt := chatML(user, append([]int{7}, tc.turn...), tool)
			starts := []int64{int64(len(before)), int64(len(prompt))}
			if !tc.starts {
				starts[0] = -1
			}
			spans, failed, why := turnPlaces(prompt, [][]int{tc.out}, starts)
			if tc.loss == nil {
				if failed != 0 || why == "" {
					t.Fatalf("placed: %v", spans)
				}
				return
			}
			if failed >= 0 {
				t.Fatalf("turn %d not placed: %s", failed, why)
			}
			ids, mask := withOwnIDs(prompt, spans)
			want := prompt
			if tc.want != nil {
				want = chatML(user, append([]int{7}, tc.want...), tool)
			}
			var loss []int
			for i, m := range mask {
				if m {
					loss = append(loss, ids[i])
				}
			}
			if !slices.Equal(ids, want) || !slices.Equal(loss, tc.loss) {
				t.Errorf("ids %v, loss %v; want %v, loss %v", ids, loss, want, tc.loss)
			}
		})
	}
}
