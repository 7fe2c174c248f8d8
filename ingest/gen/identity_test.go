package gen

import (
	"context"
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
	t.Parallel()
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
// naming both models. As the only server, the run stops, naming
// --allow-mixed, before the rest is answered; with --allow-mixed the run
// goes on and the rest say model-two; beside another server, it is sent
// nothing more and the other answers the rest, each prompt once.
func TestRestartSeenInMetricsRereadsIdentity(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name          string
		mixed, steady bool
	}{{"alone", false, false}, {"allow-mixed", true, false}, {"beside-another", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			cfg := sim.Config{Seed: 3, EnableMetrics: true, DecodeTokensPerSec: 400}
			cfg.Model = "model-one"
			one := sim.New(cfg).Handler()
			cfg.Model = "model-two"
			two := sim.New(cfg).Handler()
			var posts, postsTwo atomic.Int64
			var swapped atomic.Bool
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && posts.Add(1) == 60 {
					swapped.Store(true)
				}
				if !swapped.Load() {
					one.ServeHTTP(w, r)
					return
				}
				if r.Method == http.MethodPost {
					postsTwo.Add(1)
				}
				two.ServeHTTP(w, r)
			}))
			defer hs.Close()
			servers := []string{hs.URL}
			if c.steady {
				cfg.Model = "model-one"
				_, url := simServer(t, cfg)
				servers = append(servers, url)
			}
			root, out := t.TempDir(), t.TempDir()
			const n = 400
			writePrompts(t, root, "R", "ids", n)
			maxNew := 20
			dbPath := filepath.Join(out, "g.db")
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // a few seconds each
			defer cancel()
			_, log, err := runGen(t, ctx, dbPath, Config{Servers: servers, Out: out, Concurrency: 8, AllowMixed: c.mixed,
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
			switch {
			case c.mixed:
				if err != nil || len(lines) != n || twice > 0 || byModel["model-two"] == 0 {
					t.Errorf("--allow-mixed: %v, %d prompts answered (%d twice), by model %v; want every prompt answered once, the rest by model-two\n%s", err, len(lines), twice, byModel, log)
				}
			case c.steady:
				// Sent to it between its restart and gen's next reading of
				// its /metrics (50ms): a few; before it was retired, half
				// of the rest.
				if err != nil || len(lines) != n || twice > 0 || postsTwo.Load() >= n/4 {
					t.Errorf("beside another server: %v, %d prompts answered (%d twice), %d requests to it once restarted; want every prompt answered once, the restarted server sent nothing once retired\n%s", err, len(lines), twice, postsTwo.Load(), log)
				}
			default:
				if err == nil || !strings.Contains(err.Error(), "--allow-mixed") || len(lines) >= n {
					t.Errorf("gen: %v, %d prompts answered; want it stopped at the change, naming --allow-mixed, before all %d were answered\n%s", err, len(lines), n, log)
				}
			}
		})
	}
}
