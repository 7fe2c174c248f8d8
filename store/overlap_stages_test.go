package store

import "testing"

// TestOverlapStages: for every stage and every membership of the other
// stages, an id entering (or leaving) the stage moves each Overlap counter
// by the same amount as when only overlapStages of it are known.
func TestOverlapStages(t *testing.T) {
	for s := range numStages {
		bit := membership(1) << s
		for m := range membership(1 << numStages) {
			full, part := Overlap{}, Overlap{}
			full.apply(m&^bit, m|bit)
			p := m & overlapStages[s]
			part.apply(p&^bit, p|bit)
			if full != part {
				t.Errorf("%s entering with membership %06b: %+v; with only %06b known: %+v", s, m, full, p, part)
			}
		}
	}
}
