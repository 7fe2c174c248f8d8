package gen

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

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
