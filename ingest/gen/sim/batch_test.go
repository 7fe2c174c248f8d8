package sim

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gendex/ingest/gen/servermetrics"
)

// runBatch queues n items of prompt tokens that each decode out tokens
// (max_new_tokens budget) on a batcher of cfg, all before the first step,
// and runs its loop on the simulated clock alone until every one is done.
// It returns the batcher, whose counters tell what happened.
func runBatch(t *testing.T, cfg Config, n, prompt, out, budget int) *batcher {
	t.Helper()
	cfg = cfg.withDefaults()
	b := newBatcher(cfg, newSlotPool(cfg.Slots))
	b.sleep = func(time.Duration) {}
	var seqs []*seq
	for range n {
		it := &item{prompt: make([]int, prompt), budget: budget}
		s := &seq{it: it, stop: out, prefill: prompt, finished: make(chan struct{})}
		seqs = append(seqs, s)
	}
	b.waiting, b.looping = append(b.waiting, seqs...), true
	b.loop()
	for i, s := range seqs {
		select {
		case <-s.finished:
		default:
			t.Fatalf("item %d of %d never finished", i, n)
		}
		if s.done != out {
			t.Fatalf("item %d decoded %d tokens, want %d", i, s.done, out)
		}
	}
	if b.held != 0 || len(b.running) != 0 || len(b.waiting) != 0 {
		t.Fatalf("after the run: %d KV tokens held, %d running, %d waiting", b.held, len(b.running), len(b.waiting))
	}
	if got := b.slots.snapshot(); got.running != 0 || got.maxRunning > cfg.Slots {
		t.Fatalf("slots after the run: %+v (max %d)", got, cfg.Slots)
	}
	return b
}

// tokensPerSec is a batcher's throughput on its simulated clock.
func tokensPerSec(b *batcher) float64 { return float64(b.decoded) / b.clock.Seconds() }

// The step time grows with the batch: one item's tokens/s fall as more
// run at once, the total rises, then flattens toward 1/StepPerReq; a KV
// pool flattens it where the pool is full, whatever the step time.
func TestKneeThroughputRisesThenFlattens(t *testing.T) {
	t.Parallel()
	steps := Config{StepBase: 10 * time.Millisecond, StepPerReq: time.Millisecond, Slots: 4096}
	// A prefill of 100k tokens/s: a preempted item's recompute costs time.
	pool := Config{StepBase: 10 * time.Millisecond, StepPerReq: 100 * time.Microsecond, Slots: 4096, KVTokens: 16 * 164, PrefillTokensPerSec: 1e5}
	for _, k := range []struct {
		name string
		cfg  Config
	}{{"step time", steps}, {"sglang KV pool", pool}, {"vllm KV pool", withFlavor(pool, FlavorVLLM)}} {
		var tps []float64
		var line []string
		for _, n := range []int{1, 4, 16, 64, 256} {
			b := runBatch(t, k.cfg, n, 100, 64, 64)
			tps = append(tps, tokensPerSec(b))
			line = append(line, fmt.Sprintf("%d: %.0f tok/s", n, tps[len(tps)-1]))
		}
		t.Logf("%s: %s", k.name, strings.Join(line, ", "))
		if tps[1] < 2*tps[0] || tps[2] < 1.5*tps[1] {
			t.Errorf("%s: throughput does not rise with the batch: %s", k.name, strings.Join(line, ", "))
		}
		if tps[4] > 1.25*tps[3] {
			t.Errorf("%s: throughput does not flatten: %s", k.name, strings.Join(line, ", "))
		}
	}
	// One item alone decodes at 1/(base + per-req); 256 at once far slower
	// each: 64 tokens take 64 steps of 10 ms + 256 ms.
	one := runBatch(t, steps, 1, 100, 64, 64)
	if got, want := one.clock, 64*11*time.Millisecond; got != want {
		t.Errorf("one item: %v on the simulated clock, want %v", got, want)
	}
	many := runBatch(t, steps, 256, 100, 64, 64)
	if got, want := many.clock, 64*(10+256)*time.Millisecond; got != want {
		t.Errorf("256 items: %v, want %v", got, want)
	}
}

func withFlavor(c Config, f string) Config { c.Flavor = f; return c }

// SGLang reserves each running item's prompt and max_new_tokens: past the
// pool it queues, never preempts, and never holds more than the pool.
// vLLM admits on the prompt alone and preempts when outputs grow: the
// evicted items recompute, yet each decodes its tokens once.
func TestKneePoolQueuesOrPreempts(t *testing.T) {
	t.Parallel()
	cfg := Config{StepBase: time.Millisecond, KVTokens: 1000, Slots: 64}
	sg := runBatch(t, cfg, 40, 50, 150, 200)
	if sg.preemptions != 0 || sg.recomputed != 0 {
		t.Errorf("sglang: %d preemptions, %d tokens recomputed, want none", sg.preemptions, sg.recomputed)
	}
	if peak := sg.slots.snapshot().maxRunning; peak != 1000/250 {
		t.Errorf("sglang: at most %d running, want %d (the pool over prompt + max_new_tokens)", peak, 1000/250)
	}
	// Without a pool, Slots (SGLang's max_running_requests, what
	// /server_info reports) caps the batch.
	capped := runBatch(t, Config{StepBase: time.Millisecond, Slots: 8}, 40, 50, 150, 200)
	if peak := capped.slots.snapshot().maxRunning; peak != 8 {
		t.Errorf("8 slots: at most %d running, want 8", peak)
	}
	vl := runBatch(t, withFlavor(cfg, FlavorVLLM), 40, 50, 150, 200)
	if vl.preemptions == 0 || vl.recomputed <= 50*vl.preemptions {
		t.Errorf("vllm: %d preemptions, %d tokens recomputed, want some, each its prompt and output", vl.preemptions, vl.recomputed)
	}
	if vl.decoded != 40*150 {
		t.Errorf("vllm: %d tokens decoded, want %d: a preempted item's tokens are kept, its KV recomputed", vl.decoded, 40*150)
	}
}

// The gauges of each flavor's /metrics follow the knee scheduler: SGLang
// queues (num_queue_reqs above 0, token_usage never above 1), vLLM
// preempts (num_preemptions_total), and every request gets the answer a
// server without a pool gives, once.
func TestKneeMetricsAndAnswers(t *testing.T) {
	t.Parallel()
	for _, flavor := range []string{FlavorSGLang, FlavorVLLM, FlavorLlamaCpp} {
		t.Run(flavor, func(t *testing.T) {
			t.Parallel()
			base := Config{Flavor: flavor, EnableMetrics: true, Seed: 7, Slots: 8}
			knee := base
			knee.StepBase = 2 * time.Millisecond
			if flavor != FlavorLlamaCpp {
				knee.KVTokens = 1500 // else its 8 slots bind
			}
			want := completions(t, base, 24)
			s, url := testServer(t, knee)
			var got []string
			var peakQueue, peakUsage float64
			done := make(chan struct{})
			go func() { got = completionsAt(t, url, flavor, 24); close(done) }()
			for running := true; running; {
				select {
				case <-done:
					running = false
				case <-time.After(5 * time.Millisecond):
				}
				g := scrape(t, url, flavor)
				peakQueue, peakUsage = max(peakQueue, g.queue), max(peakUsage, g.usage)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Errorf("answer %d under the pool:\n%s\nwant (no pool):\n%s", i, got[i], want[i])
				}
			}
			st := s.Stats()
			if st.Completed != 24 || st.Running != 0 || st.Queued != 0 || st.KVTokensHeld != 0 {
				t.Errorf("stats after the run: %+v", st)
			}
			if peakQueue == 0 {
				t.Errorf("no request ever queued: the pool never bound")
			}
			if flavor != FlavorLlamaCpp && peakUsage > 1 {
				t.Errorf("KV usage peaked at %.3f, above the pool", peakUsage)
			}
			g := scrape(t, url, flavor)
			if flavor == FlavorVLLM && (st.Preemptions == 0 || g.preemptions != float64(st.Preemptions)) {
				t.Errorf("vllm: %d preemptions, /metrics says %v: want some, shown", st.Preemptions, g.preemptions)
			}
			if flavor == FlavorSGLang && st.Preemptions != 0 {
				t.Errorf("sglang preempted %d times; it queues", st.Preemptions)
			}
		})
	}
}

// TestVLLMStatesItsPool: the vLLM flavor states a KV pool that binds
// (Config.KVTokens) in vllm:cache_config_info, as gen reads it; a pool
// that does not bind, and SGLang (which states its pool in /server_info),
// state none there.
func TestVLLMStatesItsPool(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  Config
		want int
	}{
		{Config{Flavor: FlavorVLLM, StepBase: time.Millisecond, KVTokens: 1024}, 1024},
		{Config{Flavor: FlavorVLLM, StepBase: time.Millisecond, KVTokens: 1000}, 1000},
		{Config{Flavor: FlavorVLLM, StepBase: time.Millisecond}, 0},
		{Config{Flavor: FlavorSGLang, EnableMetrics: true, StepBase: time.Millisecond, KVTokens: 1024}, 0},
	} {
		_, url := testServer(t, c.cfg)
		resp, b := do(t, "GET", url+"/metrics", "", "")
		if got := servermetrics.Read(b).PoolTokens(); resp.StatusCode != 200 || got != c.want {
			t.Errorf("%s, --kv-tokens %d: /metrics %d states a pool of %d tokens, want %d", c.cfg.Flavor, c.cfg.KVTokens, resp.StatusCode, got, c.want)
		}
	}
}

// completions answers n prompts on a fresh server of cfg, for reference.
func completions(t *testing.T, cfg Config, n int) []string {
	t.Helper()
	_, url := testServer(t, cfg)
	return completionsAt(t, url, cfg.Flavor, n)
}

// completionsAt sends n /v1/completions at once and returns each answer's
// text and finish reason, in prompt order.
func completionsAt(t *testing.T, url, flavor string, n int) []string {
	t.Helper()
	out := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := `{"model":"` + modelOf(flavor) + `","prompt":"question ` + strconv.Itoa(i) + strings.Repeat(" with context", 10) + `","max_tokens":120,"temperature":0}`
			resp, b := post(t, url+"/v1/completions", body)
			if resp.StatusCode != 200 {
				t.Errorf("prompt %d: %d %s", i, resp.StatusCode, b)
				return
			}
			c := obj(t, obj(t, decode(t, b))["choices"].([]any)[0])
			out[i] = fmt.Sprint(c["text"], " | ", c["finish_reason"])
		})
	}
	wg.Wait()
	return out
}

// gauges are the load gauges of one /metrics scrape, by meaning.
type gauges struct{ queue, usage, preemptions float64 }

// scrape reads the queue, KV usage and preemptions of a flavor's /metrics.
func scrape(t *testing.T, url, flavor string) gauges {
	t.Helper()
	names := map[string][3]string{
		FlavorSGLang:   {"sglang:num_queue_reqs", "sglang:token_usage", ""},
		FlavorVLLM:     {"vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total"},
		FlavorLlamaCpp: {"llamacpp:requests_deferred", "", ""},
	}[flavor]
	resp, b := do(t, "GET", url+"/metrics", "", "")
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d %s", resp.StatusCode, b)
	}
	var g gauges
	for _, line := range strings.Split(string(b), "\n") {
		name, rest, _ := strings.Cut(line, "{")
		if i := strings.IndexByte(rest, '}'); i >= 0 {
			rest = rest[i+1:]
		} else {
			name, rest, _ = strings.Cut(line, " ")
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
		if err != nil || strings.HasPrefix(line, "#") {
			continue
		}
		for i, p := range []*float64{&g.queue, &g.usage, &g.preemptions} {
			if names[i] != "" && name == names[i] {
				*p = v
			}
		}
	}
	return g
}
