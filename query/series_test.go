package query_test

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/query"
	"gendex/store"
)

// seriesNow is the end of seriesDB's answers.
var seriesNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// seriesAnswer is one answer of seriesDB, as the hand count sees it.
type seriesAnswer struct {
	dataset string
	sec     int64 // Unix second it finished in
	tokens  int64 // store.Unknown: no count
}

// seriesDB indexes, through the store API, answers of two datasets over
// the hour before seriesNow: "a" one every 7 s with a quiet stretch from
// 11:20 to 11:35 (whole minutes without answers), every 13th without a
// token count; "b" only from 11:30, one every 11 s. It returns them for
// the hand count.
func seriesDB(t testing.TB) (*store.DB, []seriesAnswer) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	start := seriesNow.Add(-time.Hour).Unix()
	var all []seriesAnswer
	for s := start; s < seriesNow.Unix(); s += 7 {
		if q0, q1 := seriesNow.Add(-40*time.Minute).Unix(), seriesNow.Add(-25*time.Minute).Unix(); s >= q0 && s < q1 {
			continue
		}
		tok := 100 + s%50
		if len(all)%13 == 5 {
			tok = store.Unknown
		}
		all = append(all, seriesAnswer{"a", s, tok})
	}
	for s := seriesNow.Add(-30*time.Minute).Unix() + 3; s < seriesNow.Unix(); s += 11 {
		all = append(all, seriesAnswer{"b", s, 300})
	}
	err = db.Update(func(tx *store.Tx) error {
		for i, a := range all {
			shape := store.ShapeFlat
			if a.tokens == store.Unknown {
				shape = store.ShapeUnknown
			}
			r := store.Record{ID: fmt.Sprint(i), Shape: shape, PromptTokens: 10, CompletionTokens: a.tokens, CachedTokens: store.Unknown,
				ReasoningTokens: store.Unknown, Finish: "stop", Time: a.sec*1000 + 500, OwnTime: true, File: 1}
			if _, err := tx.Add(a.dataset, store.Raw, &r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return db, all
}

// handCount counts the answers of datasets (all when none) in [from, to).
func handCount(all []seriesAnswer, from, to int64, datasets ...string) (records, tokens, unknown int64) {
	for _, a := range all {
		if a.sec < from || a.sec >= to || len(datasets) > 0 && !contains(datasets, a.dataset) {
			continue
		}
		records++
		if a.tokens == store.Unknown {
			unknown++
		} else {
			tokens += a.tokens
		}
	}
	return
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// rowSeconds returns how many of the index's seconds a row covers, and
// whether the last of them is the current one (its seconds a part: here,
// asked 1.5 s past a second, 0.5 of it).
func rowSeconds(t *testing.T, v any) (n int64, current bool) {
	t.Helper()
	if f, ok := v.(query.Fixed); ok {
		if f.V-math.Floor(f.V) != 0.5 {
			t.Errorf("seconds %v: want a whole number and the current second's half", f)
		}
		return int64(math.Ceil(f.V)), true
	}
	return asInt(t, v), false
}

func asInt(t *testing.T, v any) int64 {
	t.Helper()
	switch x := v.(type) {
	case uint64:
		return int64(x)
	case int64:
		return x
	}
	t.Fatalf("%v (%T) is not a count", v, v)
	return 0
}

// TestSeriesSumsEqualThroughput: over the same window, the rows of
// `series` add up to `throughput`'s TOTAL and to a hand count of the
// answers, per dataset and in all; every step is a row, the quiet minutes
// as rows of zeros; the rows tile the span without a gap or an overlap.
func TestSeriesSumsEqualThroughput(t *testing.T) {
	db, all := seriesDB(t)
	now := seriesNow.Add(1500 * time.Millisecond) // mid-second: 12:00:01 counts, its half gone by
	for _, c := range []struct{ since, step string }{{"1h", "1m"}, {"45m", "5m"}, {"50m", "7s"}, {"1h", ""}, {"10m", "1h"}} {
		args := []string{"series", "--since", c.since}
		if c.step != "" {
			args = append(args, "--step", c.step)
		}
		r := answer(t, db, now, args...)
		to := now.Unix() + 1 // the current second is the last row's
		from := now.Unix() - int64(mustParse(t, c.since)/time.Second)
		// Per dataset: rows tile [from, to), and their sums are the hand count.
		for _, ds := range []string{"a", "b"} {
			var recs, toks, unk int64
			at := from
			for _, row := range r.Rows {
				if row[1] != ds {
					continue
				}
				sec, err := time.Parse("2006-01-02T15:04:05.000Z07:00", row[0].(string))
				if err != nil {
					t.Fatal(err)
				}
				if sec.Unix() != at {
					t.Fatalf("%v %s: row at %s, want %s", args, ds, row[0], time.Unix(at, 0).UTC())
				}
				n, last := rowSeconds(t, row[2])
				if last != (at+n == to) {
					t.Errorf("%v %s at %s: seconds %v; only the last row, the current second's, is a part", args, ds, row[0], row[2])
				}
				wr, wt, wu := handCount(all, at, at+n, ds)
				if got := [3]int64{asInt(t, row[3]), 0, asInt(t, row[7])}; got[0] != wr || got[2] != wu {
					t.Errorf("%v %s at %s: answers/unknown %v, hand count %d/%d", args, ds, row[0], got, wr, wu)
				}
				if wr > wu && asInt(t, row[4]) != wt {
					t.Errorf("%v %s at %s: tokens %v, hand count %d", args, ds, row[0], row[4], wt)
				}
				if wr == 0 && (row[4] != uint64(0) && row[4] != int64(0) || row[6] != (query.Fixed{V: 0, Prec: 1})) {
					t.Errorf("%v %s at %s: a step without answers is a row of zeros, got %v", args, ds, row[0], row)
				}
				recs, toks, unk = recs+wr, toks+wt, unk+wu
				at += n
			}
			if at != to {
				t.Errorf("%v %s: rows end at %d, want %d", args, ds, at, to)
			}
			hr, ht, hu := handCount(all, from, to, ds)
			if [3]int64{recs, toks, unk} != [3]int64{hr, ht, hu} {
				t.Errorf("%v %s: rows sum to %d/%d/%d, hand count %d/%d/%d", args, ds, recs, toks, unk, hr, ht, hu)
			}
		}
		// TOTAL against throughput over the same window, and the hand count.
		tp := answer(t, db, now, "throughput", "--window", c.since)
		hr, ht, hu := handCount(all, from, to)
		tot := r.Total
		if asInt(t, tot[3]) != hr || asInt(t, tot[4]) != ht || asInt(t, tot[7]) != hu {
			t.Errorf("%v: TOTAL %v, hand count %d/%d/%d", args, tot, hr, ht, hu)
		}
		if asInt(t, tp.Total[2]) != asInt(t, tot[3]) || asInt(t, tp.Total[3]) != asInt(t, tot[4]) || asInt(t, tp.Total[6]) != asInt(t, tot[7]) {
			t.Errorf("%v: TOTAL %v, throughput's %v", args, tot, tp.Total)
		}
		// One rate rule: the same seconds, the same rates.
		if norm(tot[2]) != norm(tp.Total[1]) || norm(tot[5]) != norm(tp.Total[4]) || norm(tot[6]) != norm(tp.Total[5]) {
			t.Errorf("%v: TOTAL seconds and rates %v %v %v, throughput's %v %v %v", args, tot[2], tot[5], tot[6], tp.Total[1], tp.Total[4], tp.Total[5])
		}
	}
}

// TestSeriesGapsAndSteps: the quiet quarter hour of dataset a is 15 rows
// of zeros at --step 1m (not skipped); b, which began at 11:30, has zero
// rows before; the rows start at whole minutes, the first one cut at the
// span's start; the default step makes at most SeriesSteps rows.
func TestSeriesGapsAndSteps(t *testing.T) {
	db, _ := seriesDB(t)
	now := seriesNow.Add(30 * time.Second)
	r := answer(t, db, now, "series", "--since", "1h", "--step", "1m", "a")
	if len(r.Rows) != 61 {
		t.Fatalf("%d rows, want 61 (a first one of 30 s, 59 whole minutes, a last one of 30 s)", len(r.Rows))
	}
	if r.Rows[0][0] != "2026-12-01T11:00:30.000Z" || asInt(t, r.Rows[0][2]) != 30 || r.Rows[1][0] != "2026-12-01T11:01:00.000Z" || asInt(t, r.Rows[60][2]) != 30 {
		t.Errorf("first rows %v %v, last %v", r.Rows[0], r.Rows[1], r.Rows[60])
	}
	zeros := 0
	for _, row := range r.Rows {
		if asInt(t, row[3]) == 0 {
			zeros++
			if at := row[0].(string); (at < "2026-12-01T11:20" || at >= "2026-12-01T11:35") && at != "2026-12-01T12:00:00.000Z" {
				t.Errorf("zero row outside the quiet stretch and the half minute after the last answer: %v", row)
			}
		}
	}
	if zeros != 16 {
		t.Errorf("%d zero rows, want the quiet stretch's 15 and the last half minute", zeros)
	}
	// b's rows before its first answer are zeros too.
	r = answer(t, db, now, "series", "--since", "1h", "--step", "10m", "b")
	if len(r.Rows) != 7 || asInt(t, r.Rows[0][3]) != 0 || asInt(t, r.Rows[2][3]) != 0 || asInt(t, r.Rows[4][3]) == 0 {
		t.Errorf("b: %v", r.Rows)
	}
	// No --since: from the first answer; no --step: a round step, at most SeriesSteps rows.
	r = answer(t, db, now, "series", "a")
	if len(r.Rows) > query.SeriesSteps || len(r.Rows) < query.SeriesSteps/3 || r.Rows[0][0] != "2026-12-01T11:00:00.000Z" {
		t.Errorf("default: %d rows from %v", len(r.Rows), r.Rows[0])
	}
	for _, bad := range [][]string{{"series", "--step", "500ms"}, {"series", "--step", "x"}, {"series", "--since", "0s"}} {
		if _, err := query.Parse(bad); err == nil {
			t.Errorf("%v parsed", bad)
		}
	}
	if got := query.SeriesStep(3600, 120); got != 30*time.Second {
		t.Errorf("SeriesStep(1h) = %v", got)
	}
	if got := query.SeriesStep(30*86400, 120); got != 6*time.Hour {
		t.Errorf("SeriesStep(30 days) = %v", got)
	}
	if got := query.SeriesStep(400*86400, 120); got != 4*24*time.Hour {
		t.Errorf("SeriesStep(400 days) = %v", got)
	}
}

// TestSeriesServers: --servers gives one row per step and server from
// the samples: their count, the share up, the gauges' means, the server's
// tokens/s over the pairs closed in the row (a restart counted from 0),
// and a row without samples has them unknown.
func TestSeriesServers(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	err = db.Update(func(tx *store.Tx) error {
		for i, c := range []float64{0, 1000, 2000, 500, -1, -1, 1500, 2500} { // < 0: down
			at := t0.Add(time.Duration(i*10) * time.Second).UnixMilli()
			s := &store.ServerSample{Time: at, Up: c >= 0, Scraped: c >= 0, Run: 1}
			if c >= 0 {
				s.Set(store.MetricGenTokens, c)
				s.Set(store.MetricQueued, float64(i))
			}
			if err := tx.PutServerSample("http://s", s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := answer(t, db, t0.Add(2*time.Minute), "series", "--servers", "--step", "30s")
	want := [][]any{
		// 0, 10, 20: 2000 tokens over 20 s; queued 0, 1, 2.
		{"2026-12-01T10:00:00.000Z", "http://s", int64(30), int64(3), "1.00", nil, "1.0", nil, nil, nil, nil, nil, "100.0", nil},
		// 30 (restart: +500 over 10 s), 40 and 50 down.
		{"2026-12-01T10:00:30.000Z", "http://s", int64(30), int64(3), "0.33", nil, "3.0", nil, nil, nil, nil, nil, "50.0", nil},
		// 60 (after a down sample: no pair), 70 (+1000 over 10 s).
		{"2026-12-01T10:01:00.000Z", "http://s", int64(30), int64(2), "1.00", nil, "6.5", nil, nil, nil, nil, nil, "100.0", nil},
		{"2026-12-01T10:01:30.000Z", "http://s", int64(30), int64(0), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil},
	}
	if len(r.Rows) != len(want) {
		t.Fatalf("rows %v", r.Rows)
	}
	for i, row := range r.Rows {
		got := normRow(row)
		got[13] = nil // client rates: no client counts in this series
		for j := range want[i] {
			if got[j] != want[i][j] {
				t.Errorf("row %d %s = %v, want %v (row %v)", i, r.Columns[j], got[j], want[i][j], got)
			}
		}
	}
	if _, err := query.Answer(db, query.Query{Question: "series", PerServer: true, Servers: []string{"http://nope"}}, t0); err == nil {
		t.Error("an unknown server answered")
	}
}

func mustParse(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestSeriesBounded: a --step that would make more rows than a series
// holds (query.SeriesMaxRows over the datasets asked) is widened to a
// round step, said in a note, and the widened rows still count every
// answer; a step that fits is left as asked, without a note.
func TestSeriesBounded(t *testing.T) {
	db, all := seriesDB(t)
	now := seriesNow.Add(1500 * time.Millisecond)
	r := answer(t, db, now, "series", "--since", "8760h", "--step", "1s")
	if len(r.Rows) > query.SeriesMaxRows || len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "the step is widened to 30m") {
		t.Fatalf("a year at 1s over 2 datasets: %d rows (at most %d), notes %q; want the step widened to 30m, said",
			len(r.Rows), query.SeriesMaxRows, r.Notes)
	}
	var records int64
	for _, row := range r.Rows {
		records += asInt(t, row[3])
	}
	if want, _, _ := handCount(all, 0, now.Unix()+1); records != want {
		t.Errorf("the widened rows count %d answers, want %d", records, want)
	}
	r = answer(t, db, now, "series", "--since", "2h", "--step", "1s")
	if len(r.Rows) != 2*7201 || len(r.Notes) != 0 {
		t.Errorf("2h at 1s over 2 datasets: %d rows, notes %q; want 2 x 7201, as asked", len(r.Rows), r.Notes)
	}
}
