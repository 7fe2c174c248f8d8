package gen

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"gendex/ingest/sim"
)

// buildGendex builds the gendex binary for tests that run it as a process.
func buildGendex(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "gendex")
	cmd := exec.Command("go", "build", "-o", bin, "gendex")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestGenSurvivesSIGKILL kills a running `gendex gen` with SIGKILL at random
// moments, 25 times, resuming each time; then lets it finish. Every prompt
// must have exactly one answer, the index must agree with the files, and
// every answer must be the answer to its own prompt.
func TestGenSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real process")
	}
	bin := buildGendex(t)
	_, url := simServer(t, sim.Config{Seed: 11, Slots: 32, DecodeTokensPerSec: 400})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "K1", "ids", 200)
	writePrompts(t, root, "K2", "ids", 200)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", dbPath, "gen", "--server", url, "--out", out, "--concurrency", "16", root}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	kills := 0
	for i := 0; i < 25; i++ {
		cmd := exec.Command(bin, args...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-time.After(time.Duration(5+rng.IntN(400)) * time.Millisecond):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
		case err := <-done:
			if err != nil {
				t.Fatalf("run %d ended on its own with %v", i, err)
			}
		}
	}
	cmd := exec.Command(bin, args...)
	if outp, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, outp)
	}
	if kills < 20 {
		t.Errorf("only %d of the runs were killed; the test wants at least 20", kills)
	}
	_, clean := simServer(t, sim.Config{Seed: 11})
	for _, name := range []string{"K1", "K2"} {
		checkExactlyOnce(t, dbPath, root, name, out, clean, 128)
	}
	if _, err := os.Stat(filepath.Join(out, "K1", "errors.jsonl")); !os.IsNotExist(err) {
		t.Errorf("an errors.jsonl exists though no prompt failed: %v", err)
	}
}
