package gen

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gendex/ingest/gen/sim"
)

// TestWaitSaysNothingListens: a server that has refused connections for
// long (refusedLong; a minute in gen) is said to have nothing listening
// on its port, to be checked, while gen goes on waiting for it, not only
// "model loading". Not parallel: it sets the package's refusedLong, which
// every run reads.
func TestWaitSaysNothingListens(t *testing.T) {
	defer func(d time.Duration) { refusedLong = d }(refusedLong)
	refusedLong = 300 * time.Millisecond
	addr := freeAddr(t)
	root := t.TempDir()
	writePrompts(t, root, "B", "ids", 3)
	_, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"),
		Config{Servers: []string{"http://" + addr}, WaitReady: 1500 * time.Millisecond, LogEvery: 200 * time.Millisecond}, root)
	if err == nil || !strings.Contains(err.Error(), "no server became ready") {
		t.Fatalf("gen against a port nothing listens on: %v\n%s", err, log)
	}
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	if !strings.Contains(log, "connection refused (model loading)") || !strings.Contains(log, "nothing listens on port "+port+" (connection refused): check --server") {
		t.Errorf("the wait says first that the model loads, then that nothing listens on port %s:\n%s", port, log)
	}
}

// TestInterruptSaysWhatWasGivenUp: an interrupt whose grace ends with
// answers still in flight says how many were given up (the next run asks
// them again); none of them is written or marked failed.
func TestInterruptSaysWhatWasGivenUp(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writePrompts(t, root, "B", "ids", 20)
	ctx, cancel := context.WithCancel(t.Context())
	// The interrupt comes as the fourth prompt reaches the server (every
	// answer takes seconds), however slowly the run started. The route's
	// probe (an empty body to /generate, preflight.go) is no prompt.
	h := sim.New(sim.Config{Seed: 4, DecodeTokensPerSec: 20, Slots: 8}).Handler()
	var asked atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if r.URL.Path == "/generate" && string(bytes.TrimSpace(body)) != "{}" && asked.Add(1) == 4 {
			cancel()
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	sum, log, err := runGen(t, ctx, filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{hs.URL}, Concurrency: 4, Grace: 200 * time.Millisecond}, root)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted run: %v\n%s", err, log)
	}
	if sum.GivenUp != 4 || sum.Responses != 0 || sum.Errors != 0 || !strings.Contains(log, "gen: interrupted: 4 answers in flight were given up after --grace 200ms; the next run asks them again") {
		t.Errorf("summary %+v; want 4 given up, none written or failed:\n%s", sum, log)
	}
}
