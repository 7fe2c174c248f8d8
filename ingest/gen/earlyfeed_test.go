package gen

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/sim"
	"gendex/store"
)

// TestNothingToDoWithoutServer: a run with nothing to do ends, with no
// server up, and says so: a plain resume (the index's counters tell), and
// a --redo truncated deciding as the feeder reads (RedoUpfront 1) whose
// cut answers are all cut at its limit: its feeder reads every prompt
// while the server is awaited, finds none to ask, and the run ends,
// "nothing to do", its row finished. With a server up the redo says it
// the same way. Before, the redo waited for a server that never came.
func TestNothingToDoWithoutServer(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "N")
	os.MkdirAll(dir, 0o755)
	var p, raw bytes.Buffer
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&p, `{"id":"N-%02d","text":"write about %d"}`+"\n", i, i)
		finish, tokens := "stop", 5
		if i%2 == 1 {
			finish, tokens = "length", 64 // cut at this redo's limit: left
		}
		fmt.Fprintf(&raw, `{"id":"N-%02d","text":"ok","completion_tokens":%d,"finish_reason":%q,"finished_at":"2026-12-01T10:00:00Z","model":"sim-model"}`+"\n", i, tokens, finish)
	}
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), p.Bytes(), 0o644)
	os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), raw.Bytes(), 0o644)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	_, live := simServer(t, sim.Config{Seed: 1, Unmarked: true}) // a real server, as far as gen can tell
	sets, err := FindDatasets([]string{root}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, server string
		redo         *Redo
	}{
		{"resume, no server", dead, nil},
		{"redo as it goes, no server", dead, &Redo{Truncated: true}},
		{"redo as it goes, a server up", live, &Redo{Truncated: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openDB(t, filepath.Join(t.TempDir(), "g.db"))
			defer db.Close()
			var log syncBuffer
			cfg := Config{Servers: []string{c.server}, Concurrency: 4, Sampling: maxNew(64), Redo: c.redo, RedoUpfront: 1, Log: &log, LogEvery: time.Hour}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error, 1)
			go func() { _, err := Run(ctx, db, cfg, sets); done <- err }()
			select {
			case err = <-done:
			case <-time.After(time.Minute): // patience, not a measure
				cancel()
				<-done
				t.Fatalf("still waiting for a server after a minute, with nothing to do\n%s", log.String())
			}
			out := log.String()
			if err != nil || !strings.Contains(out, "nothing to do") {
				t.Errorf("%v; want nothing to do\n%s", err, out)
			}
			if c.redo != nil && !strings.Contains(out, "every prompt read: none of the answers cut at the token limit is asked again: 10 cut at this run's --max-new-tokens 64") {
				t.Errorf("the redo does not say why none is asked again\n%s", out)
			}
			if c.redo == nil {
				return // a plain resume with nothing to do records no run
			}
			var last store.Run
			db.View(func(v *store.View) error { return v.Runs(func(r *store.Run) error { last = *r; return nil }) })
			if last.State != store.RunFinished || last.ToGo == nil || *last.ToGo != 0 {
				t.Errorf("the redo's run: %+v; want finished, 0 to go", last)
			}
		})
	}
}
