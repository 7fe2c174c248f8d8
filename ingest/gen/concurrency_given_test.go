package gen

import (
	"net/http"
	"path/filepath"
	"testing"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// TestConcurrencyGivenIsKept: a --concurrency given is the most requests
// in flight, never taken for the adaptive default (which would start at
// what the pool holds and grow), though the server has room for many
// more.
func TestConcurrencyGivenIsKept(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 4, DecodeTokensPerSec: 500, Slots: 64})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "C", "text", 30)
	ct := &countingTransport{rt: client.NewTransport(16)}
	const limit = 3
	sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{url}, Out: out, Concurrency: limit,
		HTTP: &http.Client{Transport: ct}, Sampling: maxNew(20)}, root)
	if err != nil || sum.Responses != 30 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	if most := ct.most.Load(); most == 0 || most > limit {
		t.Errorf("%d generation requests in flight at once; --concurrency is %d", most, limit)
	}
}
