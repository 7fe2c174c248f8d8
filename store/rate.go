package store

import (
	"math"
	"time"
)

// The rate model: every rate gendex shows (gen's live lines, `query
// throughput`, the shell's watch) is measured here, one way.
//
//   - Only completed seconds count. At time now the second now.Unix() is not
//     over and never counts: a window of W seconds is the seconds
//     [now.Unix()-W, now.Unix()).
//   - A dataset's window starts no earlier than the second of its first
//     answer, so a dataset that began 10 s ago is measured over 10 s, not
//     diluted over 30. One with no answer in a completed second yet is
//     measured over the whole window (0 answers).
//   - A total over datasets is the same rule over their union: it starts at
//     the earliest first-answer second among the datasets with an answer in
//     the window. A dataset idle for the whole window adds no answers and does
//     not stretch the total's window, so the total of one running dataset is
//     that dataset's rate, and rows measured over the same seconds add up to
//     the total.

// Rate is what finished in the seconds [From, To).
type Rate struct {
	From, To int64
	Records  int64
	Tokens   int64 // completion tokens of the records that report a count
	Unknown  int64 // records without a token count
}

// RateSpan returns the seconds [from, to) a rate over the last window at now
// measures, for a dataset whose first answer was in second first (hasFirst
// false: none yet). The span is at least one second.
func RateSpan(now time.Time, window time.Duration, first int64, hasFirst bool) (from, to int64) {
	to = now.Unix()
	from = to - max(1, int64(window/time.Second))
	if hasFirst && first > from && first < to {
		from = first
	}
	return from, to
}

// TotalRate returns the rate of several datasets measured at the same now
// over the same window (see the rule above).
func TotalRate(now time.Time, window time.Duration, rates []Rate) Rate {
	from, to := RateSpan(now, window, 0, false)
	t := Rate{From: to, To: to}
	for _, r := range rates {
		t.Records += r.Records
		t.Tokens += r.Tokens
		t.Unknown += r.Unknown
		if r.Records > 0 {
			t.From = min(t.From, r.From)
		}
	}
	if t.Records == 0 {
		t.From = from
	}
	return t
}

// Seconds is the length of the window, at least 1.
func (r Rate) Seconds() int64 { return max(1, r.To-r.From) }

// PerSecond is records per second.
func (r Rate) PerSecond() float64 { return float64(r.Records) / float64(r.Seconds()) }

// TokensPerSecond is completion tokens per second, of the records that
// report a count; ok is false when none does (the rate is unknown, not 0).
func (r Rate) TokensPerSecond() (perSec float64, ok bool) {
	if r.Records > 0 && r.Unknown == r.Records {
		return 0, false
	}
	return float64(r.Tokens) / float64(r.Seconds()), true
}

// ETA says how long left answers take at perSec answers a second: "done"
// when none are left; "unknown" when the rate is 0, not known, or so low the
// time does not fit a time.Duration; else the time rounded to whole seconds
// (at least 1s) as time.Duration prints it (1m30s). Never "0s".
func ETA(left int64, perSec float64) string {
	switch {
	case left <= 0:
		return "done"
	case !(perSec > 0) || math.IsInf(perSec, 0):
		return "unknown"
	}
	secs := max(1, math.Round(float64(left)/perSec))
	if secs > float64(math.MaxInt64/int64(time.Second)) {
		return "unknown"
	}
	return (time.Duration(secs) * time.Second).String()
}
