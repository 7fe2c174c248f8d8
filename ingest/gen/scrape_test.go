package gen

import (
	"flag"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/servermetrics"
	"gendex/ingest/gen/servermetrics/metricstest"
	"gendex/ingest/gen/sim"
	"gendex/query"
	"gendex/store"
)

// TestServerTokensAgree: on a steady run against the simulator, the
// server's tokens/s (its generation_tokens_total) and gendex's own over
// the same samples agree within 2%, over a stretch in the middle of the
// run (the first and last second left out, so it is not the trivial whole
// run). It checks the accounting, not the timing: the samples come every
// second (the series keeps one a second), and the stretch is what the run
// gives, some 5 s.
func TestServerTokensAgree(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 5, Slots: 32, DecodeTokensPerSec: 400, EnableMetrics: true})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "A", "ids", 2400)
	maxNew := 80
	dbPath := filepath.Join(out, "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 32,
		ScrapeEvery: time.Second, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}}, root)
	if err != nil || sum.Responses != 2400 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	name := client.RedactURL(url)
	var times []int64
	db.View(func(v *store.View) error {
		return v.ServerSamples(name, 0, math.MaxInt64/2, func(s *store.ServerSample) error {
			if s.Scraped {
				times = append(times, s.Time)
			}
			return nil
		})
	})
	if len(times) < 5 {
		t.Fatalf("%d samples", len(times))
	}
	from, to := time.UnixMilli(times[0]).Add(time.Second), time.UnixMilli(times[len(times)-1]).Add(-time.Second)
	if to.Sub(from) < 2*time.Second {
		t.Fatalf("the run's middle is only %s", to.Sub(from))
	}
	q, err := query.Parse([]string{"server", "--window", to.Sub(from).Truncate(time.Second).String(), name})
	if err != nil {
		t.Fatal(err)
	}
	res, err := query.Answer(db, q, to)
	if err != nil || len(res.Rows) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	row := res.Rows[0]
	col := func(name string) any { return row[slices.Index(res.Columns, name)] }
	srv, ok1 := col("server_tokens_per_s").(query.Fixed)
	cli, ok2 := col("client_tokens_per_s").(query.Fixed)
	agree, ok3 := col("agreement").(query.Fixed)
	if !ok1 || !ok2 || !ok3 || srv.V < 1000 {
		t.Fatalf("server %v, client %v, agreement %v", col("server_tokens_per_s"), col("client_tokens_per_s"), col("agreement"))
	}
	if math.Abs(agree.V-1) > 0.02 || math.Abs(cli.V/srv.V-1) > 0.02 {
		t.Errorf("server %.1f tokens/s, client %.1f tokens/s: agreement %.3f, want within 2%%", srv.V, cli.V, agree.V)
	}
	t.Logf("over %s of the middle of the run: server %.1f tokens/s, client %.1f tokens/s, agreement %.4f", to.Sub(from), srv.V, cli.V, agree.V)
	if col("up") != true || col("running") == nil || col("queued") == nil || col("last_seen") == nil {
		t.Errorf("row %v", row)
	}
	// The simulator reports KV use and a hit rate; without a drafter it has
	// no accept length, which is unknown, not 0.
	if col("token_usage") == nil || col("cache_hit_rate") == nil || col("accept_length") != nil {
		t.Errorf("token_usage and cache_hit_rate known, accept_length unknown; row %v", row)
	}
}

var benchScrapeEvery = flag.Duration("scrape-every", 100*time.Millisecond, "BenchmarkScrapeOverhead: how often gen reads /metrics in its runs with scraping on (50x the default 5 s, so that the cost shows)")

// bigExposition is /metrics as large as SGLang's on a big server: the
// fixture's metrics plus latency histograms of 40 buckets for each of 16
// ranks (some 400 KB).
func bigExposition() string {
	var b strings.Builder
	b.WriteString(metricstest.SGLang)
	for _, h := range []string{"time_to_first_token_seconds", "inter_token_latency_seconds", "e2e_request_latency_seconds", "queue_time_seconds"} {
		fmt.Fprintf(&b, "# HELP sglang:%s A histogram.\n# TYPE sglang:%s histogram\n", h, h)
		for rank := range 16 {
			for i := range 40 {
				fmt.Fprintf(&b, "sglang:%s_bucket{engine_type=\"unified\",le=\"%g\",model_name=\"org/model\",pp_rank=\"0\",tp_rank=\"%d\"} %d.0\n", h, 0.001*float64(int(1)<<(i/2)), rank, i*1000)
			}
		}
	}
	return b.String()
}

// BenchmarkScrapeOverhead: what reading the servers' /metrics and storing
// the series costs gen. (1) gen against a zero-latency simulator with
// /metrics in the same process (as BenchmarkGenOverhead), runs with
// scraping off and on (every -scrape-every, 50x the default rate)
// alternating, mean answers/s of each and the drop; (2) one scrape
// measured alone: reading a 400 KB SGLang /metrics over HTTP, parsing it
// and committing the sample (fsync), and what that costs at the default
// 5 s as a share of gen's time.
func BenchmarkScrapeOverhead(b *testing.B) {
	_, url := simServer(b, sim.Config{Seed: 1, EnableMetrics: true})
	root := b.TempDir()
	writePrompts(b, root, "O", "ids", *benchPrompts)
	maxNew := 16
	var rates [2][]float64
	i := 0
	for b.Loop() {
		for k, every := range []time.Duration{-1, *benchScrapeEvery} {
			i++
			out := filepath.Join(b.TempDir(), fmt.Sprint(i))
			sum, log, err := runGen(b, b.Context(), filepath.Join(out, "g.db"), Config{Servers: []string{url}, Out: out,
				ScrapeEvery: every, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}}, root)
			if err != nil || sum.Responses != int64(*benchPrompts) {
				b.Fatalf("%+v %v\n%s", sum, err, log)
			}
			rates[k] = append(rates[k], float64(sum.Responses)/sum.Elapsed.Seconds())
		}
	}
	mean := func(xs []float64) float64 {
		var s float64
		for _, x := range xs {
			s += x
		}
		return s / float64(len(xs))
	}
	off, on := mean(rates[0]), mean(rates[1])
	b.ReportMetric(off, "answers/s_off")
	b.ReportMetric(on, "answers/s_on")
	b.ReportMetric(100*(off-on)/off, "drop_%")

	body := bigExposition()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, body) }))
	defer hs.Close()
	db := openDB(b, filepath.Join(b.TempDir(), "s.db"))
	defer db.Close()
	const n = 50
	start := time.Now()
	for k := range n {
		r, err := servermetrics.Fetch(b.Context(), hs.Client(), hs.URL+"/metrics", "")
		if err != nil {
			b.Fatal(err)
		}
		s := &store.ServerSample{Time: start.UnixMilli() + int64(k)*1000, Scraped: true, Up: true}
		r.Fill(nil, s)
		if err := db.Update(func(tx *store.Tx) error { return tx.PutServerSample("http://bench", s) }); err != nil {
			b.Fatal(err)
		}
	}
	per := time.Since(start) / n
	b.ReportMetric(float64(per.Microseconds())/1000, "ms/scrape")
	b.ReportMetric(float64(len(body))/1024, "KB/metrics")
	b.ReportMetric(100*per.Seconds()/DefaultScrapeEvery.Seconds(), "cost_at_5s_%")
}

// TestCheckRestart: a counter that went back, or another process start
// time, is a restart event (and the server's identity is read again);
// counters that only grew are not. (What is a restart:
// servermetrics.TestRestartedSince.)
func TestCheckRestart(t *testing.T) {
	t.Parallel()
	m := &monitor{wake: make(chan struct{}, 1)} // no recorder: the events stay queued
	var told []string
	m.restarted = func(s *server, why string) { told = append(told, s.name+": "+why) }
	sc := &scraper{m: m, s: &server{name: "http://s"}}
	read := func(tokens, start float64) *servermetrics.Reading {
		text := fmt.Sprintf("sglang:generation_tokens_total{model_name=\"m\"} %g\n", tokens)
		if start > 0 {
			text += fmt.Sprintf("process_start_time_seconds %g\n", start)
		}
		return servermetrics.Read([]byte(text))
	}
	for _, r := range []*servermetrics.Reading{read(100, 0), read(200, 0), read(50, 0), read(60, 1.7e9), read(70, 1.7e9), read(80, 1.8e9)} {
		sc.checkRestart(time.Now().UnixMilli(), r)
	}
	m.mu.Lock()
	var got []string
	for _, p := range m.queue {
		got = append(got, p.event.Server+" "+p.event.Name+": "+p.event.Detail)
	}
	m.mu.Unlock()
	want := []string{"http://s restarted: sglang:generation_tokens_total went back from 200 to 50",
		"http://s restarted: its process start time changed from 2023-11-14T22:13:20Z to 2027-01-15T08:00:00Z"}
	if !slices.Equal(told, []string{"http://s: sglang:generation_tokens_total went back from 200 to 50",
		"http://s: its process start time changed from 2023-11-14T22:13:20Z to 2027-01-15T08:00:00Z"}) {
		t.Errorf("identity read again for %q", told)
	}
	if !slices.Equal(got, want) {
		t.Errorf("restarts %q\nwant %q", got, want)
	}
}

// TestServerLines: gen's live line of a server says up or down, and what
// its /metrics said, each figure only when known.
func TestServerLines(t *testing.T) {
	t.Parallel()
	now := time.Now()
	up := &server{name: "http://a"}
	up.up.Store(true)
	down := &server{name: "http://b"}
	down.downAt.Store(now.Add(-12 * time.Second).UnixMilli())
	s := store.ServerSample{Scraped: true}
	s.Set(store.MetricRunning, 121)
	s.Set(store.MetricQueued, 3)
	for _, tc := range []struct {
		s    *server
		v    liveView
		want string
	}{
		{up, liveView{sample: s, taken: true, metrics: true, rate: 1317.4, rateOK: true}, "up, 121 running, 3 queued, KV use unknown, 1317 tokens/s (its count, last 30s)"},
		{up, liveView{sample: store.ServerSample{NoMetrics: true}, taken: true}, "up, its metrics unknown (no /metrics: start it with --enable-metrics)"},
		{up, liveView{}, "up, metrics not read yet"},
		{down, liveView{sample: s, taken: true, metrics: true}, "down 12s"},
	} {
		if got := serverState(tc.s, tc.v, now); got != tc.want {
			t.Errorf("%q, want %q", got, tc.want)
		}
	}
}

// TestQueryServerFromSGLangMetrics: gen against a server whose /metrics
// is SGLang's own exposition (several ranks, every metric): `query server`
// shows the server's figures combined over its ranks.
func TestQueryServerFromSGLangMetrics(t *testing.T) {
	t.Parallel()
	s := sim.New(sim.Config{Seed: 9})
	h := s.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprint(w, metricstest.SGLang)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "S", "ids", 30)
	dbPath := filepath.Join(out, "g.db")
	if sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{hs.URL}, Out: out}, root); err != nil || sum.Responses != 30 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, row := oneServerRow(t, db)
	got := fmt.Sprint([]any{row["server"], row["up"], row["running"], row["queued"], row["token_usage"], row["cache_hit_rate"], sampleAccept(t, db)})
	if want := fmt.Sprintf("[%s true 121 3 0.700 0.500 3.30]", hs.URL); got != want {
		t.Errorf("server row %s, want %s", got, want)
	}
}
