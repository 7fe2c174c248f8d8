package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFollowForgetsVanishedFiles: a login node's ingest --follow over a
// sharded run's folder forgets a shard's files once they are moved away
// (as gendex advises before a re-shard), says so once with the path and
// count, and its progress is what the disk holds. Before, it kept the
// vanished files' records for as long as it ran (75% answered where the
// disk held 50%).
func TestFollowForgetsVanishedFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	root := t.TempDir()
	writeShardPrompts(t, root, 40)
	url := startSimProcess(t, bin, "--unmarked")
	for i := range 2 {
		out, err := exec.Command(bin, "--db", filepath.Join(t.TempDir(), "task.db"), "gen", "--server", url, "--max-new-tokens", "16",
			"--shard", fmt.Sprintf("%d/2", i), root).CombinedOutput()
		if err != nil {
			t.Fatalf("shard %d/2: %v\n%s", i, err, out)
		}
	}
	db := filepath.Join(t.TempDir(), "login.db")
	w := startWriter(t, db, nil, "ingest", "--follow", root)
	raw := func() (n float64) {
		for _, r := range mustQueryJSON[map[string]any](t, bin, db, "progress") {
			n += r["raw"].(float64)
		}
		return n
	}
	waitFor(t, 30*time.Second, "the follow to index both shards", func() bool { return raw() == 120 })
	moved := t.TempDir()
	gone, _ := filepath.Glob(filepath.Join(root, "T", "*.shard-0001-of-0002.jsonl"))
	if len(gone) == 0 {
		t.Fatal("no shard 1 file in T")
	}
	for _, f := range gone {
		if err := os.Rename(f, filepath.Join(moved, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	want := 120.0
	for _, f := range gone {
		if strings.HasPrefix(filepath.Base(f), "raw_responses") {
			b, _ := os.ReadFile(filepath.Join(moved, filepath.Base(f)))
			want -= float64(strings.Count(string(b), "\n"))
		}
	}
	waitFor(t, 30*time.Second, "the follow to forget the moved files", func() bool { return raw() == want })
	time.Sleep(1500 * time.Millisecond) // a discovery or two later: still said once
	rawFile := filepath.Join(root, "T", "raw_responses.shard-0001-of-0002.jsonl")
	if n := strings.Count(w.stderr.String(), rawFile+": the file is gone"); n != 1 {
		t.Errorf("the follow said %d times that %s is gone, want once:\n%s", n, rawFile, w.stderr.String())
	}
	if raw() != want {
		t.Errorf("answers %v after the move, want %v", raw(), want)
	}
}
