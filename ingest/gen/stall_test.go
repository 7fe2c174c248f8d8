package gen

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store"
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
	if !strings.Contains(log.String(), " gen: 1/1 servers up, stalled since ") {
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
