package gen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/query"
)

// waitLog waits until log holds want, or the test's context ends.
func waitLog(t *testing.T, log *syncBuffer, want string) bool {
	t.Helper()
	for !strings.Contains(log.String(), want) {
		select {
		case <-time.After(2 * time.Millisecond):
		case <-t.Context().Done():
			return false
		}
	}
	return true
}

// tap records what a handler answered: the status (0: none, the
// connection was dropped) and the body.
type tap struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (t *tap) WriteHeader(code int) {
	if t.status == 0 {
		t.status = code
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *tap) Write(b []byte) (int, error) {
	if t.status == 0 {
		t.status = http.StatusOK
	}
	t.body.Write(b)
	return t.ResponseWriter.Write(b)
}

func (t *tap) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// faultCounts are the prompts' requests a server failed, counted as it
// answered them.
type faultCounts struct{ errors, resets, aborts atomic.Int64 }

func (f *faultCounts) total() int64 { return f.errors.Load() + f.resets.Load() + f.aborts.Load() }

// countingFaults serves h and counts, among the requests that carry a
// prompt (not a route's probe), those answered with an error status, with
// no answer, or aborted.
func countingFaults(t *testing.T, h http.Handler) (string, *faultCounts) {
	t.Helper()
	var f faultCounts
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if !bytes.Contains(body, []byte(`"input_ids"`)) {
			h.ServeHTTP(w, r)
			return
		}
		tw := &tap{ResponseWriter: w}
		h.ServeHTTP(tw, r)
		switch {
		case tw.status == 0:
			f.resets.Add(1)
		case tw.status >= 500:
			f.errors.Add(1)
		case bytes.Contains(tw.body.Bytes(), []byte(`"type":"abort"`)):
			f.aborts.Add(1)
		}
	}))
	t.Cleanup(hs.Close)
	return hs.URL, &f
}

// TestGenRetriesCounted: against a simulator that answers 500 or 503 to
// a fifth of the requests, resets a tenth and aborts a tenth, gen's
// summary, its retries events and `query server`'s retries each count
// exactly the attempts the server failed (counted as it answered them),
// and the summary by cause.
func TestGenRetriesCounted(t *testing.T) {
	t.Parallel()
	url, f := countingFaults(t, sim.New(sim.Config{Seed: 3, ErrorRate: 0.2, ResetRate: 0.1, AbortRate: 0.1, EnableMetrics: true}).Handler())
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "F", "ids", 150)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 16, ScrapeEvery: 20 * time.Millisecond,
		Backoff: client.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}}, root)
	if err != nil || sum.Responses != 150 || sum.Errors != 0 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	st := struct{ Errors, Resets, Aborts int64 }{f.errors.Load(), f.resets.Load(), f.aborts.Load()}
	want := f.total()
	if st.Errors == 0 || st.Resets == 0 || st.Aborts == 0 {
		t.Fatalf("the simulator injected too little: %+v", st)
	}

	// The summary: the total, then each cause.
	m := regexp.MustCompile(`(?m)^gen: (\d+) attempts retried: (.*)$`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("no retries in the summary:\n%s", log)
	}
	if m[1] != fmt.Sprint(want) {
		t.Errorf("summary: %s attempts retried; the simulator failed %d (%+v)\n%s", m[1], want, st, m[0])
	}
	byCause := map[string]int64{}
	for _, g := range strings.Split(m[2], ", ") {
		n, cause, _ := strings.Cut(g, " ")
		k, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			t.Fatalf("cause %q in %s", g, m[0])
		}
		switch {
		case strings.HasPrefix(cause, "HTTP 500"), strings.HasPrefix(cause, "HTTP 503 'The request queue is full.'"):
			byCause["http"] += k
		case cause == "lost connection" || cause == "lost connections":
			byCause["reset"] += k
		case cause == "abort" || cause == "aborts":
			byCause["abort"] += k
		default:
			t.Errorf("unexpected cause %q in %s", g, m[0])
		}
	}
	if byCause["http"] != st.Errors || byCause["reset"] != st.Resets || byCause["abort"] != st.Aborts {
		t.Errorf("summary by cause %v; the simulator: %d errors, %d resets, %d aborts\n%s", byCause, st.Errors, st.Resets, st.Aborts, m[0])
	}

	// The events: one per burst, whose counts add up to the same.
	var n int64
	countRE := regexp.MustCompile(`^(\d+) attempts? retried`)
	for _, e := range events(t, dbPath) {
		if e.Name != EventRetries {
			continue
		}
		c := countRE.FindStringSubmatch(e.Detail)
		if c == nil || e.Server != client.RedactURL(url) {
			t.Fatalf("retries event %+v", e)
		}
		k, _ := strconv.ParseInt(c[1], 10, 64)
		n += k
	}
	if n != want {
		t.Errorf("retries events count %d; the simulator failed %d\n%+v", n, want, events(t, dbPath))
	}
	if es := events(t, dbPath); !strings.Contains(es[len(es)-1].Detail, fmt.Sprintf("%d attempts retried", want)) {
		t.Errorf("stop event %+v", es[len(es)-1])
	}

	// query server over the run.
	db := openDB(t, dbPath)
	res, err := query.Answer(db, query.Query{Question: "server", Window: time.Hour}, time.Now())
	db.Close()
	if err != nil || len(res.Rows) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	col := func(name string) any { return res.Rows[0][slices.Index(res.Columns, name)] }
	if got := col("retries"); got != uint64(want) {
		t.Errorf("query server: retries %v; the simulator failed %d", got, want)
	}
	if got, _ := col("last_error").(string); got == "" || col("last_error_at") == nil || col("in_backoff") != uint64(0) {
		t.Errorf("query server: last_error %v at %v, in_backoff %v", col("last_error"), col("last_error_at"), col("in_backoff"))
	}
}

// TestLiveLineShowsBackoff: a prompt whose attempt failed and that waits
// out its backoff is shown as in backoff, with the retry and the server's
// message, on the totals line and the server's line: never just "0 in
// flight, 1 to go".
func TestLiveLineShowsBackoff(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	url := wrap(t, sim.New(sim.Config{Seed: 41}).Handler(), map[string]http.HandlerFunc{"/generate": func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		answer(500, `{"error":{"code":500,"message":"Failed to parse input at pos 0: unexpected token","type":"server_error"}}`)(w, r)
	}})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "B", "ids", 1)
	sets, _ := FindDatasets([]string{root}, out)
	db := openDB(t, filepath.Join(t.TempDir(), "g.db"))
	defer db.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var log syncBuffer
	done := make(chan error, 1)
	go func() {
		_, err := Run(ctx, db, Config{Servers: []string{url}, Out: out, Log: &log, LogEvery: 5 * time.Millisecond, ScrapeEvery: -1,
			Backoff: client.Backoff{Base: time.Hour, Max: time.Hour}}, sets)
		done <- err
	}()
	if !waitLog(t, &log, "in backoff") {
		t.Fatalf("no prompt in backoff:\n%s", log.String())
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("%v\n%s", err, log.String())
	}
	text := log.String()
	var total, server string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, "in backoff") {
			if strings.Contains(l, " gen: ") && total == "" {
				total = l
			}
			if strings.Contains(l, "  server "+url+": ") && server == "" {
				server = l
			}
		}
	}
	if !strings.Contains(total, "0 in flight, 1 in backoff, 1 attempt retried,") || !strings.Contains(total, "1 to go") {
		t.Errorf("totals line %q\n%s", total, text)
	}
	if !strings.Contains(server, "1 retried (last HTTP 500 'Failed to parse input at pos 0...', ") || !strings.HasSuffix(server, "1 in backoff") {
		t.Errorf("server line %q\n%s", server, text)
	}
	if asked.Load() > 2 { // a route's probe, and the prompt's one attempt
		t.Errorf("%d requests; want the prompt's one, then the backoff", asked.Load())
	}
	if !strings.Contains(text, "gen: 1 attempt retried: 1 HTTP 500 'Failed to parse input at pos 0...'") {
		t.Errorf("summary:\n%s", text)
	}
}

// TestDownEventCountsInFlight: a server that drops the 32 requests in
// flight on it at once and then fails /health is recorded down with 32
// requests in flight, though each has ended (and asked /health) before
// gen says so. It comes back once gen has counted each of them retried
// (so no request of the crash is still deciding whether it is down).
func TestDownEventCountsInFlight(t *testing.T) {
	t.Parallel()
	const n = 32
	h := sim.New(sim.Config{Seed: 42}).Handler()
	var down atomic.Bool
	var held atomic.Int64
	crash := make(chan struct{})
	var once sync.Once
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" && down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		select {
		case <-crash: // after the crash: answered
		default:
			if bytes.Contains(body, []byte("write about")) {
				if held.Add(1) == n {
					once.Do(func() { down.Store(true); close(crash) })
				}
				<-crash
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "D", "text", n)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sets, _ := FindDatasets([]string{root}, out)
	db := openDB(t, dbPath)
	var log syncBuffer
	go func() { // back once gen has seen it go, and each request's end
		if waitLog(t, &log, "stopped answering") && waitLog(t, &log, fmt.Sprintf("%d attempts retried", n)) {
			down.Store(false)
		}
	}()
	sum, err := Run(t.Context(), db, Config{Servers: []string{hs.URL}, Out: out, Concurrency: n, Log: &log, LogEvery: 5 * time.Millisecond,
		Backoff: client.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}}, sets)
	db.Close()
	if err != nil || sum.Responses != n {
		t.Fatalf("%+v %v\n%s", sum, err, log.String())
	}
	var downs []string
	for _, e := range events(t, dbPath) {
		if e.Name == EventDown {
			downs = append(downs, e.Detail)
		}
	}
	if len(downs) != 1 || !strings.Contains(downs[0], fmt.Sprintf("; %d requests in flight on it", n)) {
		t.Errorf("down events %q; want one with %d requests in flight\n%s", downs, n, log.String())
	}
}

// TestRetryCause: how a failed attempt is named, and how causes are
// listed.
func TestRetryCause(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err      error
		timedOut bool
		want     string
	}{
		{&client.Error{Kind: client.Transient, Status: 500, Message: "Failed to parse input"}, false, "HTTP 500 'Failed to parse input'"},
		{&client.Error{Kind: client.Transient, Status: 500, Message: "Internal Server Error"}, false, "HTTP 500"},
		{&client.Error{Kind: client.Transient, Status: 503, Message: "a\nvery long message that goes on and on beyond forty runes"}, false,
			"HTTP 503 'a very long message that goes on and on...'"},
		{&client.Error{Kind: client.Transient, Status: 200, Message: "request aborted"}, false, "abort"},
		{&client.Error{Kind: client.Transient, Message: "no answer within --request-timeout 1s"}, true, "timeout"},
		{&client.Error{Kind: client.Transient, Message: "timeout: context deadline exceeded"}, false, "timeout"},
		{&client.Error{Kind: client.Transient, Message: "connection refused", Err: syscall.ECONNREFUSED}, false, "refused connection"},
		{&client.Error{Kind: client.Transient, Message: "EOF", Err: io.EOF}, false, "lost connection"},
	} {
		if got := retryCause(tc.err, tc.timedOut); got != tc.want {
			t.Errorf("%v: %q; want %q", tc.err, got, tc.want)
		}
	}
	got := causesText(map[string]int64{"timeout": 2, "HTTP 500 'x'": 150, "abort": 1, "lost connection": 2, "HTTP 503": 1, "refused connection": 1})
	if want := "150 HTTP 500 'x', 2 lost connections, 2 timeouts, 1 HTTP 503, 2 others"; got != want {
		t.Errorf("causes %q; want %q", got, want)
	}
}

// TestRetrySummaryPerServer: with several servers, the summary says the
// retries of each that had any.
func TestRetrySummaryPerServer(t *testing.T) {
	t.Parallel()
	a, b, c := &server{name: "http://a"}, &server{name: "http://b"}, &server{name: "http://c"}
	now := time.Now()
	for range 3 {
		a.retries.add("HTTP 500 'x'", "HTTP 500 'x'", now)
	}
	a.retries.add("timeout", "timeout", now)
	c.retries.add("abort", "abort", now)
	p := newPool([]*server{a, b, c})
	want := []string{"gen: 5 attempts retried on 2 of 3 servers:", "  http://a: 4 attempts retried: 3 HTTP 500 'x', 1 timeout", "  http://c: 1 attempt retried: 1 abort"}
	if got := p.retrySummary(); !slices.Equal(got, want) {
		t.Errorf("%q; want %q", got, want)
	}
	if got := newPool([]*server{b}).retrySummary(); got != nil {
		t.Errorf("no retries: %q", got)
	}
}
