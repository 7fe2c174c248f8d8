package gen

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store"
)

// TestServerViewOfFlavoredSimulator: gen against the simulator speaking
// vLLM (with a drafter) and llama.cpp (with and without --metrics), end to
// end: token-id prompts through /v1/completions, /metrics read while it
// runs, and `query server` with the same columns for each: what the
// flavor exposes known, what it does not unknown with the note saying
// why, llama-server without --metrics said once with its own hint.
func TestServerViewOfFlavoredSimulator(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		cfg     sim.Config
		known   []string // columns known
		unknown []string // columns unknown
		flavor  store.Flavor
		note    string // its prefix
		log     string // said once in gen's log
	}{
		{"vllm", sim.Config{Flavor: sim.FlavorVLLM, SpecDraftTokens: 4},
			[]string{"running", "queued", "token_usage", "cache_hit_rate", "accept_length", "server_tokens_per_s"}, nil,
			store.FlavorVLLM, "", ""},
		{"llamacpp", sim.Config{Flavor: sim.FlavorLlamaCpp, EnableMetrics: true},
			[]string{"running", "queued", "cache_hit_rate", "server_tokens_per_s"}, []string{"token_usage", "accept_length"},
			store.FlavorLlamaCpp, "llama.cpp: token_usage unknown: llama-server exposes no KV use", ""},
		{"llamacpp-no-metrics", sim.Config{Flavor: sim.FlavorLlamaCpp},
			nil, []string{"running", "queued", "token_usage", "cache_hit_rate", "accept_length", "server_tokens_per_s"},
			store.FlavorLlamaCpp, "no /metrics (HTTP 501 not_supported_error): start llama-server with --metrics", "start llama-server with --metrics"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.cfg.Seed, tc.cfg.Slots, tc.cfg.DecodeTokensPerSec = 3, 8, 200 // some 3 s: samples over several seconds
			_, url := simServer(t, tc.cfg)
			root, out := t.TempDir(), t.TempDir()
			writePrompts(t, root, "V", "ids", 200)
			maxNew := 24
			dbPath := filepath.Join(out, "g.db")
			sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, API: client.APICompletions,
				Concurrency: 16, ScrapeEvery: 50 * time.Millisecond, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}}, root)
			if err != nil || sum.Responses != 200 {
				t.Fatalf("%+v %v\n%s", sum, err, log)
			}
			if tc.log != "" && strings.Count(log, tc.log) != 1 {
				t.Errorf("%q said %d times:\n%s", tc.log, strings.Count(log, tc.log), log)
			}
			db, err := store.Open(dbPath, store.Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var last store.ServerSample
			db.View(func(v *store.View) error {
				last, _, err = v.LastServerSample(client.RedactURL(url))
				return err
			})
			if last.Flavor != tc.flavor {
				t.Errorf("flavor %v, want %v", last.Flavor, tc.flavor)
			}
			_, row := oneServerRow(t, db)
			for _, c := range tc.known {
				if row[c] == nil {
					t.Errorf("%s unknown, want known; row %v", c, row)
				}
			}
			for _, c := range tc.unknown {
				if row[c] != nil {
					t.Errorf("%s = %v, want unknown", c, row[c])
				}
			}
			if note := fmt.Sprint(row["note"]); !strings.HasPrefix(note, tc.note) || tc.note == "" && note != "" {
				t.Errorf("note %q, want %q", note, tc.note)
			}
		})
	}
}
