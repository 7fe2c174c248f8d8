package query

import (
	"fmt"
	"slices"
	"time"

	"gendex/store"
)

// RunWindows returns the two rate windows a dashboard asks throughput for
// (30 s and 5 m), cut to the seconds since the last gen run started when
// it started within them: the seconds before a run are not its seconds.
// ask asks one question (a writer too old to know events gives whole
// windows).
func RunWindows(ask func(args ...string) (*Result, error), now time.Time) (short, long string) {
	short, long = "30s", "5m"
	ev, err := ask("events", "--since", "5m")
	if err != nil {
		return
	}
	var start time.Time
	for _, row := range ev.Rows {
		if name, _ := ev.Get(row, "event").(string); name == "start" {
			at, _ := ev.Get(row, "time").(string)
			if t, err := time.Parse(time.RFC3339Nano, at); err == nil {
				start = t
			}
		}
	}
	if start.IsZero() {
		return
	}
	secs := max(1, now.Unix()-start.Unix())
	if secs < 30 {
		short = fmt.Sprintf("%ds", secs)
	}
	if secs < 300 {
		long = fmt.Sprintf("%ds", secs)
	}
	return short, long
}

// ETAs is the one ETA rule (store.DatasetETA) over a dashboard's answers:
// progress, and throughput over RunWindows' short and long windows. The
// run's rate is the short window's TOTAL answers/s, or the long one's when
// nothing finished in the short one; a dataset is being answered when it
// had answers in either window, and those listed before it are ahead of
// it. It returns each progress row's ETA by its first cell (TOTAL's too);
// a dataset the rates do not list has none.
func ETAs(prog, short, long *Result) map[string]string {
	rate, _ := AsFloat(short.Get(short.Total, "records_per_s"))
	if rate == 0 {
		rate, _ = AsFloat(long.Get(long.Total, "records_per_s"))
	}
	byName := func(r *Result) map[any][]any {
		m := map[any][]any{}
		for _, row := range r.Rows {
			m[row[0]] = row
		}
		return m
	}
	shortBy, longBy := byName(short), byName(long)
	out := map[string]string{}
	var ahead int64
	eta := func(row []any, fn func(left int64) string) {
		name, _ := row[0].(string)
		left, ok := ToGo(prog, row)
		if !ok {
			out[name] = "unknown"
			return
		}
		out[name] = fn(left)
	}
	for _, row := range prog.Rows {
		sh, lo := shortBy[row[0]], longBy[row[0]]
		if sh == nil || lo == nil {
			continue
		}
		s, _ := AsFloat(short.Get(sh, "records_per_s"))
		l, _ := AsFloat(long.Get(lo, "records_per_s"))
		eta(row, func(left int64) string { return store.DatasetETA(left, s > 0 || l > 0, &ahead, rate) })
	}
	if prog.Total != nil {
		eta(prog.Total, func(left int64) string { return store.ETA(left, rate) })
	}
	return out
}

// Get returns the value of a named column in row, or nil.
func (r *Result) Get(row []any, column string) any {
	if i := slices.Index(r.Columns, column); i >= 0 && i < len(row) {
		return row[i]
	}
	return nil
}

// AsFloat reads a number of an answer (a count, or a Fixed share or rate).
func AsFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case uint64:
		return float64(x), true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case float64:
		return x, true
	case Fixed:
		return x.V, true
	}
	return 0, false
}
