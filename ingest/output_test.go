package ingest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestOpenOutputWaitsForAMomentaryLock: a lock released within a moment
// (a forked child that still holds a closed file until it execs) is
// waited for; one held on is refused, naming the file.
func TestOpenOutputWaitsForAMomentaryLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tokenized.jsonl")
	hold := func() *os.File {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		return f
	}
	momentary := hold()
	time.AfterFunc(100*time.Millisecond, func() { momentary.Close() })
	f, err := OpenOutput(path)
	if err != nil {
		t.Fatalf("a lock released after 100 ms: %v", err)
	}
	f.Close()

	other := hold()
	defer other.Close()
	if f, err := OpenOutput(path); err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "being written by another") {
		if f != nil {
			f.Close()
		}
		t.Errorf("a lock held on: %v", err)
	}
}
