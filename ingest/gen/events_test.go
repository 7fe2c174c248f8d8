package gen

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store"
)

// events reads the events stored in dbPath.
func events(t *testing.T, dbPath string) []store.Event {
	t.Helper()
	db, err := store.Open(dbPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var out []store.Event
	db.View(func(v *store.View) error {
		return v.Events(0, func(e *store.Event) error { out = append(out, *e); return nil })
	})
	return out
}

func eventNames(es []store.Event) string {
	var names []string
	for _, e := range es {
		names = append(names, e.Name)
	}
	return strings.Join(names, ",")
}

// TestFinalErrorsAreOneEventPerBurst: 40 prompts that all fail for good on
// one server within the burst window are one event with their count and
// the last message, not 40.
func TestFinalErrorsAreOneEventPerBurst(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 3, ErrorRate: 1})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "E", "ids", 40)
	dbPath := filepath.Join(out, "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, MaxAttempts: 1,
		Backoff: client.Backoff{Base: time.Millisecond, Max: time.Millisecond}}, root)
	if err != nil || sum.Errors != 40 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	es := events(t, dbPath)
	if got := eventNames(es); got != "start,up,errors,stop" {
		t.Fatalf("events %s: %+v", got, es)
	}
	e := es[2]
	if e.Server != client.RedactURL(url) || !strings.HasPrefix(e.Detail, "40 prompts failed for good within 10s; last: gave up after 1 attempts") {
		t.Errorf("errors event %+v", e)
	}
	if !strings.HasPrefix(es[3].Detail, "finished: 0 answers, 40 errors") {
		t.Errorf("stop %+v", es[3])
	}
}

// TestFinalErrorsOfSamplesCountAnswers: with --samples 3, a burst of
// final errors counts the answers (a prompt's samples) that failed, and
// says so: 10 prompts, 30 answers, not "30 prompts".
func TestFinalErrorsOfSamplesCountAnswers(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 3, ErrorRate: 1})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "E", "ids", 10)
	dbPath := filepath.Join(out, "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, MaxAttempts: 1, Samples: 3,
		Backoff: client.Backoff{Base: time.Millisecond, Max: time.Millisecond}}, root)
	if err != nil || sum.Errors != 30 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	es := events(t, dbPath)
	if got := eventNames(es); got != "start,up,errors,stop" {
		t.Fatalf("events %s: %+v", got, es)
	}
	if d := es[2].Detail; !strings.HasPrefix(d, "30 answers (of 3 samples per prompt) failed for good within 10s; last: ") {
		t.Errorf("errors event %q", d)
	}
}

// TestInterruptEvent: Ctrl-C is recorded when it comes, the requests
// given up past --grace (if any outlast it) are one given-up event, and
// the stop says the run was interrupted.
func TestInterruptEvent(t *testing.T) {
	t.Parallel()
	s, url := simServer(t, sim.Config{Seed: 7, Slots: 4, DecodeTokensPerSec: 1000})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "I", "ids", 80)
	dbPath := filepath.Join(out, "g.db")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for s.Stats().Completed < 10 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	sum, log, err := runGen(t, ctx, dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 4, Grace: 50 * time.Millisecond}, root)
	if err == nil {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	es := events(t, dbPath)
	got := eventNames(es)
	if got != "start,up,interrupt,stop" && got != "start,up,interrupt,given-up,stop" {
		t.Fatalf("events %s: %+v", got, es)
	}
	if e := es[3]; e.Name == EventGivenUp && !strings.Contains(e.Detail, " as the run stopped; aborted on the server") {
		t.Errorf("given-up %+v", e)
	}
	if stop := es[len(es)-1]; !strings.HasPrefix(stop.Detail, "interrupted: ") {
		t.Errorf("stop %+v", stop)
	}
}
