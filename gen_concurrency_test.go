package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// frontServer stands in front of a `gendex sim` process that crashes on a
// prompt and is started again, and is what gen calls the server: it is
// down (connections refused) from the simulator's crash until the new
// simulator answers /health, and its requests in flight die with it. It
// counts the generation requests in flight through it and keeps the most
// there were at once.
type frontServer struct {
	bin, addr, simAddr string
	simArgs            []string
	client             *http.Client

	now, most atomic.Int64
	starts    atomic.Int64

	mu  sync.Mutex
	srv *http.Server
}

// ServeHTTP forwards r to the simulator. A generation request (a POST to
// /generate that is not a route probe's {}) counts as in flight from its
// arrival until its answer is read whole, before a byte of it is sent on,
// so the count never runs past what the client sees. When the simulator
// does not answer, the connection is closed without a response, as a
// crashed server's is.
func (f *frontServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	counted := r.Method == http.MethodPost && r.URL.Path == "/generate" && string(bytes.TrimSpace(body)) != "{}"
	if counted {
		n := f.now.Add(1)
		for m := f.most.Load(); n > m && !f.most.CompareAndSwap(m, n); m = f.most.Load() {
		}
	}
	resp, data, err := f.forward(r, body)
	if counted {
		f.now.Add(-1)
	}
	if err != nil {
		if conn, _, herr := http.NewResponseController(w).Hijack(); herr == nil {
			conn.Close()
		}
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(data)
}

func (f *frontServer) forward(r *http.Request, body []byte) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, "http://"+f.simAddr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	req.Header = r.Header.Clone()
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp, data, err
}

// run starts the simulator, opens the front once it answers, and, each
// time the simulator exits (its crash), closes the front (every
// connection with it) and starts both again 200 ms later, until ctx ends.
func (f *frontServer) run(ctx context.Context, t *testing.T) {
	for ctx.Err() == nil {
		sim := startGendex(t, f.bin, "", append([]string{"sim", "--listen", f.simAddr}, f.simArgs...)...)
		exited := sim.Done()
		if f.waitHealthy(ctx, exited) {
			f.open(t)
		}
		select {
		case <-exited:
		case <-ctx.Done():
			sim.Kill()
		}
		f.close()
		select { // a restart takes a while (SGLang: minutes)
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
		}
	}
}

func (f *frontServer) waitHealthy(ctx context.Context, exited <-chan struct{}) bool {
	for {
		if resp, err := f.client.Get("http://" + f.simAddr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return true
			}
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-exited:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

func (f *frontServer) open(t *testing.T) {
	var ln net.Listener
	var err error
	for range 200 { // the last front's port may take a moment to free
		if ln, err = net.Listen("tcp", f.addr); err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Error(err)
		return
	}
	f.starts.Add(1)
	srv := &http.Server{Handler: f}
	f.mu.Lock()
	f.srv = srv
	f.mu.Unlock()
	go srv.Serve(ln)
}

func (f *frontServer) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.srv != nil {
		f.srv.Close()
		f.srv = nil
	}
}

// TestConcurrencyIsAHardBoundBinary: `gendex gen --concurrency 6` against a
// server that crashes whenever a prompt holds BOOM and comes back: gen
// retries each prompt that was in flight in a crash alone among such
// suspects while its workers go on, and still no more than 6 requests are
// ever in flight: at the server, and as gen counts them (its /metrics).
// Every other prompt is answered, the bombs are recorded as errors.
//
// Before --concurrency was a hard bound (fe2ad2f), gen counted 7 here in
// 3 of 3 runs: the suspect's retry ran beside 6 workers, and its HTTP
// transport's one connection per request in flight kept the seventh
// waiting for a connection (its request timeout running), so the server
// saw 6.
func TestConcurrencyIsAHardBoundBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and crashes real simulator processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	front := &frontServer{bin: bin, addr: freeAddr(t), simAddr: freeAddr(t),
		simArgs: []string{"--seed", "22", "--crash-on", "BOOM", "--decode-tps", "300", "--slots", "64"},
		client:  &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}}
	ctx, cancel := context.WithCancel(t.Context())
	wctx, cancelWatch := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { front.run(ctx, t); close(stopped) }()
	t.Cleanup(func() { cancel(); <-stopped })

	root, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "B")
	os.MkdirAll(dir, 0o755)
	var b strings.Builder
	const prompts, bombs = 160, 2
	for i := range prompts {
		if i == 3 || i == 60 {
			fmt.Fprintf(&b, `{"id":"bomb-%d","text":"BOOM"}`+"\n", i)
			continue
		}
		fmt.Fprintf(&b, `{"id":"p-%d","text":"write about %d"}`+"\n", i, i)
	}
	writePrompts(t, dir, b.String())

	const limit = 6
	db, listen := filepath.Join(t.TempDir(), "g.db"), freeAddr(t)
	gen := startGendex(t, bin, "", "--db", db, "gen", "--server", "http://"+front.addr,
		"--concurrency", fmt.Sprint(limit), "--listen", listen, "--out", out, root)
	// gen's own count of its requests in flight (gendex_in_flight, summed
	// over servers), read every 5 ms: a request past the bound waits for a
	// connection in gen (one per request in flight) and shows here while
	// it waits.
	var said atomic.Int64
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for wctx.Err() == nil {
			if n, ok := inFlightMetric("http://" + listen + "/metrics"); ok {
				for m := said.Load(); n > m && !said.CompareAndSwap(m, n); m = said.Load() {
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	gen.Wait() // its exit is not under test: what it did is
	cancelWatch()
	<-watching
	if starts := front.starts.Load(); starts < 3 {
		t.Fatalf("the server came up %d times; want crashes and restarts\n%s", starts, gen.Stderr())
	}
	if most := front.most.Load(); most > limit {
		t.Errorf("%d generation requests in flight at once at the server; --concurrency is %d", most, limit)
	}
	if most := said.Load(); most > limit {
		t.Errorf("gen counted %d requests in flight at once (gendex_in_flight); --concurrency is %d", most, limit)
	}
	if said.Load() == 0 {
		t.Errorf("gendex_in_flight never read above 0 on http://%s/metrics", listen)
	}
	rows, qerr := queryJSON[map[string]any](t, bin, db, "progress")
	if qerr != nil || len(rows) == 0 {
		t.Fatalf("progress: %v %v\n%s", rows, qerr, gen.Stderr())
	}
	// Each bomb crashes the server --max-crashes times and is an error; a
	// prompt beside a bomb in every one of its crashes may be one too.
	got := rows[0]
	raw, errs := got["raw"].(float64), got["errors"].(float64)
	if raw+errs != prompts || errs < bombs || got["missing_raw"] != float64(0) {
		t.Errorf("progress %v; want all %d prompts answered or failed, the %d bombs failed\n%s", got, prompts, bombs, gen.Stderr())
	}
	failed, qerr := queryJSON[map[string]any](t, bin, db, "errors", "B")
	if qerr != nil {
		t.Fatal(qerr)
	}
	var bombsFailed int
	for _, e := range failed {
		if id, _ := e["id"].(string); strings.HasPrefix(id, "bomb-") {
			bombsFailed++
		}
	}
	if bombsFailed != bombs {
		t.Errorf("%d bombs among the errors %v; want %d", bombsFailed, failed, bombs)
	}
}

// inFlightMetric reads gen's /metrics at url and returns the sum of its
// gendex_in_flight samples.
func inFlightMetric(url string) (int64, bool) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
	var sum int64
	for line := range strings.Lines(string(data)) {
		if !strings.HasPrefix(line, "gendex_in_flight{") && !strings.HasPrefix(line, "gendex_in_flight ") {
			continue
		}
		var n int64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &n); err == nil {
			sum += n
		}
	}
	return sum, true
}

// TestConcurrencyDefaultIsTheServersCapacity: without --concurrency, gen
// keeps a server of 512 slots (`gendex sim` as SGLang, its decode step
// growing with the batch) at its capacity, learned from its /metrics and
// /server_info: far more than the old fixed 128 in flight, and a small
// queue at the server (not the 1,500 a fixed 2048 leaves there); its ready
// line says so, and the limit is recorded (a limit event, the samples).
// With --concurrency 64 against the same server, never more than 64 are
// in flight, as gen counts them and as the server sees them.
func TestConcurrencyDefaultIsTheServersCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs simulator processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin, "--flavor", "sglang", "--metrics", "--slots", "512", "--step-base", "2ms", "--step-per-req", "4us", "--seed", "5")
	root := t.TempDir()
	var b strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&b, `{"id":"p-%d","input_ids":[%d,%d,%d,%d]}`+"\n", i, 100+i%50, 200+i%70, 300+i%90, 400+i)
	}
	writePrompts(t, filepath.Join(root, "C"), b.String())

	// run runs gen with flags and returns the most requests it counted in
	// flight (gendex_in_flight), the most the server ran plus queued, and
	// the server's longest queue, each read every 10 ms, and its log.
	run := func(flags ...string) (gen, server, queue int64, log, db string) {
		db, listen := filepath.Join(t.TempDir(), "g.db"), freeAddr(t)
		args := append([]string{"--db", db, "gen", "--server", url, "--out", t.TempDir(), "--max-new-tokens", "32", "--listen", listen}, flags...)
		p := startGendex(t, bin, "", append(args, root)...)
		for {
			if n, ok := inFlightMetric("http://" + listen + "/metrics"); ok {
				gen = max(gen, n)
			}
			if r, q, ok := simLoad(url); ok {
				server, queue = max(server, r+q), max(queue, q)
			}
			select {
			case <-p.Done():
				if code := p.Wait(); code != 0 {
					t.Fatalf("gen %v: exit %d\n%s", flags, code, p.Stderr())
				}
				return gen, server, queue, p.Stderr(), db
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	gen, server, queue, log, db := run()
	if !strings.Contains(log, "concurrency adaptive (up to ") {
		t.Errorf("the start line does not name the adaptive concurrency:\n%s", log)
	}
	if gen < 384 || server < 384 {
		t.Errorf("without --concurrency: at most %d in flight (gen's count), %d at the server; want most of its 512 slots\n%s", gen, server, log)
	}
	// A small queue: the limit is 544 while all 512 run; on a loaded
	// machine the simulator admits late and gen may go past it for a
	// moment, but never to the 1,536 a fixed 2048 queues.
	if queue > 256 {
		t.Errorf("without --concurrency: %d queued at the server at once; want a small queue\n%s", queue, log)
	}
	events, err := queryJSON[map[string]any](t, bin, db, "events")
	if err != nil {
		t.Fatal(err)
	}
	var limits []string
	for _, e := range events {
		if e["event"] == "limit" {
			limits = append(limits, fmt.Sprint(e["detail"]))
		}
	}
	if len(limits) == 0 || !strings.HasPrefix(limits[0], "2 -> 544: its max_running_requests (512)") {
		t.Errorf("limit events %q; want the first 2 -> 544 (held at 2 until its first reading; 512 stated, a queue of 32)", limits)
	}

	gen, server, _, log, _ = run("--concurrency", "64")
	if gen > 64 || server > 64 {
		t.Errorf("--concurrency 64: %d in flight (gen's count), %d at the server\n%s", gen, server, log)
	}
	if gen < 32 {
		t.Errorf("--concurrency 64: at most %d in flight; the test saw no load", gen)
	}
}

// simLoad reads the requests an SGLang simulator at url runs and queues
// (sglang:num_running_reqs, sglang:num_queue_reqs on its /metrics).
func simLoad(url string) (running, queued int64, ok bool) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, 0, false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, 0, false
	}
	var seen int
	for line := range strings.Lines(string(data)) {
		var v float64
		switch {
		case strings.HasPrefix(line, "sglang:num_running_reqs{"):
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			running, seen = int64(v), seen+1
		case strings.HasPrefix(line, "sglang:num_queue_reqs{"):
			fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v)
			queued, seen = int64(v), seen+1
		}
	}
	return running, queued, seen == 2
}
