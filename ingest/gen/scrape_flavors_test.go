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

	"gendex/ingest/gen/servermetrics"
	"gendex/ingest/gen/servermetrics/metricstest"
	"gendex/ingest/gen/sim"
	"gendex/query"
	"gendex/store"
)

// TestServerLineLlamaCpp: gen's live line of a llama-server without
// --metrics gives its own hint; of another server's /metrics, says so.
func TestServerLineLlamaCpp(t *testing.T) {
	t.Parallel()
	up := &server{name: "http://a"}
	up.up.Store(true)
	now := time.Now()
	if got, want := serverState(up, liveView{sample: store.ServerSample{NoMetrics: true, Flavor: store.FlavorLlamaCpp}, taken: true}, now),
		"up, its metrics unknown (no /metrics: start llama-server with --metrics)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if got, want := serverState(up, liveView{sample: store.ServerSample{Scraped: true, Flavor: store.FlavorOther}, taken: true, metrics: true}, now),
		"up, its metrics unknown (its /metrics has no sglang:, vllm: or llamacpp: names)"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

// flavorServer is the simulator (SGLang's API) with its /metrics replaced:
// metrics answers it (status, headers, body), and hits counts its reads.
func flavorServer(t *testing.T, metrics http.HandlerFunc) (url string, hits *atomic.Int64) {
	t.Helper()
	h := sim.New(sim.Config{Seed: 11}).Handler()
	hits = new(atomic.Int64)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			hits.Add(1)
			metrics(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, hits
}

// serverRowOf runs gen on 30 prompts against url and answers `query
// server` for it: the row by column, and gen's log.
func serverRowOf(t *testing.T, url string) (map[string]any, string) {
	t.Helper()
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "F", "ids", 30)
	dbPath := filepath.Join(out, "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, ScrapeEvery: 20 * time.Millisecond}, root)
	if err != nil || sum.Responses != 30 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, row := oneServerRow(t, db)
	// A run this short keeps one sample (one a second): its accept length
	// over a window is unknown (no pair of samples), so the reading's own
	// figure is checked, under a name of its own.
	row["sample_accept_length"] = sampleAccept(t, db)
	return row, log
}

// sampleAccept is the accept length of db's one server's last sample, as
// query shows one (nil: unknown).
func sampleAccept(t *testing.T, db *store.DB) any {
	t.Helper()
	var v any
	db.View(func(view *store.View) error {
		if s, ok, _ := view.LastServerSample(view.Servers()[0]); ok {
			if x, ok := s.Get(store.MetricAcceptLength); ok {
				v = query.Fixed{V: x, Prec: 2}
			}
		}
		return nil
	})
	return v
}

// oneServerRow answers `query server --window 1m` from db, which must
// hold one server: the answer, and its row by column.
func oneServerRow(t *testing.T, db *store.DB) (*query.Result, map[string]any) {
	t.Helper()
	q, _ := query.Parse([]string{"server", "--window", "1m"})
	res, err := query.Answer(db, q, time.Now())
	if err != nil || len(res.Rows) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	row := map[string]any{}
	for i, c := range res.Columns {
		row[c] = res.Rows[0][i]
	}
	return res, row
}

// TestQueryServerFlavors: gen against servers whose /metrics is vLLM's or
// llama.cpp's: `query server` has the same columns filled from each one's
// own names; what llama.cpp does not expose is unknown (never 0) and the
// note says why.
func TestQueryServerFlavors(t *testing.T) {
	t.Parallel()
	url, _ := flavorServer(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, metricstest.VLLM) })
	row, _ := serverRowOf(t, url)
	got := fmt.Sprint(row["running"], row["queued"], row["token_usage"], row["cache_hit_rate"], row["sample_accept_length"], " [", row["note"], "]")
	if want := "78 7 0.600 0.400 3.00 []"; got != want {
		t.Errorf("vLLM: %s, want %s", got, want)
	}

	url, _ = flavorServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(servermetrics.StartTimeHeader, "5021733148")
		fmt.Fprint(w, metricstest.LlamaCpp)
	})
	row, _ = serverRowOf(t, url)
	got = fmt.Sprint(row["running"], " ", row["queued"], " ", row["token_usage"], " ", row["cache_hit_rate"], " ", row["sample_accept_length"])
	if want := "8 24 <nil> <nil> <nil>"; got != want {
		t.Errorf("llama.cpp: %s, want %s", got, want)
	}
	note, _ := row["note"].(string)
	if !strings.HasPrefix(note, "llama.cpp: token_usage unknown: llama-server exposes no KV use") || !strings.Contains(note, "cache_hit_rate unknown") || strings.Contains(note, "accept_length") {
		t.Errorf("llama.cpp note %q", note)
	}
}

// TestScrapeLlamaCpp501: gen against a llama-server without --metrics: the
// 501 is said once, with llama-server's hint; /metrics is asked once in
// the run (not every few milliseconds), the live state and `query server`'s
// note give the hint, every column is unknown.
func TestScrapeLlamaCpp501(t *testing.T) {
	t.Parallel()
	url, hits := flavorServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotImplemented)
		fmt.Fprint(w, "{\"error\":{\"code\":501,\"message\":\"This server does not support metrics endpoint. Start it with `--metrics`\",\"type\":\"not_supported_error\"}}")
	})
	row, log := serverRowOf(t, url)
	if n := strings.Count(log, "start llama-server with --metrics"); n != 1 || !strings.Contains(log, "no /metrics (501 not_supported_error: llama-server)") {
		t.Errorf("said %d times:\n%s", n, log)
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("/metrics asked %d times, want once", n)
	}
	if row["note"] != "no /metrics (HTTP 501 not_supported_error): start llama-server with --metrics" {
		t.Errorf("note %q", row["note"])
	}
	for _, c := range []string{"running", "queued", "token_usage", "cache_hit_rate", "accept_length", "server_tokens_per_s"} {
		if row[c] != nil {
			t.Errorf("%s = %v, want unknown", c, row[c])
		}
	}
}
