package query

import "testing"

// TestJudgeReadsEveryTurn: the content checks of one answer look at every
// assistant turn: a turn that only calls a tool is not empty, a turn of
// white space without a call is; <think> markers count in any turn whose
// reasoning is kept apart (not in one that keeps its thinking in its
// text); a text is one of the answer's texts however many of its turns
// hold it.
func TestJudgeReadsEveryTurn(t *testing.T) {
	for _, tc := range []struct {
		name                string
		turns               []CheckedTurn
		empty, think, texts uint64
	}{
		{"a call alone", []CheckedTurn{{Calls: 1}, {Text: "It is 15C."}}, 0, 0, 1},
		{"white space", []CheckedTurn{{Text: "Sure."}, {Text: " \n"}}, 1, 0, 1},
		{"null text, no call", []CheckedTurn{{Text: "a"}, {}}, 1, 0, 1},
		{"no turn", nil, 1, 0, 0},
		{"think in a later turn", []CheckedTurn{{Text: "a"}, {Text: "<think>x</think> b", Reasoning: "x"}}, 0, 1, 2},
		{"thinking kept in the text", []CheckedTurn{{Text: "<think>x</think> b"}}, 0, 0, 1},
		{"one text twice", []CheckedTurn{{Text: "same"}, {Text: "same"}}, 0, 0, 1},
	} {
		var rs recordStats
		j := rs.judge(CheckedAnswer{Turns: tc.turns})
		if rs.empty != tc.empty || rs.think != tc.think || uint64(len(j.texts)) != tc.texts {
			t.Errorf("%s: empty %d, think %d, %d texts; want %d, %d, %d", tc.name, rs.empty, rs.think, len(j.texts), tc.empty, tc.think, tc.texts)
		}
	}
}
