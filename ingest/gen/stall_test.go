package gen

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store"
	"gendex/store/terminal"
)

// TestStallHeldAndRecovered: a server that, after 10 answers, takes
// requests and answers nothing (not /health either) is found stalled
// after StallAfter: a stalled event with the requests it holds by id, the
// run's row stalled with its sentence, and no new request sent to it
// while it is, the progress line saying it; once it answers again, a recovered event, every prompt
// answered once, the row finished.
func TestStallHeldAndRecovered(t *testing.T) {
	t.Parallel()
	const n, conc = 30, 4
	h := sim.New(sim.Config{Seed: 7}).Handler()
	var asked atomic.Int64
	var frozen atomic.Bool
	release := make(chan struct{})
	var once sync.Once
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" && r.URL.Path != "/metrics" && !strings.HasPrefix(r.URL.Path, "/v1/models") && asked.Add(1) > 10 {
			frozen.Store(true)
		}
		if frozen.Load() {
			<-release
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "D", "text", n)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sets, _ := FindDatasets([]string{root}, out)
	db := openDB(t, dbPath)
	var log syncBuffer
	var rowSeen store.Run
	go func() {
		if !waitLog(t, &log, "stalled since") {
			return
		}
		held := asked.Load()
		for deadline := time.Now().Add(5 * time.Second); rowSeen.State != store.RunStalled && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
			db.View(func(v *store.View) error {
				return v.Runs(func(r *store.Run) error { rowSeen = *r; return nil })
			})
		}
		time.Sleep(300 * time.Millisecond)
		if got := asked.Load(); got != held {
			t.Errorf("%d requests were sent to the stalled server after it was found stalled", got-held)
		}
		once.Do(func() { close(release) })
	}()
	sum, err := Run(t.Context(), db, Config{Servers: []string{hs.URL}, Out: out, Concurrency: conc, Log: &log, LogEvery: 20 * time.Millisecond,
		StallAfter: 300 * time.Millisecond, ScrapeEvery: -1}, sets)
	db.Close()
	if err != nil || sum.Responses != n {
		t.Fatalf("%+v %v\n%s", sum, err, log.String())
	}
	if !strings.Contains(log.String(), " gen: 0/1 servers up, stalled since ") {
		t.Errorf("no progress line says the stall:\n%s", log.String())
	}
	if rowSeen.State != store.RunStalled || !strings.Contains(rowSeen.Detail, "requests held by "+hs.URL+", which answers no probe") {
		t.Errorf("the run's row during the stall: %+v", rowSeen)
	}
	var stalled, recovered []string
	for _, e := range events(t, dbPath) {
		switch e.Name {
		case EventStalled:
			stalled = append(stalled, e.Detail)
		case EventRecovered:
			recovered = append(recovered, e.Detail)
		}
	}
	if len(stalled) != 1 || !strings.Contains(stalled[0], "4 requests in flight, ages ") || !strings.Contains(stalled[0], " D/") ||
		!strings.Contains(stalled[0], "/health does not answer") || len(recovered) != 1 {
		t.Errorf("stalled %q, recovered %q; want one each, the stall naming the 4 requests held\n%s", stalled, recovered, log.String())
	}
	ro, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	var rows []store.Run
	ro.View(func(v *store.View) error {
		return v.Runs(func(r *store.Run) error { rows = append(rows, *r); return nil })
	})
	if len(rows) != 1 || rows[0].State != store.RunFinished || rows[0].ToGo == nil || *rows[0].ToGo != 0 || *rows[0].Answers != n {
		t.Errorf("runs after: %+v; want one, finished, 0 to go, %d answers", rows, n)
	}
}

// TestStallOutlastingRequestTimeout: a server stalled for longer than
// --request-timeout: the requests it held run out and are retried; it is
// given them again (not kept out for good as stalled), so once it wakes up
// it answers them and the run finishes, every prompt answered once.
func TestStallOutlastingRequestTimeout(t *testing.T) {
	t.Parallel()
	const n = 12
	h := sim.New(sim.Config{Seed: 8}).Handler()
	var asked atomic.Int64
	release := make(chan struct{})
	var once sync.Once
	wake := func() { once.Do(func() { close(release) }) }
	t.Cleanup(wake)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" && r.URL.Path != "/metrics" && !strings.HasPrefix(r.URL.Path, "/v1/models") && asked.Add(1) > 4 {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "D", "text", n)
	sets, _ := FindDatasets([]string{root}, out)
	db := openDB(t, filepath.Join(t.TempDir(), "g.db"))
	defer db.Close()
	var log syncBuffer
	go func() { // awake once the held requests ran out and were retried
		if waitLog(t, &log, "stalled since") {
			time.Sleep(1500 * time.Millisecond) // past the 800 ms timeout
			wake()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sum, err := Run(ctx, db, Config{Servers: []string{hs.URL}, Out: out, Concurrency: 2, Log: &log, LogEvery: time.Hour,
		StallAfter: 200 * time.Millisecond, RequestTimeout: 800 * time.Millisecond, ScrapeEvery: -1,
		Backoff: client.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}}, sets)
	if err != nil || sum.Responses != n || sum.Errors != 0 {
		t.Fatalf("%+v %v; want %d answers\n%s", sum, err, n, log.String())
	}
}

// ruleRun drives f's stall rules as the tracker does, a look every
// second from t0 (the server's last reply) for up to limit, with probes
// that take timeout and are answered when answers says so; reply, when
// set, is a reply the server gives at that offset. It returns when f was
// found stalled, by which rule, and when each probe was sent (all
// offsets from t0).
func ruleRun(f *flights, t0 time.Time, every, after, limit time.Duration, answers bool, reply time.Duration) (at time.Duration, noProbe bool, sent []time.Duration) {
	type pending struct {
		sent int64
		done time.Time
	}
	var out []pending
	for d := time.Second; d <= limit; d += time.Second {
		now := t0.Add(d)
		if reply > 0 && d == reply {
			f.mu.Lock()
			f.lastReply = now.UnixMilli()
			f.mu.Unlock()
		}
		for len(out) > 0 && !out[0].done.After(now) {
			f.probed(out[0].sent, answers, "/health does not answer (nothing within 5s); /metrics does not answer (nothing within 5s)")
			out = out[1:]
		}
		if f.probeDue(now.UnixMilli(), every) {
			out = append(out, pending{now.UnixMilli(), now.Add(probeTimeout(every))})
			sent = append(sent, d)
		}
		if since, byProbes := f.stalledSince(now, after); since != 0 {
			return d, byProbes, sent
		}
	}
	return 0, false, sent
}

// heldSince is a server's flights with 4 requests in flight since 10 s
// before t0, its last reply at t0.
func heldSince(t0 time.Time) *flights {
	f := &flights{on: map[uint64]flight{}, lastReply: t0.UnixMilli()}
	for i := range 4 {
		f.on[uint64(i)] = flight{"D", fmt.Sprint(i), t0.Add(-10 * time.Second).UnixMilli()}
	}
	return f
}

// TestStallProbeRuleDefaults: with the default flags a server frozen
// whole right after a reply (4 requests held, no probe answered) is
// stalled within a minute: probes go at 15, 30 and 45 s of silence, each
// given 5 s, and the third one's failure at 50 s makes the stall. One that
// answers its probes is stalled only after --stall-after (10m), and a
// reply between failed probes starts their count again.
func TestStallProbeRuleDefaults(t *testing.T) {
	var cfg Config
	cfg.defaults()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	at, noProbe, sent := ruleRun(heldSince(t0), t0, cfg.ProbeEvery, cfg.StallAfter, time.Hour, false, 0)
	if want := []time.Duration{15 * time.Second, 30 * time.Second, 45 * time.Second}; !slices.Equal(sent, want) {
		t.Errorf("probes sent at %v; want %v", sent, want)
	}
	if at != 50*time.Second || !noProbe || at > time.Minute {
		t.Errorf("a frozen server stalled after %v (by its probes: %v); want 50s, by its probes", at, noProbe)
	}

	at, noProbe, _ = ruleRun(heldSince(t0), t0, cfg.ProbeEvery, cfg.StallAfter, time.Hour, true, 0)
	if at != cfg.StallAfter || noProbe {
		t.Errorf("a server that answers its probes stalled after %v (by its probes: %v); want %v, by --stall-after", at, noProbe, cfg.StallAfter)
	}

	at, noProbe, sent = ruleRun(heldSince(t0), t0, cfg.ProbeEvery, cfg.StallAfter, time.Hour, false, 40*time.Second)
	if at != 90*time.Second || !noProbe {
		t.Errorf("with a reply at 40s between failed probes (sent at %v), stalled after %v; want 90s: three failures after the reply", sent, at)
	}
}

// TestStallMessageFitsThreeLines: the message gen prints when it finds a
// stall fits three lines at 80 columns, with a long server name, many
// requests held and a long silence; its record (query events) says KV use
// as a percentage and each error once.
func TestStallMessageFitsThreeLines(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	name := "http://gpu-node-017.cluster.internal:30000"
	for _, probes := range []bool{false, true} {
		st := &stall{since: now.Add(-10*time.Minute - 7*time.Second).UnixMilli(), held: 1024, probes: probes}
		msg := stallMessage(name, st, now)
		wrapped := strings.Split(terminal.WrapLines(msg, 79), "\n")
		if len(wrapped) > 3 || !strings.Contains(msg, name+" stalled since 02:53:58, no reply for 10m7s: 1024 requests held") {
			t.Errorf("the stall message in %d lines at 80 columns; want at most 3, with the server, since when, how long and the requests held:\n%s", len(wrapped), strings.Join(wrapped, "\n"))
		}
	}
	var f flights
	for _, at := range []int64{1, 2, 3} {
		f.noteError(now.Add(time.Duration(at)*time.Second).UnixMilli(), "HTTP 400: prompt too long")
	}
	f.noteError(now.Add(4*time.Second).UnixMilli(), "timeout")
	var v liveView
	v.taken, v.metrics = true, true
	v.sample = store.ServerSample{Scraped: true, Time: now.UnixMilli(), LastSeen: now.UnixMilli()}
	v.sample.Set(store.MetricTokenUsage, 0.027544021606445312)
	v.sample.Set(store.MetricRunning, 61)
	v.good = v.sample
	rec := stallRecord(nil, now.Add(time.Minute), now.UnixMilli(), f.errs, v, "/health does not answer")
	for _, want := range []string{"HTTP 400: prompt too long (3 times) | 03:04:09 timeout;", "61 running, KV 3% used;", "probes: /health does not answer"} {
		if !strings.Contains(rec, want) {
			t.Errorf("the stall's record does not say %q:\n%s", want, rec)
		}
	}
	if strings.Count(rec, "HTTP 400") != 1 {
		t.Errorf("an error said %d times in the record; want once, counted:\n%s", strings.Count(rec, "HTTP 400"), rec)
	}
}
