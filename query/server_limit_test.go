package query_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gendex/query"
	"gendex/query/format"
	"gendex/store"
)

// limitT0 is when limitDB's run began; its samples are 5 s apart for a
// minute.
var limitT0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// limitDB stores, through the store API, a gen run on two servers:
// http://gpu1:30000 sampled by a gen that keeps its limit (128, then 512
// from t0+20s, 390 from t0+40s, each change an event with its reason) and
// whose preemption counter climbs from t0+40s (5, 20, 37); and
// http://gpu2:30000, sampled by a gen older than the limit (Limit and
// InFlight 0) with no preemption counter, down once.
func limitDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "l.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	preempt := []float64{0, 0, 0, 0, 0, 0, 0, 0, 5, 20, 37, 37}
	err = db.Update(func(tx *store.Tx) error {
		for i := range 12 {
			at := limitT0.Add(time.Duration(i) * 5 * time.Second).UnixMilli()
			limit := int64(128)
			switch {
			case i >= 8:
				limit = 390
			case i >= 4:
				limit = 512
			}
			a := &store.ServerSample{Time: at, Up: true, Scraped: true, Run: limitT0.UnixMilli(), LastSeen: at,
				Limit: limit, InFlight: limit - int64(i)}
			a.Set(store.MetricRunning, 100)
			a.Set(store.MetricQueued, 4)
			a.Set(store.MetricPreemptions, preempt[i])
			if err := tx.PutServerSample("http://gpu1:30000", a); err != nil {
				return err
			}
			b := &store.ServerSample{Time: at, Up: true, Scraped: true, Run: limitT0.UnixMilli(), LastSeen: at}
			b.Set(store.MetricRunning, 16)
			if err := tx.PutServerSample("http://gpu2:30000", b); err != nil {
				return err
			}
		}
		for _, e := range []store.Event{
			{Time: limitT0.UnixMilli(), Name: "start"},
			{Time: limitT0.Add(10 * time.Second).UnixMilli(), Server: "http://gpu2:30000", Name: "down", Detail: "3 requests in flight"},
			{Time: limitT0.Add(20 * time.Second).UnixMilli(), Server: "http://gpu1:30000", Name: "limit", Detail: "128 -> 512: room (running 128 of 1024, no queue)"},
			{Time: limitT0.Add(40 * time.Second).UnixMilli(), Server: "http://gpu1:30000", Name: "limit", Detail: "512 -> 390: preemptions (5 in 5s)"},
		} {
			if err := tx.AddEvent(&e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestServerShowsLimit: query server gives each server gen's limit and its
// requests in flight from the last sample, and the server's preemptions
// over the window (the counter's increase); a server whose samples do not
// keep a limit (an older gen) and has no preemption counter shows them
// unknown, never 0: null in JSON, "unknown" in a table, which leaves the
// columns out when no server knows them.
func TestServerShowsLimit(t *testing.T) {
	db := limitDB(t)
	now := limitT0.Add(60 * time.Second)
	r := answer(t, db, now, "server", "--window", "30s")
	cols := []string{"server", "limit", "in_flight", "preemptions", "running"}
	var got [][]any
	for _, row := range r.Rows {
		var g []any
		for _, c := range cols {
			g = append(g, r.Get(row, c))
		}
		got = append(got, g)
	}
	want := [][]any{
		{"http://gpu1:30000", uint64(390), uint64(379), uint64(37), uint64(100)},
		{"http://gpu2:30000", nil, nil, nil, uint64(16)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("server %v = %v; want %v", cols, got, want)
	}
	// A window before the preemptions began: 0 of them, known.
	r = answer(t, db, limitT0.Add(36*time.Second), "server", "--window", "30s", "http://gpu1:30000")
	if l, p := r.Get(r.Rows[0], "limit"), r.Get(r.Rows[0], "preemptions"); l != uint64(512) || p != uint64(0) {
		t.Errorf("at t0+36s: limit %v, preemptions %v; want 512, 0", l, p)
	}

	var js strings.Builder
	if err := format.Write(&js, answer(t, db, now, "server"), format.Options{Format: query.JSON}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"limit": 390, "in_flight": 379, "preemptions": 37,`, `"limit": null, "in_flight": null, "preemptions": null,`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("JSON lacks %s:\n%s", want, js.String())
		}
	}
	var tab strings.Builder
	if err := format.Write(&tab, answer(t, db, now, "server"), format.Options{Format: query.Table, Layout: "server"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(tab.String(), "\n")
	head := strings.Fields(lines[0])
	col := func(name string) int {
		for i, h := range head {
			if h == name {
				return i
			}
		}
		t.Fatalf("the table has no %s column:\n%s", name, tab.String())
		return -1
	}
	for i, want := range map[int][3]string{1: {"390", "379", "37"}, 2: {"unknown", "unknown", "unknown"}} {
		f := strings.Fields(lines[i])
		if got := [3]string{f[col("limit")], f[col("in_flight")], f[col("preemptions")]}; got != want {
			t.Errorf("table row %d: limit, in_flight, preemptions %q; want %q\n%s", i, got, want, tab.String())
		}
	}
	tab.Reset()
	if err := format.Write(&tab, answer(t, db, now, "server", "http://gpu2:30000"), format.Options{Format: query.Table, Layout: "server"}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(tab.String(), "limit") || strings.Contains(tab.String(), "preemptions") {
		t.Errorf("a table of servers that know no limit has the columns:\n%s", tab.String())
	}
}

// TestSeriesShowsLimit: series --servers gives each row the mean of gen's
// limit and in flight over its samples that keep them; unknown for a
// server whose samples keep none.
func TestSeriesShowsLimit(t *testing.T) {
	db := limitDB(t)
	r := answer(t, db, limitT0.Add(60*time.Second), "series", "--servers", "--step", "30s")
	got := map[string][]any{}
	for _, row := range r.Rows {
		name, _ := row[1].(string)
		got[name] = append(got[name], norm(r.Get(row, "limit")), norm(r.Get(row, "in_flight")))
	}
	// gpu1's first 30 s: 128 ×4, 512 ×2; then 512 ×2, 390 ×4 (in flight
	// the limit less the sample's index).
	want := map[string][]any{
		"http://gpu1:30000": {fixed((4*128+2*512)/6.0, 1), fixed((4*128+2*512-15)/6.0, 1),
			fixed((2*512+4*390)/6.0, 1), fixed((2*512+4*390-51)/6.0, 1)},
		"http://gpu2:30000": {nil, nil, nil, nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("series --servers limit, in_flight = %v; want %v", got, want)
	}
}

// TestEventsShowLimit: the limit events are listed with their detail, in
// time order with the others, kept by a server's filter and --since as
// the others are, and --kind keeps only the kinds asked; a kind the index
// has none of is said in a note, with the kinds it has.
func TestEventsShowLimit(t *testing.T) {
	db := limitDB(t)
	now := limitT0.Add(60 * time.Second)
	rows := func(args ...string) (string, []string) {
		t.Helper()
		r := answer(t, db, now, append([]string{"events"}, args...)...)
		var out []string
		for _, row := range r.Rows {
			out = append(out, strings.TrimSpace(row[1].(string)+" "+row[2].(string)+" "+row[3].(string)))
		}
		return strings.Join(out, "\n"), r.Notes
	}
	limits := "http://gpu1:30000 limit 128 -> 512: room (running 128 of 1024, no queue)\n" +
		"http://gpu1:30000 limit 512 -> 390: preemptions (5 in 5s)"
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "start\nhttp://gpu2:30000 down 3 requests in flight\n" + limits},
		{[]string{"http://gpu1:30000"}, "start\n" + limits},
		{[]string{"http://gpu2:30000"}, "start\nhttp://gpu2:30000 down 3 requests in flight"},
		{[]string{"--since", "30s"}, "http://gpu1:30000 limit 512 -> 390: preemptions (5 in 5s)"},
		{[]string{"--kind", "limit"}, limits},
		{[]string{"--kind", "down,limit", "--since", "55s"}, "http://gpu2:30000 down 3 requests in flight\n" + limits},
		{[]string{"--kind", "limit", "http://gpu2:30000"}, ""},
	} {
		got, notes := rows(c.args...)
		if got != c.want || len(notes) != 0 {
			t.Errorf("events %q:\n%s\nnotes %q; want:\n%s", c.args, got, notes, c.want)
		}
	}
	got, notes := rows("--kind", "limits")
	if got != "" || len(notes) != 1 || notes[0] != `no "limits" event in the index (it has: down, limit, start)` {
		t.Errorf("--kind limits: %q, notes %q", got, notes)
	}
}
