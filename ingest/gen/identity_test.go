package gen

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// TestIdentityChange: the comparison of a server read again with its
// first reading in the run: another model is a change, named before and
// after; another max_new_tokens is not, and neither is a key the server
// no longer tells (its identity read failed: unknown, not another).
func TestIdentityChange(t *testing.T) {
	first := `{"sampling":{"max_new_tokens":20},"unset":"server defaults","server":{"model":"model-one","version":"0.5"}}`
	for _, c := range []struct{ now, want string }{
		{first, ""},
		{`{"sampling":{"max_new_tokens":99},"unset":"server defaults","server":{"model":"model-one","version":"0.5"}}`, ""},
		{`{"sampling":{"max_new_tokens":20},"unset":"server defaults","server":{"model":"model-one"}}`, ""},
		{`{"sampling":{"max_new_tokens":20},"unset":"server defaults","server":{"model":"model-two","version":"0.5"}}`, `server.model: "model-one" before, "model-two" now`},
		{`{"sampling":{"max_new_tokens":20},"unset":"server defaults","server":{"model":"model-one","version":"0.5","chat_template":"x"}}`, `server.chat_template: unset`},
	} {
		got := identityChange([]byte(first), []byte(c.now))
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("identityChange(%s) = %q; want %q", c.now, got, c.want)
		}
	}
}

// TestRestartSeenInMetricsRereadsIdentity: a server restarted as another
// model between two requests (no request fails: one handler swaps its
// simulator for another) is found restarted only by its /metrics, whose
// counters go back; gen reads its identity again: an identity event
// naming both models, and, as it is the only server, the run stops,
// naming --allow-mixed, before the rest is answered. With --allow-mixed the
// run goes on and the rest say model-two.
func TestRestartSeenInMetricsRereadsIdentity(t *testing.T) {
	for _, mixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("allow-mixed=%v", mixed), func(t *testing.T) {
			cfg := sim.Config{Seed: 3, EnableMetrics: true, DecodeTokensPerSec: 400}
			cfg.Model = "model-one"
			one := sim.New(cfg).Handler()
			cfg.Model = "model-two"
			two := sim.New(cfg).Handler()
			var posts atomic.Int64
			var swapped atomic.Bool
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && posts.Add(1) == 60 {
					swapped.Store(true)
				}
				if swapped.Load() {
					two.ServeHTTP(w, r)
				} else {
					one.ServeHTTP(w, r)
				}
			}))
			defer hs.Close()
			root, out := t.TempDir(), t.TempDir()
			const n = 400
			writePrompts(t, root, "R", "ids", n)
			maxNew := 20
			dbPath := filepath.Join(out, "g.db")
			_, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{hs.URL}, Out: out, Concurrency: 8, AllowMixed: mixed,
				ScrapeEvery: 50 * time.Millisecond, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}}, root)
			var restarted, identity string
			for _, e := range events(t, dbPath) {
				switch e.Name {
				case EventRestarted:
					restarted = e.Detail
				case EventIdentity:
					identity = e.Detail
				}
			}
			if restarted == "" || !strings.Contains(identity, `"model-one" before, "model-two" now`) {
				t.Fatalf("events %q (restarted %q, identity %q); want the restart and an identity event naming both models\n%s", eventNames(events(t, dbPath)), restarted, identity, log)
			}
			byModel, twice := map[string]int{}, 0
			lines := outputLines(t, filepath.Join(out, "R", "raw_responses.jsonl"))
			for _, ls := range lines {
				if len(ls) > 1 {
					twice++
				}
				for _, l := range ls {
					m, _ := l["model"].(string)
					byModel[m]++
				}
			}
			if mixed {
				if err != nil || len(lines) != n || twice > 0 || byModel["model-two"] == 0 {
					t.Errorf("--allow-mixed: %v, %d prompts answered (%d twice), by model %v; want every prompt answered once, the rest by model-two\n%s", err, len(lines), twice, byModel, log)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "--allow-mixed") || byModel["model-one"]+byModel["model-two"] >= n {
				t.Errorf("gen: %v, answers by model %v; want it stopped at the change, naming --allow-mixed, before all %d were answered\n%s", err, byModel, n, log)
			}
		})
	}
}
