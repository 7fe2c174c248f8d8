package query_test

import (
	"testing"

	"gendex/query"
)

// TestETAs: the one ETA rule over a dashboard's answers. A dataset being
// answered (answers in either window) waits for those before it; one not
// started is unknown and delays nothing; one with none left is done; the
// run's rate is the short window's, the long one's when the short is 0.
func TestETAs(t *testing.T) {
	prog := &query.Result{Columns: []string{"dataset", "prompts", "missing_raw"},
		Rows:  [][]any{{"a", uint64(100), uint64(20)}, {"b", uint64(50), uint64(50)}, {"c", uint64(40), uint64(10)}, {"d", uint64(5), uint64(0)}},
		Total: []any{"TOTAL", uint64(195), uint64(80)}}
	rates := func(total float64, per ...float64) *query.Result {
		r := &query.Result{Columns: []string{"dataset", "records_per_s"}}
		for i, name := range []string{"a", "b", "c", "d"} {
			r.Rows = append(r.Rows, []any{name, query.Fixed{V: per[i], Prec: 2}})
		}
		r.Total = []any{"TOTAL", query.Fixed{V: total, Prec: 2}}
		return r
	}
	short, long := rates(2, 1, 0, 1, 0), rates(1, 1, 0, 0, 0)
	got := query.ETAs(prog, short, long)
	want := map[string]string{"a": "10s", "b": "unknown", "c": "15s", "d": "done", "TOTAL": "40s"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("ETA of %s = %q, want %q (all: %v)", k, got[k], w, got)
		}
	}
	// Nothing in the last 30 s: the 5 m rate is the run's.
	got = query.ETAs(prog, rates(0, 0, 0, 0, 0), rates(4, 2, 0, 2, 0))
	if got["a"] != "5s" || got["c"] != "8s" || got["TOTAL"] != "20s" {
		t.Errorf("on the long window's rate: %v", got)
	}
}
