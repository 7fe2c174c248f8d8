package gen

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// TestGenIsolatesAtASecondDown: a prompt that crashes the server on
// arrival, among 40 that do not. The prompts in flight at its first crash
// are sent again with the others; those in flight at its second are
// isolated, which the progress line, the log, the summary and an
// "isolated" event say, with the bomb's id and why; the bomb brings the
// server down --max-crashes (3) times, no more, and is the only error.
func TestGenIsolatesAtASecondDown(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	starts := restarting(t, sim.Config{Seed: 31, CrashOn: "BOOM", DecodeTokensPerSec: 200}, addr, nil)
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "K", "text", 40)
	pf := filepath.Join(root, "K", "prompts.jsonl")
	b, _ := os.ReadFile(pf)
	lines := strings.SplitAfter(string(b), "\n")
	os.WriteFile(pf, []byte(strings.Join(lines[:5], "")+`{"id":"bomb","text":"BOOM"}`+"\n"+strings.Join(lines[5:], "")), 0o644)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	sum, log, err := runGen(t, ctx, dbPath, Config{Servers: []string{"http://" + addr}, Out: out, Concurrency: 8, LogEvery: 20 * time.Millisecond,
		Backoff: client.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}}, root)
	if err != nil || sum.Responses != 40 || sum.Errors != 1 {
		t.Fatalf("%+v %v (%d server starts)\n%s", sum, err, starts.Load(), log)
	}
	if errs := outputLines(t, filepath.Join(out, "K", "errors.jsonl")); len(errs["bomb"]) != 1 {
		t.Errorf("errors: %v; want the bomb's alone", errs)
	}
	for _, want := range []string{
		"gen: prompt bomb (K) was in flight at 2 downs, the last of http://" + addr + ": isolated",
		"isolated (in flight at 2 downs: sent one at a time)", // the progress line
		"isolated: in flight at 2 downs of a server",          // the summary
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log does not say %q:\n%s", want, log)
		}
	}
	var downs int
	var isolated []string
	for _, e := range events(t, dbPath) {
		switch e.Name {
		case EventDown:
			downs++
		case EventIsolated:
			isolated = append(isolated, e.Detail)
		}
	}
	// The bomb's --max-crashes, no more; a fourth when the server was back
	// before the bomb's own /health check, so that one did not count.
	if downs < 3 || downs > 4 {
		t.Errorf("%d downs; want 3: the bomb's --max-crashes", downs)
	}
	joined := strings.Join(isolated, "\n")
	if !strings.Contains(joined, "isolated: in flight at 2 downs, the last of this server, so each may be what brings it down") || !strings.Contains(joined, "bomb") {
		t.Errorf("isolated events %q; want one that names the bomb and says why", isolated)
	}
}

// TestGenIsolatesNamesSamples: with --samples 2, the log and the isolated
// event name each isolated answer by its prompt's id and sample (they
// said "prompt bomb" for each sample alike).
func TestGenIsolatesNamesSamples(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	starts := restarting(t, sim.Config{Seed: 31, CrashOn: "BOOM", DecodeTokensPerSec: 200}, addr, nil)
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "K", "text", 6)
	pf := filepath.Join(root, "K", "prompts.jsonl")
	f, _ := os.OpenFile(pf, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"id":"bomb","text":"BOOM"}` + "\n")
	f.Close()
	dbPath := filepath.Join(t.TempDir(), "g.db")
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	sum, log, err := runGen(t, ctx, dbPath, Config{Servers: []string{"http://" + addr}, Out: out, Concurrency: 8, Samples: 2,
		Backoff: client.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}}, root)
	// Two bombs (the prompt's samples) may take an innocent prompt in
	// flight beside them to --max-crashes too: every unit has an outcome.
	if err != nil || sum.Responses+sum.Errors != 14 || sum.Errors < 2 {
		t.Fatalf("%+v %v (%d server starts)\n%s", sum, err, starts.Load(), log)
	}
	if !strings.Contains(log, "gen: prompt bomb sample 1 (K) was in flight at 2 downs") {
		t.Errorf("the log does not name the bomb's sample 1:\n%s", log)
	}
	var isolated []string
	for _, e := range events(t, dbPath) {
		if e.Name == EventIsolated {
			isolated = append(isolated, e.Detail)
		}
	}
	if joined := strings.Join(isolated, "\n"); !strings.Contains(joined, "bomb sample 1") {
		t.Errorf("isolated events %q; want one that names the bomb's sample 1", isolated)
	}
}
