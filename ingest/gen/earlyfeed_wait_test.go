package gen

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/sim"
)

// TestRedoWithWorkWaitsForServer: a --redo truncated deciding as the
// feeder reads (RedoUpfront 1), started with no server up, whose feeder
// finds answers cut below the run's limit, does not end "nothing to do"
// once every prompt is read: it waits for a server, and once one is up
// asks each of them once. The feeder starting early must not take "read
// every prompt" for "found nothing".
func TestRedoWithWorkWaitsForServer(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "R")
	os.MkdirAll(dir, 0o755)
	var p, raw bytes.Buffer
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&p, `{"id":"R-%02d","text":"write about %d"}`+"\n", i, i)
		finish, tokens := "stop", 5
		if i%2 == 1 {
			finish, tokens = "length", 16 // cut below this redo's limit: asked again
		}
		fmt.Fprintf(&raw, `{"id":"R-%02d","text":"ok","completion_tokens":%d,"finish_reason":%q,"finished_at":"2026-12-01T10:00:00Z","model":"sim-model"}`+"\n", i, tokens, finish)
	}
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), p.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), raw.Bytes(), 0o644)
	sets, err := FindDatasets([]string{root}, "")
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, filepath.Join(t.TempDir(), "g.db"))
	defer db.Close()
	addr := freeAddr(t) // nothing listens there yet
	var log syncBuffer
	// Concurrency above the 10 to ask: the jobs channel holds them all, so
	// the feeder reads every prompt with no worker taking any.
	cfg := Config{Servers: []string{"http://" + addr}, Concurrency: 16, Sampling: maxNew(64), Redo: &Redo{Truncated: true},
		RedoUpfront: 1, Log: &log, LogEvery: time.Hour}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type ended struct {
		sum *Summary
		err error
	}
	done := make(chan ended, 1)
	go func() { sum, err := Run(ctx, db, cfg, sets); done <- ended{sum, err} }()

	const want = "every prompt read: 10 of the answers cut at the token limit are asked again"
	for deadline := time.Now().Add(time.Minute); !strings.Contains(log.String(), want); time.Sleep(time.Millisecond) {
		select {
		case e := <-done:
			t.Fatalf("the redo ended before its feeder read every prompt: %v\n%s", e.err, log.String())
		default:
		}
		if time.Now().After(deadline) { // patience, not a measure
			t.Fatalf("the feeder never read every prompt\n%s", log.String())
		}
	}
	srv := sim.New(sim.Config{Seed: 3, Unmarked: true})
	go srv.ListenAndServe(ctx, addr)
	var e ended
	select {
	case e = <-done:
	case <-time.After(2 * time.Minute): // patience, not a measure
		cancel()
		<-done
		t.Fatalf("the redo never ended once its server was up\n%s", log.String())
	}
	if e.err != nil || e.sum == nil || e.sum.Responses != 10 || strings.Contains(log.String(), "nothing to do") {
		t.Fatalf("%+v %v; want the 10 answers cut at 16 asked once each, once the server is up\n%s", e.sum, e.err, log.String())
	}
}
