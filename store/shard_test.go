package store

import (
	"strings"
	"testing"
)

// TestParseShard: I/N within 0 <= I < N is a shard; an index at or past
// N (what a 1-based Slurm range or a step gives) says which indexes there
// are and how to submit them.
func TestParseShard(t *testing.T) {
	if s, err := ParseShard("3/16"); err != nil || s != (Shard{I: 3, N: 16}) {
		t.Errorf("ParseShard(3/16) = %v, %v", s, err)
	}
	_, err := ParseShard("4/4")
	if err == nil || !strings.Contains(err.Error(), "0 to 3") || !strings.Contains(err.Error(), "--array=0-3") {
		t.Errorf("ParseShard(4/4): %v; want it to name 0 to 3 and --array=0-3", err)
	}
	for _, bad := range []string{"-1/4", "1/0", "x/4", "1", "1/10000"} {
		if _, err := ParseShard(bad); err == nil {
			t.Errorf("ParseShard(%q) = nil error", bad)
		}
	}
}
