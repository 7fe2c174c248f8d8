package store_test

import (
	"math"
	"testing"
	"time"

	"gendex/store"
)

// A span counts every answer up to the moment it is asked: at 10:00:00.500
// a 30 s window is the buckets 09:59:30 to 10:00:00, over 30.5 s, so what
// finished at 10:00:00.2 counts.
func TestRateSpanCountsUpToNow(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 500e6, time.UTC)
	sec := now.Unix()
	for _, tc := range []struct {
		name     string
		window   time.Duration
		first    int64
		hasFirst bool
		from     int64
		secs     float64
	}{
		{"no answers yet: the whole window", 30 * time.Second, 0, false, sec - 30, 30.5},
		{"first answer long ago", 30 * time.Second, sec - 3600, true, sec - 30, 30.5},
		{"first answer 10 s ago: 10.5 s", 30 * time.Second, sec - 10, true, sec - 10, 10.5},
		{"first answer in the last completed second", 30 * time.Second, sec - 1, true, sec - 1, 1.5},
		{"first answer in the current second: its half so far", 30 * time.Second, sec, true, sec, 0.5},
		{"first answer after now", 30 * time.Second, sec + 5, true, sec - 30, 30.5},
		{"one second", time.Second, sec - 100, true, sec - 1, 1.5},
		{"below a second counts as one", 0, 0, false, sec - 1, 1.5},
	} {
		r := store.RateSpan(now, tc.window, tc.first, tc.hasFirst)
		if r.From != tc.from || r.To != sec+1 || r.Secs != tc.secs {
			t.Errorf("%s: [%d, %d) over %v s, want [%d, 1) over %v s (now 0)", tc.name, r.From-sec, r.To-sec, r.Secs, tc.from-sec, tc.secs)
		}
	}
	// Seconds that are over cover their length; a span asked exactly at a
	// second's start has a millisecond at least.
	if r := store.Span(sec-60, sec-30, now); r.Secs != 30 {
		t.Errorf("a past span: %v s, want 30", r.Secs)
	}
	at := time.Unix(sec, 0)
	if r := store.Span(sec, sec+1, at); r.Seconds() != 0.001 || r.PerSecond() != 0 {
		t.Errorf("a span that has just begun: %v s, %v/s", r.Seconds(), r.PerSecond())
	}
}

// The case: P1 has run for 45 s at 38 answers/s while three other
// datasets sat idle (one finished an hour ago, two never started). The
// total over the 5 m window is P1's 38/s, not 1710/300 = 5.7.
func TestTotalRateOneRunning(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC) // at a second's start: whole seconds
	w := 5 * time.Minute
	row := func(first int64, hasFirst bool, records int64) store.Rate {
		r := store.RateSpan(now, w, first, hasFirst)
		r.Records, r.Tokens = records, 10*records
		return r
	}
	p1 := row(now.Unix()-45, true, 38*45)
	rows := []store.Rate{row(now.Unix()-3600, true, 0), p1, row(0, false, 0), row(0, false, 0)}
	if got := p1.PerSecond(); got != 38 {
		t.Fatalf("P1 %.2f answers/s, want 38", got)
	}
	tot := store.TotalRate(now, w, rows)
	if tot.Seconds() != 45 || tot.Records != 38*45 || tot.PerSecond() != p1.PerSecond() {
		t.Errorf("TOTAL %d records over %v s = %.2f/s; want P1's 1710 over 45 s = 38/s", tot.Records, tot.Seconds(), tot.PerSecond())
	}
	if got, ok := tot.TokensPerSecond(); !ok || got != 380 {
		t.Errorf("TOTAL tokens/s = %v %v; want 380", got, ok)
	}

	// Two datasets over the same seconds: the total is the sum of the rows.
	a, b := row(now.Unix()-600, true, 300), row(now.Unix()-400, true, 600)
	tot = store.TotalRate(now, w, []store.Rate{a, b})
	if tot.Seconds() != 300 || tot.PerSecond() != a.PerSecond()+b.PerSecond() {
		t.Errorf("TOTAL %.2f/s over %v s; want %.2f + %.2f over 300 s", tot.PerSecond(), tot.Seconds(), a.PerSecond(), b.PerSecond())
	}
	// One started 100 s ago, one 20 s ago: the union starts 100 s ago.
	a, b = row(now.Unix()-100, true, 100), row(now.Unix()-20, true, 40)
	if tot = store.TotalRate(now, w, []store.Rate{a, b}); tot.Seconds() != 100 || tot.Records != 140 {
		t.Errorf("TOTAL %d records over %v s; want 140 over 100 s", tot.Records, tot.Seconds())
	}
	// Nothing anywhere: 0 over the whole window.
	if tot = store.TotalRate(now, w, []store.Rate{row(0, false, 0)}); tot.Seconds() != 300 || tot.PerSecond() != 0 {
		t.Errorf("empty TOTAL %v over %v s", tot.PerSecond(), tot.Seconds())
	}
	if tot = store.TotalRate(now, w, nil); tot.Seconds() != 300 {
		t.Errorf("TOTAL of no datasets over %v s, want 300", tot.Seconds())
	}
}

func TestRateTokensUnknown(t *testing.T) {
	r := store.Rate{From: 0, To: 10, Secs: 10, Records: 5, Unknown: 5}
	if _, ok := r.TokensPerSecond(); ok {
		t.Errorf("all records without a count: the token rate must be unknown")
	}
	r = store.Rate{From: 0, To: 10, Secs: 10, Records: 5, Tokens: 40, Unknown: 1}
	if got, ok := r.TokensPerSecond(); !ok || got != 4 {
		t.Errorf("tokens/s = %v %v; want 4", got, ok)
	}
	if got, ok := (store.Rate{From: 0, To: 10, Secs: 10}).TokensPerSecond(); !ok || got != 0 {
		t.Errorf("no records: tokens/s = %v %v; want 0", got, ok)
	}
}

func TestETA(t *testing.T) {
	for _, tc := range []struct {
		left   int64
		perSec float64
		want   string
	}{
		{0, 0, "done"},
		{0, 5, "done"},
		{10, 0, "unknown"},
		{10, math.NaN(), "unknown"},
		{10, -1, "unknown"},
		{10, math.Inf(1), "unknown"},
		{1 << 62, 1e-9, "unknown"},
		{1, 38, "1s"}, // never 0s while answers are left
		{90, 1, "1m30s"},
		{3600 * 38, 38, "1h0m0s"},
		{100, 3, "33s"},
	} {
		if got := store.ETA(tc.left, tc.perSec); got != tc.want {
			t.Errorf("ETA(%d, %v) = %q, want %q", tc.left, tc.perSec, got, tc.want)
		}
	}
}
