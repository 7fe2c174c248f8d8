package query

import (
	"fmt"
	"testing"
)

// TestMixShareRule: a value is off when its count is more than 4.5
// standard deviations of the binomial from its weight's share, or when
// the spec cannot draw it at all.
func TestMixShareRule(t *testing.T) {
	for _, c := range []struct {
		s   mixShare
		off bool
	}{
		{mixShare{weight: 0.15, count: 300, n: 2000}, false}, // exactly its share
		{mixShare{weight: 0.15, count: 370, n: 2000}, false}, // sd 16: 4.4 sd
		{mixShare{weight: 0.15, count: 375, n: 2000}, true},  // 4.7 sd
		{mixShare{weight: 0.15, count: 225, n: 2000}, true},  // too few
		{mixShare{weight: 0, count: 1, n: 2000}, true},       // not in the spec
		{mixShare{weight: 1, count: 2000, n: 2000}, false},   // the only value
		{mixShare{weight: 0.5, count: 10, n: 10}, false},     // 10 of 10 at 0.5: 3.2 sd
	} {
		if got := c.s.off(); got != c.off {
			t.Errorf("%d of %d at weight %v: off %v (z %.2f), want %v", c.s.count, c.s.n, c.s.weight, got, c.s.z(), c.off)
		}
	}
	if got := fmt.Sprint(specWeights("0:0.15,1.0:0.70,u(0.2,1.0):0.15")); got != "[{0 0.15} {1.0 0.7} {u(0.2,1.0) 0.15}]" {
		t.Errorf("specWeights: %s", got)
	}
}
