package store

import "slices"

// Tally is what the index holds of some datasets: their answers (of
// Owed.Answered: an answer a redo asks again counts once answered
// again), the prompts failed for good, and the answers still to get
// (Owed.ToGo; nil while a redo is still finding the answers it asks
// again).
type Tally struct {
	Answered int64  `json:"answered"`
	Failed   int64  `json:"failed"`
	ToGo     *int64 `json:"to_go,omitempty"`
}

// Tally is what the index holds of datasets now; a dataset not indexed
// yet holds nothing.
func (v *View) Tally(datasets []string) Tally {
	var t Tally
	var toGo int64
	known := true
	for _, name := range datasets {
		s, err := v.Summary(name)
		if err != nil {
			continue
		}
		o := s.Owed()
		t.Answered += int64(o.Answered)
		t.Failed += int64(o.Failed)
		toGo += int64(o.ToGo())
		known = known && o.RedoKnown
	}
	if known {
		t.ToGo = &toGo
	}
	return t
}

// lostCounts is what the index says r, a lost gen run, did: what its
// datasets hold at its end less what they held at its start (AtStart),
// and what they owe at its end. Its end is now when no run came after it
// (next nil), or, when one did (runs hold the index one at a time, so r's
// process was gone by then), the index as that run found it, when that run
// asks the same datasets and kept it. nil otherwise, and for a row stored
// before the runs kept their datasets.
func lostCounts(v *View, r, next *Run) *Tally {
	if r.AtStart == nil || len(r.Datasets) == 0 {
		return nil
	}
	var end Tally
	switch {
	case next == nil:
		end = v.Tally(r.Datasets)
	case next.AtStart != nil && sameSets(next.Datasets, r.Datasets):
		end = *next.AtStart
	default:
		return nil
	}
	return &Tally{Answered: max(end.Answered-r.AtStart.Answered, 0), Failed: max(end.Failed-r.AtStart.Failed, 0), ToGo: end.ToGo}
}

// sameSets reports whether a and b name the same datasets.
func sameSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
