package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// TestGenStopsWhenTheServerStaysDown: the server dies mid-run and nothing
// restarts it (a cluster task's SGLang). gen stops once it has been down
// for --down-limit, with exit 1 and a message that says the task can be
// requeued; no prompt is marked failed, every answer written is indexed,
// and the same command, once a server answers again, finishes the run
// exactly once. Without the bound gen would wait on until the job's time
// limit.
func TestGenStopsWhenTheServerStaysDown(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and kills real processes")
	}
	bin := gendexBinary(t)
	addr := freeAddr(t)
	startSim := func() *gendexProc {
		return startSimAt(t, bin, addr, "--seed", "5", "--decode-tps", "2000", "--slots", "4")
	}
	server := startSim()
	root := t.TempDir()
	const n = 100 // the kill comes after 5 answers, at 60 answers a second
	writeIDPrompts(t, filepath.Join(root, "D"), "D", n)
	db := filepath.Join(t.TempDir(), "g.db")
	raw := filepath.Join(root, "D", "raw_responses.jsonl")
	args := []string{"--db", db, "gen", "--server", "http://" + addr, "--concurrency", "4", "--down-limit", "2s", root}
	gen := startGendex(t, bin, "", args...)
	waitFor(t, 30*time.Second, "the first answers", func() bool {
		b, _ := os.ReadFile(raw)
		return bytes.Count(b, []byte("\n")) >= 5
	})
	server.Kill()
	killed := time.Now()
	select {
	case <-gen.Done():
	case <-time.After(2 * time.Minute):
		gen.Kill()
		t.Fatalf("gen still waits 2 minutes after its only server died, with --down-limit 2s:\n%s", gen.Stderr())
	}
	t.Logf("gen stopped %s after the kill", time.Since(killed).Round(time.Millisecond))
	if code := gen.Wait(); code != 1 {
		t.Fatalf("gen after its server died: exit %d; want exit 1\n%s", code, gen.Stderr())
	}
	for _, want := range []string{"every server has been down for", "--down-limit 2s", "nothing is lost", "requeue the task"} {
		if !strings.Contains(gen.Stderr(), want) {
			t.Errorf("gen's message does not say %q:\n%s", want, gen.Stderr())
		}
	}
	if _, err := os.Stat(filepath.Join(root, "D", "errors.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a prompt was marked failed when the server died (errors.jsonl: %v)", err)
	}
	b, _ := os.ReadFile(raw)
	written := bytes.Count(b, []byte("\n"))
	if written >= n {
		t.Fatalf("every prompt was answered before the server died (%d): the test needs a slower server", written)
	}
	code, out, stderr := runGendex(t, bin, "", "--db", db, "query", "progress", "--format", "csv", "--no-header")
	if code != 0 || !strings.HasPrefix(out, fmt.Sprintf("D,%d,%d,", n, written)) {
		t.Errorf("query progress after the stop: %s (exit %d: %s); want D with %d prompts and the %d answers written", out, code, stderr, n, written)
	}
	startSim()
	mustRunGendex(t, bin, args...)
	checkAnsweredOnce(t, db, filepath.Join(root, "D", "prompts.jsonl"), raw, "D", client.New(simURL(t, sim.Config{Seed: 5}), client.Options{}))
}
