package query

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gendex/store"
)

// TestServerCounterReset: the server's tokens/s over a window counts a
// counter that went back (a restart) from 0, pairs only samples of one gen
// run, and measures gendex's tokens over the same pairs; a down sample
// (no counter) breaks no sum. Gauges come from the last sample, unknown
// when it has none.
func TestServerCounterReset(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	type smp struct {
		sec     int
		run     int64
		counter float64 // < 0: not scraped (down)
		client  int64
	}
	samples := []smp{
		{0, 1, 0, 0}, {10, 1, 1000, 1000}, {20, 1, 2000, 2000},
		{30, 1, 500, 2500},    // restarted: +500, counted from 0
		{35, 1, -1, 2500},     // down: no counter, the pairs on either side are not measured
		{40, 1, 1500, 3500},   //
		{50, 2, 99999, 0},     // another gen run: not paired with the one before
		{60, 2, 100999, 1000}, // +1000
	}
	err = db.Update(func(tx *store.Tx) error {
		for _, s := range samples {
			at := t0.Add(time.Duration(s.sec) * time.Second).UnixMilli()
			x := &store.ServerSample{Time: at, Up: s.counter >= 0, Scraped: s.counter >= 0, Run: s.run, ClientTokens: s.client, ClientAnswers: s.client / 10}
			if s.counter >= 0 {
				x.LastSeen = at
				x.Set(store.MetricGenTokens, s.counter)
				x.Set(store.MetricRunning, 4)
			}
			if err := tx.PutServerSample("http://s", x); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ask := func(now time.Time, args ...string) []any {
		t.Helper()
		q, err := Parse(append([]string{"server"}, args...))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Answer(db, q, now)
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("%+v %v", res, err)
		}
		return res.Rows[0]
	}
	// Whole series: 1000+1000+500 (the reset)+1000 over the four pairs of
	// 10 s with a counter at both ends: 3500/40 s; gendex's over the same.
	row := ask(t0.Add(61*time.Second), "--window", "2m")
	if got := row[11]; got != (Fixed{87.5, 1}) {
		t.Errorf("server_tokens_per_s %v, want 87.5 (row %v)", got, row)
	}
	if got := row[12]; got != (Fixed{87.5, 1}) {
		t.Errorf("client_tokens_per_s %v, want 87.5 (row %v)", got, row)
	}
	if got := row[13]; got != (Fixed{1, 3}) {
		t.Errorf("agreement %v", got)
	}
	if row[1] != true || row[2] != uint64(4) || row[7] != nil || row[18] != "" {
		t.Errorf("row %v", row)
	}
	// A window whose last sample is the down one: gauges unknown, up no.
	row = ask(t0.Add(36*time.Second), "--window", "5s")
	if row[1] != false || row[2] != nil || row[11] != nil || row[10] == nil {
		t.Errorf("down: %v", row)
	}
	// Long after the run: nothing in the window; last_seen still known.
	row = ask(t0.Add(time.Hour))
	if row[1] != nil || row[2] != nil || row[11] != nil || row[12] != nil || row[10] != "2026-12-01T10:01:00.000Z" || row[18] == "" {
		t.Errorf("stale: %v", row)
	}
	if _, err := Answer(db, Query{Question: "server", Servers: []string{"http://nope"}, Window: time.Minute}, t0); err == nil || !strings.Contains(err.Error(), "http://s") {
		t.Errorf("unknown server: %v", err)
	}
}

// TestServerRetries: retries counts gen's retried attempts within the
// window: the increase between samples of one run (a run that began
// before the window counts from its first sample in it), all of a run
// that began in it, never a count that went back between runs; in_backoff
// and last_error come from the last sample; none of them is known without
// a sample in the window, and no error is "", not unknown.
func TestServerRetries(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ms := func(sec int) int64 { return t0.Add(time.Duration(sec) * time.Second).UnixMilli() }
	type smp struct {
		sec, run, retries, backoff int
		last                       string
	}
	for _, s := range []smp{
		{0, 0, 0, 0, ""}, {10, 0, 4, 1, "timeout"}, {20, 0, 10, 0, "HTTP 500 'Failed to parse input'"}, // run 1 from t0
		{30, 25, 3, 2, "lost connection 'EOF'"}, {40, 25, 5, 2, "abort"}, // run 2, began at t0+25s
		{50, 45, 0, 0, ""}, // run 3: none yet
	} {
		x := &store.ServerSample{Time: ms(s.sec), Up: true, Run: ms(s.run), Retries: int64(s.retries), InBackoff: int64(s.backoff), LastError: s.last}
		if s.last != "" {
			x.LastErrorAt = ms(s.sec) - 1000
		}
		if err := db.Update(func(tx *store.Tx) error { return tx.PutServerSample("http://s", x) }); err != nil {
			t.Fatal(err)
		}
	}
	cols := []string{"retries", "in_backoff", "last_error", "last_error_at"}
	ask := func(now time.Time, window string) []any {
		t.Helper()
		res, err := Answer(db, Query{Question: "server", Window: mustDuration(t, window)}, now)
		if err != nil || len(res.Rows) != 1 {
			t.Fatalf("%+v %v", res, err)
		}
		var out []any
		for _, c := range cols {
			i := slices.Index(res.Columns, c)
			if i < 0 {
				t.Fatalf("no column %s in %v", c, res.Columns)
			}
			out = append(out, res.Rows[0][i])
		}
		return out
	}
	for _, tc := range []struct {
		now    int
		window string
		want   []any
	}{
		// Run 1 began in the window: all its 10; run 2 began in it: its 5.
		{41, "1m", []any{uint64(15), uint64(2), "abort", "2026-12-01T10:00:39.000Z"}},
		// Run 1 began before t0+5s: 10−4 from its samples in the window.
		{21, "16s", []any{uint64(6), uint64(0), "HTTP 500 'Failed to parse input'", "2026-12-01T10:00:19.000Z"}},
		// Run 2 began before the window: 5−3 from its first sample in it;
		// then run 3, none yet.
		{51, "25s", []any{uint64(2), uint64(0), "", nil}},
		// Nothing in the window: unknown.
		{200, "30s", []any{nil, nil, nil, nil}},
	} {
		got := ask(t0.Add(time.Duration(tc.now)*time.Second), tc.window)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("t0+%ds, window %s: %v = %#v; want %#v", tc.now, tc.window, cols, got, tc.want)
		}
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestEvents: events in time order, --since, and a server's filter keeps
// the run's own events.
func TestEvents(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	err = db.Update(func(tx *store.Tx) error {
		tx.PutServerSample("http://a", &store.ServerSample{Time: t0.UnixMilli()})
		tx.PutServerSample("http://b", &store.ServerSample{Time: t0.UnixMilli()})
		for i, e := range []store.Event{{Name: "start"}, {Server: "http://a", Name: "down"}, {Server: "http://b", Name: "down"},
			{Server: "http://a", Name: "up", Detail: "back after 12s"}, {Name: "stop", Detail: "finished"}} {
			e.Time = t0.Add(time.Duration(i) * time.Minute).UnixMilli()
			if err := tx.AddEvent(&e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	names := func(args ...string) string {
		q, err := Parse(append([]string{"events"}, args...))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Answer(db, q, t0.Add(4*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range res.Rows {
			s, _ := r[1].(string)
			out = append(out, s+" "+r[2].(string))
		}
		return strings.Join(out, ",")
	}
	if got := names(); got != " start,http://a down,http://b down,http://a up, stop" {
		t.Errorf("events: %q", got)
	}
	if got := names("--since", "2m"); got != "http://b down,http://a up, stop" {
		t.Errorf("--since 2m: %q", got)
	}
	if got := names("http://a"); got != " start,http://a down,http://a up, stop" {
		t.Errorf("http://a: %q", got)
	}
	if _, err := Parse([]string{"events", "--since", "soon"}); err == nil {
		t.Error("--since soon parsed")
	}
}
