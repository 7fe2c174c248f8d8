package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGenSaysWhatCtrlCDoes: the first Ctrl-C says at once what happens,
// before the grace period ends: how long gen waits for how many answers,
// that a second Ctrl-C quits now and that the next run catches up.
func TestGenSaysWhatCtrlCDoes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gen")
	}
	bin := gendexBinary(t)
	t.Parallel()
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts", "slow")
	os.MkdirAll(prompts, 0o755)
	var b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&b, `{"id":"p%03d","text":"say something long"}`+"\n", i)
	}
	writePrompts(t, prompts, b.String())
	listen := freeAddr(t)
	gen := startGendex(t, bin, "", "--db", filepath.Join(dir, "g.db"), "gen", "--server", "sim", "--sim-decode-tps", "2",
		"--concurrency", "8", "--grace", "20s", "--max-new-tokens", "100", "--listen", listen,
		"--out", filepath.Join(dir, "out"), filepath.Join(dir, "prompts"))
	waitFor(t, 60*time.Second, "gen's 8 requests in flight (gendex_in_flight)", func() bool {
		n, ok := inFlightMetric("http://" + listen + "/metrics")
		return ok && n == 8
	})
	gen.Interrupt()
	want := "gen: stopping: waiting up to 20s for 8 answers in flight; Ctrl-C again quits now, the next run catches up"
	waitFor(t, 3*time.Second, "the stopping line after one Ctrl-C:\n"+gen.Stderr(), func() bool { return strings.Contains(gen.Stderr(), want) })
	gen.Interrupt()
	select {
	case <-gen.Done():
	case <-time.After(5 * time.Second):
		t.Fatalf("a second Ctrl-C did not quit at once:\n%s", gen.Stderr())
	}
	if c := gen.Wait(); c != 130 {
		t.Errorf("exit status %d after two Ctrl-C, want 130:\n%s", c, gen.Stderr())
	}
}
