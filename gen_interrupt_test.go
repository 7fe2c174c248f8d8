package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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
	var stderr syncBuffer
	listen := freeAddr(t)
	gen := exec.Command(bin, "--db", filepath.Join(dir, "g.db"), "gen", "--server", "sim", "--sim-decode-tps", "2",
		"--concurrency", "8", "--grace", "20s", "--max-new-tokens", "100", "--listen", listen,
		"--out", filepath.Join(dir, "out"), filepath.Join(dir, "prompts"))
	gen.Stderr = &stderr
	if err := gen.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { gen.Process.Kill(); gen.Wait() }()
	waitFor(t, 60*time.Second, "gen's 8 requests in flight (gendex_in_flight)", func() bool {
		n, ok := inFlightMetric("http://" + listen + "/metrics")
		return ok && n == 8
	})
	gen.Process.Signal(os.Interrupt)
	want := "gen: stopping: waiting up to 20s for 8 answers in flight; Ctrl-C again quits now, the next run catches up"
	waitFor(t, 3*time.Second, "the stopping line after one Ctrl-C:\n"+stderr.String(), func() bool { return strings.Contains(stderr.String(), want) })
	gen.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- gen.Wait() }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("a second Ctrl-C did not quit at once:\n%s", stderr.String())
	}
	if c := gen.ProcessState.ExitCode(); c != 130 {
		t.Errorf("exit status %d after two Ctrl-C, want 130:\n%s", c, stderr.String())
	}
}
