package query

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"gendex/store"
)

// TestAcceptLengthOverTheWindow: query server's and series --servers'
// accept_length is the window's, never the last sample's: from vLLM's
// counters (a restart inside the window adds the new count, never a
// negative jump), from the answers' per-request counts on SGLang, and from
// SGLang's gauge weighted by the tokens each interval generated when no
// answer carried the counts.
func TestAcceptLengthOverTheWindow(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(sec int) int64 { return t0.Add(time.Duration(sec) * time.Second).UnixMilli() }
	put := func(server string, s *store.ServerSample) {
		t.Helper()
		s.Up, s.Scraped, s.LastSeen = true, true, s.Time
		if err := db.Update(func(tx *store.Tx) error { return tx.PutServerSample(server, s) }); err != nil {
			t.Fatal(err)
		}
	}
	// vLLM: 1 + accepted / drafts. The last pair alone would say 1 + 90/30
	// = 4; the window: (1000 + 500 + 90) accepted over (1000 + 400 + 30)
	// drafts, the 500 and 400 after the restart at 30 s counted whole.
	for _, c := range []struct {
		sec            int
		start          float64
		drafts, accept float64
	}{{0, 100, 0, 0}, {10, 100, 600, 500}, {20, 100, 1000, 1000}, {30, 200, 400, 500}, {40, 200, 430, 590}} {
		s := &store.ServerSample{Time: at(c.sec), Run: at(0), Flavor: store.FlavorVLLM}
		s.Set(store.MetricStartTime, c.start)
		s.Set(store.MetricSpecDrafts, c.drafts)
		s.Set(store.MetricSpecAccepted, c.accept)
		s.Set(store.MetricGenTokens, c.accept+c.drafts)
		s.Set(store.MetricAcceptLength, 1+c.accept/max(c.drafts, 1)) // what fill sets: the last interval's
		put("http://vllm:8000", s)
	}
	// SGLang with per-request counts: the window's tokens over its verify
	// steps, 3000 / 1000 = 3, though its gauge says 5 at the end.
	for _, c := range []struct {
		sec           int
		tokens, steps int64
	}{{0, 0, 0}, {10, 1000, 500}, {20, 3000, 1000}} {
		s := &store.ServerSample{Time: at(c.sec), Run: at(0), Flavor: store.FlavorSGLang, ClientSpecTokens: c.tokens, ClientSpecVerify: c.steps}
		s.Set(store.MetricAcceptLength, 5)
		s.Set(store.MetricGenTokens, float64(c.tokens))
		put("http://sglang:30000", s)
	}
	// SGLang through its chat endpoint (no per-request counts): 1000 tokens
	// at gauge 2 (500 steps), then 3000 at gauge 4 (750 steps): 4000 / 1250
	// = 3.2, not the samples' mean (3) nor the last (4).
	for _, c := range []struct {
		sec        int
		gen, gauge float64
	}{{0, 0, 1}, {10, 1000, 2}, {20, 4000, 4}} {
		s := &store.ServerSample{Time: at(c.sec), Run: at(0), Flavor: store.FlavorSGLang}
		s.Set(store.MetricAcceptLength, c.gauge)
		s.Set(store.MetricGenTokens, c.gen)
		put("http://chat:30000", s)
	}
	now := t0.Add(41 * time.Second)
	want := map[string]Fixed{
		"http://vllm:8000":    {1 + 1590.0/1430, 2},
		"http://sglang:30000": {3, 2},
		"http://chat:30000":   {3.2, 2},
	}
	res, err := Answer(db, Query{Question: "server", Window: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.Rows {
		if got := row[9]; !near(got, want[row[0].(string)]) {
			t.Errorf("%s: accept_length %v over the window, want %v", row[0], got, want[row[0].(string)])
		}
	}
	// A window holding only the last pair gives that pair's figure.
	res, err = Answer(db, Query{Question: "server", Servers: []string{"http://vllm:8000"}, Window: 12 * time.Second}, now)
	if err != nil || len(res.Rows) != 1 {
		t.Fatal(res, err)
	}
	if got := res.Rows[0][9]; got != (Fixed{4, 2}) {
		t.Errorf("last pair only: accept_length %v, want 4", got)
	}
	// series --servers with one step over the whole run: the same figures.
	res, err = Answer(db, Query{Question: "series", PerServer: true, Since: time.Hour, Step: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, row := range res.Rows {
		if row[3] != uint64(0) {
			got[row[1].(string)] = row[11]
		}
	}
	for name, w := range want {
		if !near(got[name], w) {
			t.Errorf("series --servers %s: accept_length %v, want %v", name, got[name], w)
		}
	}
}

// near: got is the Fixed w, but for the last bits of the float.
func near(got any, w Fixed) bool {
	f, ok := got.(Fixed)
	return ok && f.Prec == w.Prec && math.Abs(f.V-w.V) < 1e-9
}

// TestAcceptLengthFromTheServersStart: a server whose process started in
// the window (process_start_time_seconds) counts its first sample's
// counters whole, so a run shorter than one scrape interval is not lost;
// so does a process that started after a sample that could not read
// /metrics (restarted while down). A process that started before the
// window counts only its increases.
func TestAcceptLengthFromTheServersStart(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(sec int) int64 { return t0.Add(time.Duration(sec) * time.Second).UnixMilli() }
	started := func(sec int) float64 { return float64(t0.Unix() + int64(sec)) }
	type sample struct {
		sec            int
		scraped        bool
		start          float64
		drafts, accept float64
	}
	put := func(server string, ss []sample) {
		for _, c := range ss {
			s := &store.ServerSample{Time: at(c.sec), Run: at(0), Flavor: store.FlavorVLLM, Up: c.scraped, Scraped: c.scraped}
			if c.scraped {
				s.LastSeen = s.Time
				s.Set(store.MetricStartTime, c.start)
				s.Set(store.MetricSpecDrafts, c.drafts)
				s.Set(store.MetricSpecAccepted, c.accept)
			}
			if err := db.Update(func(tx *store.Tx) error { return tx.PutServerSample(server, s) }); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Started at 1 s; one sample at 3 s after a short run, then a tiny one.
	put("http://short:8000", []sample{{3, true, started(1), 300, 400}, {13, true, started(1), 302, 400}})
	// Restarted while down: 300/400 by the first process, 50/60 by the second.
	put("http://down:8000", []sample{{3, true, started(1), 300, 400}, {10, false, 0, 0, 0}, {20, true, started(15), 50, 60}})
	// Started long before the window: its first sample is not the window's.
	put("http://old:8000", []sample{{3, true, started(-7200), 300, 400}, {13, true, started(-7200), 310, 430}})
	now := t0.Add(30 * time.Second)
	want := map[string]Fixed{
		"http://short:8000": {1 + 400.0/302, 2},
		"http://down:8000":  {1 + 460.0/350, 2},
		"http://old:8000":   {1 + 30.0/10, 2},
	}
	res, err := Answer(db, Query{Question: "server", Window: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.Rows {
		if got := row[9]; !near(got, want[row[0].(string)]) {
			t.Errorf("%s: accept_length %v over the window, want %v", row[0], got, want[row[0].(string)])
		}
	}
	res, err = Answer(db, Query{Question: "series", PerServer: true, Since: time.Hour, Step: time.Hour}, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range res.Rows {
		if name := row[1].(string); row[3] != uint64(0) && !near(row[11], want[name]) {
			t.Errorf("series --servers %s: accept_length %v, want %v", name, row[11], want[name])
		}
	}
}
