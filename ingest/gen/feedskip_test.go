package gen

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"gendex/ingest/gen/sim"
	"gendex/store"
)

// resumedSet writes root/R/prompts.jsonl, n prompts of ~1 KB (so the file
// is over skipMin), and a raw_responses.jsonl of the simulator's answers
// to the first answered of them but the holes; it returns the prompts
// file's bytes.
func resumedSet(t *testing.T, root string, n, answered int, holes map[int]bool) []byte {
	t.Helper()
	dir := filepath.Join(root, "R")
	os.MkdirAll(dir, 0o755)
	var p, raw bytes.Buffer
	pad := strings.Repeat("x", 1000)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&p, `{"id":"R-%05d","text":"write about %d %s"}`+"\n", i, i, pad)
		if i <= answered && !holes[i] {
			fmt.Fprintf(&raw, `{"id":"R-%05d","text":"ok","completion_tokens":2,"finish_reason":"stop","finished_at":"2026-12-01T10:00:00Z","model":"sim-model","simulated":true}`+"\n", i)
		}
	}
	if p.Len() < skipMin {
		t.Fatalf("prompts file of %d bytes: under skipMin, nothing is skipped", p.Len())
	}
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), p.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), raw.Bytes(), 0o644)
	return p.Bytes()
}

// TestSkipToAnswersEnd: in a large prompts file whose first lines are
// answered, the feeder starts within skipSlack before the first line to
// send, and knows that line's number; with nothing answered it starts at
// the first line.
func TestSkipToAnswersEnd(t *testing.T) {
	t.Parallel()
	for _, answered := range []int{4000, 0} {
		root := t.TempDir()
		prompts := resumedSet(t, root, 5000, answered, nil)
		dbPath := filepath.Join(t.TempDir(), "g.db")
		var log syncBuffer
		_, url := simServer(t, sim.Config{Seed: 1})
		sets, err := FindDatasets([]string{root}, "")
		if err != nil {
			t.Fatal(err)
		}
		db := openDB(t, dbPath)
		cfg := Config{Servers: []string{url}, Log: &log}
		cfg.defaults()
		r := newRun(db, cfg)
		var opened []*dsRun
		if _, err := r.prepare(context.Background(), sets, &opened); err != nil {
			t.Fatal(err)
		}
		ds := r.sets[0]
		path := ds.Prompts[0]
		var state store.FileState
		db.View(func(v *store.View) (err error) { state, _, err = v.File(path); return err })
		f, _ := os.Open(path)
		from, line, err := r.feed.skipTo(ds, f, state, nil)
		f.Close()
		for _, d := range opened {
			d.close()
		}
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		firstToSend := int64(bytes.Index(prompts, fmt.Appendf(nil, `{"id":"R-%05d"`, answered+1)))
		switch {
		case answered == 0 && (from != 0 || line != 1):
			t.Errorf("nothing answered: starts at %d (line %d); want 0 (line 1)", from, line)
		case answered > 0 && (from > firstToSend || from < firstToSend-skipSlack):
			t.Errorf("starts at %d; want within %d bytes before %d, the first line to send", from, skipSlack, firstToSend)
		}
		if want := int64(bytes.Count(prompts[:from], []byte("\n"))) + 1; line != want {
			t.Errorf("answered %d: starts at %d, said line %d; it is line %d", answered, from, line, want)
		}
	}
}

// TestResumeSweepsSkippedLines: the prompts left unanswered among the
// lines the feeder skips (a crash's requests in flight) are sent too, by
// the sweeper: every prompt is answered exactly once, and only the
// missing ones are asked.
func TestResumeSweepsSkippedLines(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// 4100 prompts (just over skipMin), 100 of them new: the feeder starts
	// near line 4000, and the holes before it are the sweeper's.
	const n, answered = 4100, 4000
	holes := map[int]bool{1: true, 1700: true, 3999: true}
	resumedSet(t, root, n, answered, holes)
	s := sim.New(sim.Config{Seed: 1})
	var asked atomic.Int64
	h := s.Handler()
	hs := newCountingServer(t, h, &asked)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sum, log, err := runGen(t, context.Background(), dbPath, Config{Servers: []string{hs}, Concurrency: 8}, root)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if want := int64(n - answered + len(holes)); sum.Responses != want || asked.Load() != want {
		t.Errorf("%d answers, %d requests; want %d of each\n%s", sum.Responses, asked.Load(), want, log)
	}
	lines := outputLines(t, filepath.Join(root, "R", "raw_responses.jsonl"))
	for i := 1; i <= n; i++ {
		if got := len(lines[fmt.Sprintf("R-%05d", i)]); got != 1 {
			t.Errorf("R-%05d: %d answers; want 1", i, got)
		}
	}
}

// newCountingServer serves h and counts in asked the requests that carry
// one of resumedSet's prompts (not the routes' probes); it returns its URL.
func newCountingServer(t *testing.T, h http.Handler, asked *atomic.Int64) string {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("write about")) {
			asked.Add(1)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}
