package store

import "testing"

// TestDatasetETA: the one ETA rule of a dataset: done with none left;
// unknown when it is not being answered (and it adds nothing to those
// after it); else its prompts left and those of the datasets being
// answered before it, over the run's rate.
func TestDatasetETA(t *testing.T) {
	var ahead int64
	for _, c := range []struct {
		left      int64
		answering bool
		want      string
	}{
		{0, false, "done"},
		{30, true, "15s"},      // 30 at 2/s
		{50, false, "unknown"}, // not started
		{10, true, "20s"},      // 30 + 10 at 2/s
	} {
		if got := DatasetETA(c.left, c.answering, &ahead, 2); got != c.want {
			t.Errorf("DatasetETA(%d, %v) = %q; want %q", c.left, c.answering, got, c.want)
		}
	}
	if ahead != 40 {
		t.Errorf("ahead = %d; want 40 (the datasets being answered)", ahead)
	}
	if got := DatasetETA(5, true, &ahead, 0); got != "unknown" {
		t.Errorf("at no rate: %q; want unknown", got)
	}
}
