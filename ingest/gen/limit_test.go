package gen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/servermetrics"
	"gendex/store"
)

// governed servers for a test: up, in one pool, under a governor of an
// adaptive run (bound 4096) whose events and log the test reads.
type govTest struct {
	g       *governor
	servers []*server
	log     *bytes.Buffer
	events  []store.Event
	now     int64 // the readings' clock, Unix ms
}

func newGovTest(names ...string) *govTest {
	tt := &govTest{log: &bytes.Buffer{}, now: 1_000_000}
	for _, n := range names {
		s := &server{name: n}
		s.up.Store(true)
		tt.servers = append(tt.servers, s)
	}
	cfg := &Config{adaptive: true, Concurrency: MaxAdaptive}
	tt.g = newGovernor(&control{log: tt.log}, cfg, newPool(tt.servers), true)
	tt.g.event = func(at int64, server, name, detail string) {
		tt.events = append(tt.events, store.Event{Time: at, Server: server, Name: name, Detail: detail})
	}
	return tt
}

// read gives s's governor one reading of a server of capacity slots
// that holds all gen sends (gen using all its limit), 250 ms after the
// last.
func (tt *govTest) read(s *server, capacity int) *store.ServerSample {
	tt.now += 250
	f := s.limit.Load()
	s.inFlight.Store(f)
	smp := &store.ServerSample{Time: tt.now, Up: true, Scraped: true, Flavor: store.FlavorVLLM}
	smp.Set(store.MetricRunning, float64(min(f, int64(capacity))))
	smp.Set(store.MetricQueued, float64(max(f-int64(capacity), 0)))
	tt.g.observe(s, smp)
	return smp
}

// TestGovernorPerServer: two servers, one of 512 slots and one of 16,
// held until their first reading, each get their own limit (the capacity
// and a small queue), the samples
// keep it and gen's requests in flight, each change that matters is one
// event (a run of doublings folded into one), and the log says each
// capacity found once.
func TestGovernorPerServer(t *testing.T) {
	tt := newGovTest("http://big:30000", "http://small:30000")
	big, small := tt.servers[0], tt.servers[1]
	if big.limit.Load() != holdLimit || small.limit.Load() != holdLimit {
		t.Fatalf("before a reading: %d and %d, want %d", big.limit.Load(), small.limit.Load(), holdLimit)
	}
	tt.read(big, 512)
	tt.read(small, 16)
	if big.limit.Load() != AdaptiveStart || small.limit.Load() != AdaptiveStart {
		t.Fatalf("start (nothing stated): %d and %d, want %d", big.limit.Load(), small.limit.Load(), AdaptiveStart)
	}
	var last *store.ServerSample
	for range 40 {
		last = tt.read(big, 512)
		tt.read(small, 16)
	}
	for _, c := range []struct {
		s        *server
		capacity int
	}{{big, 512}, {small, 16}} {
		lim := int(c.s.limit.Load())
		if lim <= c.capacity || lim > c.capacity+2*queueKeep(c.capacity)+2 {
			t.Errorf("%s: limit %d for a capacity of %d", c.s.name, lim, c.capacity)
		}
	}
	if last.Limit != big.limit.Load() || last.InFlight != big.inFlight.Load() {
		t.Errorf("the sample keeps limit %d and in flight %d; the server's are %d and %d", last.Limit, last.InFlight, big.limit.Load(), big.inFlight.Load())
	}
	tt.g.flush()
	var bigEvents []string
	for _, e := range tt.events {
		if e.Name != EventLimit {
			t.Errorf("event %+v", e)
		}
		if e.Server == big.name {
			bigEvents = append(bigEvents, e.Detail)
		}
	}
	// 32 -> 1024 (folded doublings), then the cut to 512 and its queue.
	if len(bigEvents) != 2 || !strings.HasPrefix(bigEvents[0], "32 -> 1024: room") || !strings.Contains(bigEvents[1], ": queue grew (512)") {
		t.Errorf("the big server's events: %q", bigEvents)
	}
	for _, s := range tt.servers {
		if n := strings.Count(tt.log.String(), s.name+": capacity "); n != 1 {
			t.Errorf("the log says %s's capacity %d times:\n%s", s.name, n, tt.log)
		}
	}
}

// TestGovernorNoSignal: a server with no /metrics, or /metrics without a
// queue, keeps DefaultConcurrency, said once in the log; a run with a
// --concurrency sets no limit of its own, and its samples keep each
// server's share.
func TestGovernorNoSignal(t *testing.T) {
	tt := newGovTest("http://a:1", "http://b:1")
	a, b := tt.servers[0], tt.servers[1]
	for range 3 {
		tt.read(a, 1<<20) // grows
	}
	for range 3 {
		tt.g.observe(a, &store.ServerSample{Time: tt.now, Up: true, NoMetrics: true})
		tt.g.observe(b, &store.ServerSample{Time: tt.now, Up: true, Scraped: true, Flavor: store.FlavorOther})
	}
	if a.limit.Load() != DefaultConcurrency || b.limit.Load() != DefaultConcurrency {
		t.Errorf("no signal: limits %d and %d, want %d", a.limit.Load(), b.limit.Load(), DefaultConcurrency)
	}
	for _, said := range []string{"gen: http://a:1: no /metrics: 128 requests at once\n", "gen: http://b:1: no queue in its /metrics: 128 requests at once\n"} {
		if n := strings.Count(tt.log.String(), said); n != 1 {
			t.Errorf("%q said %d times:\n%s", said, n, tt.log)
		}
	}
	if tt.g.fast(a) {
		t.Error("a server with no signal is read fast")
	}

	s := &server{name: "http://c:1"}
	s.up.Store(true)
	s2 := &server{name: "http://d:1"}
	g := newGovernor(&control{log: &bytes.Buffer{}}, &Config{Concurrency: 64}, newPool([]*server{s, s2}), true)
	smp := &store.ServerSample{Up: true, Scraped: true}
	smp.Set(store.MetricRunning, 0)
	smp.Set(store.MetricQueued, 0)
	g.observe(s, smp)
	if s.limit.Load() != 0 || smp.Limit != 32 {
		t.Errorf("--concurrency 64 over two servers: limit %d, sample's %d, want none and 32", s.limit.Load(), smp.Limit)
	}
}

// TestPickHonoursLimits: pick sends a server no more than its limit, by
// the share of it in use; when every server is at its limit it waits,
// and a limit that rises or a request that ends lets it go.
func TestPickHonoursLimits(t *testing.T) {
	a, b := &server{name: "a"}, &server{name: "b"}
	p := newPool([]*server{a, b})
	for _, s := range p.servers {
		s.up.Store(true)
	}
	p.setLimit(a, 1)
	p.setLimit(b, 3)
	for range 4 {
		if _, err := p.pick(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if a.inFlight.Load() != 1 || b.inFlight.Load() != 3 {
		t.Fatalf("in flight %d and %d, want 1 and 3", a.inFlight.Load(), b.inFlight.Load())
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if s, err := p.pick(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("both at their limits: picked %v (%v)", s, err)
	}
	picked := make(chan *server)
	for range 2 {
		go func() {
			s, _ := p.pick(t.Context())
			picked <- s
		}()
	}
	p.setLimit(a, 2)
	if s := <-picked; s != a {
		t.Errorf("a's limit rose: picked %s", s.name)
	}
	p.release(b)
	if s := <-picked; s != b {
		t.Errorf("a request to b ended: picked %s", s.name)
	}
}

// sample is a reading of s at tt's clock, 250 ms after the last: running,
// queued and KV use as given, gen's requests in flight as they are.
func (tt *govTest) sample(s *server, flavor store.Flavor, running, queued int, kv float64) *store.ServerSample {
	tt.now += 250
	smp := &store.ServerSample{Time: tt.now, Up: true, Scraped: true, Flavor: flavor}
	smp.Set(store.MetricRunning, float64(running))
	smp.Set(store.MetricQueued, float64(queued))
	smp.Set(store.MetricTokenUsage, kv)
	tt.g.observe(s, smp)
	return smp
}

// TestGovernorStartsWithinThePool: a vLLM server that states a pool of
// 512 tokens (cache_config_info), for prompts of 32 ids fed and 32 new
// tokens, is held until a reading shows gen's requests, then starts at
// the 8 requests its pool holds, with no queue (it would admit and
// preempt them), said at once as its own event, and grows no further
// however empty its KV looks.
func TestGovernorStartsWithinThePool(t *testing.T) {
	tt := newGovTest("http://vllm:8000")
	s := tt.servers[0]
	tt.g.reqTokens = 32
	tt.g.prompts = &promptTally{}
	tt.g.stated(s, servermetrics.Stated{PoolTokens: 512}, tt.now)
	tt.sample(s, store.FlavorVLLM, 0, 0, 0) // no request of gen's yet
	if got := s.limit.Load(); got != holdLimit || !tt.g.held(s) {
		t.Fatalf("no request on it yet: limit %d, want held at %d", got, holdLimit)
	}
	for range 2 {
		tt.g.prompts.note(32) // the feeder gives out prompts of 32 ids
	}
	s.inFlight.Store(2)
	tt.sample(s, store.FlavorVLLM, 2, 0, 2*33/512.0)
	if got := s.limit.Load(); got != 8 {
		t.Fatalf("a pool of 512 tokens, requests of 32+32: started at %d, want 8", got)
	}
	if len(tt.events) != 1 || tt.events[0].Detail != "2 -> 8: its KV pool (512 tokens: 8 requests of 32+32 tokens)" {
		t.Errorf("the start's events: %+v; want it as one, at once", tt.events)
	}
	for range 5 {
		s.inFlight.Store(8)
		tt.sample(s, store.FlavorVLLM, 8, 0, 8*40/512.0)
	}
	if got := s.limit.Load(); got != 8 {
		t.Errorf("8 young requests in the pool: grew to %d, past the 8 it holds", got)
	}
}

// TestGovernorStartsFromTheKVHeld: an SGLang server sent text prompts
// (no ids to count) that states 2,048 slots and a pool of 32,768 tokens
// starts at what its pool holds of the run's requests, their prompts read
// from its KV held per running request (33 tokens) at the first reading
// that shows them, and a small queue.
func TestGovernorStartsFromTheKVHeld(t *testing.T) {
	tt := newGovTest("http://sglang:30000")
	s := tt.servers[0]
	tt.g.reqTokens = 32
	tt.g.stated(s, servermetrics.Stated{Running: 2048, PoolTokens: 32768}, tt.now)
	s.inFlight.Store(2)
	tt.sample(s, store.FlavorSGLang, 2, 0, 2*33/32768.0)
	fits := 32768 / (33 + 32)
	if got := s.limit.Load(); got != int64(fits+queueKeep(fits)) {
		t.Errorf("prompts of 33 tokens held, 32 new: started at %d, want %d and a queue of %d", got, fits, queueKeep(fits))
	}
}

// TestGovernorStatedAgain: a server restarted with another
// max_running_requests starts again at what it states now, though its
// limit was cut since its first start.
func TestGovernorStatedAgain(t *testing.T) {
	tt := newGovTest("http://sglang:30000")
	s := tt.servers[0]
	tt.g.stated(s, servermetrics.Stated{Running: 512}, tt.now)
	s.inFlight.Store(2)
	tt.sample(s, store.FlavorSGLang, 2, 0, 0.01)
	if got := s.limit.Load(); got != 512+int64(queueKeep(512)) {
		t.Fatalf("stated 512: started at %d", got)
	}
	s.inFlight.Store(544)
	for range 2 {
		tt.sample(s, store.FlavorSGLang, 300, 244, 0.5) // another's load: cut
	}
	if s.limit.Load() >= 544 {
		t.Fatalf("no cut for a long queue: %d", s.limit.Load())
	}
	tt.g.stated(s, servermetrics.Stated{Running: 1024}, tt.now)
	if got := s.limit.Load(); got != 1024+int64(queueKeep(1024)) {
		t.Errorf("restarted stating 1024: limit %d, want %d", got, 1024+queueKeep(1024))
	}
}

// TestCapacityReadOnceAndAgain: what an SGLang server states of its
// capacity is read from what learn read of it (its /get_server_info, for
// its identity): its limit starts there and gen asks the server nothing
// more; once learn reads it again (the server came back, or restarted)
// with another max_running_requests, the limit starts again there.
func TestCapacityReadOnceAndAgain(t *testing.T) {
	t.Parallel()
	var asked atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			asked.Add(1)
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, "sglang:num_running_reqs 2\nsglang:num_queue_reqs 0\nsglang:token_usage 0.01\n")
	}))
	defer hs.Close()
	s := &server{name: hs.URL}
	s.cl.Store(client.New(hs.URL, client.Options{HTTP: hs.Client()}))
	s.up.Store(true)
	s.inFlight.Store(2)
	learn := func(info string) { b := []byte(info); s.serverInfo.Store(&b) }
	learn(`{"max_running_requests":512,"model_path":"m"}`)
	m := &monitor{ctl: &control{log: &bytes.Buffer{}}, wake: make(chan struct{}, 1), hc: hs.Client(), every: time.Second}
	m.gov = newGovernor(m.ctl, &Config{adaptive: true, Concurrency: MaxAdaptive}, newPool([]*server{s}), true)
	sc := &scraper{m: m, s: s, url: hs.URL + "/metrics"}
	for range 3 {
		sc.scrape(t.Context(), false)
	}
	if got := s.limit.Load(); asked.Load() != 0 || got != 512+int64(queueKeep(512)) {
		t.Fatalf("three readings: limit %d, want %d; the server asked %d more times, want none", got, 512+queueKeep(512), asked.Load())
	}
	learn(`{"max_running_requests":128,"model_path":"m"}`) // restarted with --max-running-requests 128
	sc.scrape(t.Context(), false)
	if got := s.limit.Load(); got != 128+int64(queueKeep(128)) {
		t.Errorf("read again stating 128: limit %d, want %d", got, 128+queueKeep(128))
	}
}

// TestGovernorLlamaCppSlots: a llama.cpp server's total_slots (its
// /props, as learn read it) is its capacity: with no /metrics its limit
// is its slots and a small queue, not DefaultConcurrency, said once;
// with /metrics it starts there.
func TestGovernorLlamaCppSlots(t *testing.T) {
	tt := newGovTest("http://llama:8080", "http://llama:8081")
	quiet, read := tt.servers[0], tt.servers[1]
	for _, s := range tt.servers {
		b := []byte(`{"default_generation_settings":{"n_ctx":512},"total_slots":8}`)
		s.serverInfo.Store(&b)
	}
	for range 2 {
		tt.g.observe(quiet, &store.ServerSample{Time: tt.now, Up: true, NoMetrics: true, Flavor: store.FlavorLlamaCpp})
	}
	if got := quiet.limit.Load(); got != 8+int64(queueKeep(8)) {
		t.Errorf("no /metrics, 8 slots stated: limit %d, want %d", got, 8+queueKeep(8))
	}
	if said := "gen: http://llama:8080: no /metrics: 10 requests at once (the 8 it runs at once, as it states, and a queue)\n"; strings.Count(tt.log.String(), said) != 1 {
		t.Errorf("want %q once in the log:\n%s", said, tt.log)
	}
	read.inFlight.Store(2)
	tt.sample(read, store.FlavorLlamaCpp, 2, 0, 0)
	if got := read.limit.Load(); got != 8+int64(queueKeep(8)) {
		t.Errorf("its /metrics read, 8 slots stated: started at %d, want %d", got, 8+queueKeep(8))
	}
}
