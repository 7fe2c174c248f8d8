package gen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// countingTransport counts the generation requests in flight through it
// and keeps the most there were at once.
type countingTransport struct {
	rt        http.RoundTripper
	now, most atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/generate" {
		return c.rt.RoundTrip(r)
	}
	n := c.now.Add(1)
	for m := c.most.Load(); n > m && !c.most.CompareAndSwap(m, n); m = c.most.Load() {
	}
	resp, err := c.rt.RoundTrip(r)
	if err != nil {
		c.now.Add(-1)
		return resp, err
	}
	resp.Body = &doneBody{ReadCloser: resp.Body, done: func() { c.now.Add(-1) }} // in flight until its body is closed
	return resp, nil
}

type doneBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *doneBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// TestConcurrencyIsAHardBound: however a run retries (here a prompt that
// crashes the server, retried alone among suspects while the workers go
// on), no more than --concurrency generation requests are ever in flight.
// Not parallel: the server's restarts run on a real clock, and under a
// loaded CI a prompt beside the crashing one can be caught in a crash.
func TestConcurrencyIsAHardBound(t *testing.T) {
	addr := freeAddr(t)
	restarting(t, sim.Config{Seed: 22, CrashOn: "BOOM", DecodeTokensPerSec: 300, Slots: 64}, addr, nil)
	root, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "B")
	os.MkdirAll(dir, 0o755)
	var b strings.Builder
	for i := range 160 {
		if i == 3 || i == 60 {
			fmt.Fprintf(&b, `{"id":"bomb-%d","text":"BOOM"}`+"\n", i)
			continue
		}
		fmt.Fprintf(&b, `{"id":"p-%d","text":"write about %d","max_new_tokens":40}`+"\n", i, i)
	}
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(b.String()), 0o644)
	ct := &countingTransport{rt: client.NewTransport(16)}
	const limit = 6
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	sum, log, err := runGen(t, ctx, filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{"http://" + addr}, Out: out, Concurrency: limit,
		HTTP: &http.Client{Transport: ct}, Backoff: client.Backoff{Base: time.Millisecond, Max: 5 * time.Millisecond}}, root)
	if err != nil || sum.Responses != 158 || sum.Errors != 2 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	if most := ct.most.Load(); most > limit {
		t.Errorf("%d generation requests in flight at once; --concurrency is %d", most, limit)
	}
}
