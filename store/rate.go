package store

import (
	"math"
	"time"
)

// The rate model: every count and rate gendex shows over time (gen's live
// lines, `query throughput` and `series`, `gendex plot`, the shell's watch
// and its sparkline) is measured here, one way.
//
//   - A span ends at the moment it is asked (now), and counts every answer up
//     to it: the current second's bucket is the span's last, and it covers
//     the part of that second gone by (EndOf). A window of W seconds is the
//     buckets [now.Unix()-W, now.Unix()], W seconds and the current one's
//     part (Secs), so right after a run every answer is in some span.
//   - A dataset's window starts no earlier than the second of its first
//     answer, so a dataset that began 10 s ago is measured over 10 s, not
//     diluted over 30. One with no answer yet is measured over the whole
//     window (0 answers).
//   - A total over datasets is the same rule over their union: it starts at
//     the earliest first-answer second among the datasets with an answer in
//     the window. A dataset idle for the whole window adds no answers and does
//     not stretch the total's window, so the total of one running dataset is
//     that dataset's rate, and rows measured over the same seconds add up to
//     the total. `series`' TOTAL is this rule over its whole span, so it
//     equals `throughput --window` of that span.
//
// A rate is a count over Secs: records / Secs answers a second.

// Rate is what finished in the per-second buckets [From, To), which cover
// Secs seconds (To-From, or less when the last bucket is the current
// second, of which only a part has gone by).
type Rate struct {
	From, To int64
	Secs     float64
	Records  int64
	Tokens   int64 // completion tokens of the records that report a count
	Unknown  int64 // records without a token count
}

// Span returns the rate frame of the buckets [from, to) at now: Secs is
// to-from when those seconds are over, and counts only the part of the
// current second gone by when to reaches past it.
func Span(from, to int64, now time.Time) Rate {
	r := Rate{From: from, To: to, Secs: float64(to - from)}
	if cur := now.Unix(); to > cur {
		r.Secs = float64(cur-from) + float64(now.Nanosecond())/1e9
	}
	return r
}

// EndOf is the end (exclusive) of the buckets a span ending at now
// covers: the seconds begun before now, the current one included once any
// of it has gone by.
func EndOf(now time.Time) int64 {
	if now.Nanosecond() > 0 {
		return now.Unix() + 1
	}
	return now.Unix()
}

// RateSpan returns the frame of a rate over the last window at now, for
// a dataset whose first answer was in second first (hasFirst false: none
// yet): the buckets [from, EndOf(now)), from at least one whole second
// before the current one.
func RateSpan(now time.Time, window time.Duration, first int64, hasFirst bool) Rate {
	to := EndOf(now)
	from := now.Unix() - max(1, int64(window/time.Second))
	if hasFirst && first > from && first < to {
		from = first
	}
	return Span(from, to, now)
}

// TotalRate returns the rate of several datasets measured at the same now
// over the same window (see the rule above).
func TotalRate(now time.Time, window time.Duration, rates []Rate) Rate {
	all := RateSpan(now, window, 0, false)
	from := all.To
	var t Rate
	for _, r := range rates {
		t.Records += r.Records
		t.Tokens += r.Tokens
		t.Unknown += r.Unknown
		if r.Records > 0 {
			from = min(from, r.From)
		}
	}
	if t.Records == 0 {
		from = all.From
	}
	return t.over(Span(from, all.To, now))
}

// over returns r's counts in the frame f.
func (r Rate) over(f Rate) Rate {
	f.Records, f.Tokens, f.Unknown = r.Records, r.Tokens, r.Unknown
	return f
}

// Seconds is Secs, the length of the span, but never less than a
// millisecond: a rate over a span that has only begun is a count over
// that millisecond, not a division by zero.
func (r Rate) Seconds() float64 { return max(r.Secs, 0.001) }

// PerSecond is records per second.
func (r Rate) PerSecond() float64 { return float64(r.Records) / r.Seconds() }

// TokensPerSecond is completion tokens per second, of the records that
// report a count; ok is false when none does (the rate is unknown, not 0).
func (r Rate) TokensPerSecond() (perSec float64, ok bool) {
	if r.Records > 0 && r.Unknown == r.Records {
		return 0, false
	}
	return float64(r.Tokens) / r.Seconds(), true
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

// AnsweringWindow is how recent a dataset's last answer of the run must be
// for it to count as being answered, for DatasetETA: watch's longer window.
const AnsweringWindow = 5 * time.Minute

// DatasetETA is the one ETA rule of a dataset, in gen's live lines and
// watch alike: a run answers its datasets one after another at the run's
// perSec answers a second, so a dataset being answered (answering: it had
// an answer of this run in the last AnsweringWindow) has ahead of it the
// prompts left in those being answered before it; ahead carries their sum
// from one dataset to the next and gets its left. A dataset with prompts
// left that is not being answered (not started yet, or waiting) is
// "unknown", and adds nothing to ahead; one with none left is "done".
func DatasetETA(left int64, answering bool, ahead *int64, perSec float64) string {
	switch {
	case left <= 0:
		return ETA(0, perSec)
	case !answering:
		return "unknown"
	}
	*ahead += left
	return ETA(*ahead, perSec)
}
