package gen

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestWaitSaysNothingListens: a server that has refused connections for
// long (refusedLong; a minute in gen) is said to have nothing listening
// on its port, to be checked, while gen goes on waiting for it, not only
// "model loading".
func TestWaitSaysNothingListens(t *testing.T) {
	defer func(d time.Duration) { refusedLong = d }(refusedLong)
	refusedLong = 300 * time.Millisecond
	addr := freeAddr(t)
	root := t.TempDir()
	writePrompts(t, root, "B", "ids", 3)
	_, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"),
		Config{Servers: []string{"http://" + addr}, WaitReady: 1500 * time.Millisecond, LogEvery: 200 * time.Millisecond}, root)
	if err == nil || !strings.Contains(err.Error(), "no server became ready") {
		t.Fatalf("gen against a port nothing listens on: %v\n%s", err, log)
	}
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	if !strings.Contains(log, "connection refused (model loading)") || !strings.Contains(log, "nothing listens on port "+port+" (connection refused): check --server") {
		t.Errorf("the wait says first that the model loads, then that nothing listens on port %s:\n%s", port, log)
	}
}
