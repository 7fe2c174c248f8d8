package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
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
		code, out := runGendexCombined(t, bin, "--db", filepath.Join(t.TempDir(), "task.db"), "gen", "--server", url, "--max-new-tokens", "16",
			"--shard", fmt.Sprintf("%d/2", i), root)
		if code != 0 {
			t.Fatalf("shard %d/2: exit %d\n%s", i, code, out)
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
	if n := strings.Count(w.Stderr(), rawFile+": the file is gone"); n != 1 {
		t.Errorf("the follow said %d times that %s is gone, want once:\n%s", n, rawFile, w.Stderr())
	}
	if raw() != want {
		t.Errorf("answers %v after the move, want %v", raw(), want)
	}
}

// ingest --follow picks up appended lines, completed lines and new
// datasets until it is interrupted.
func TestIngestFollow(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the follow loop; skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "g.db")
	data := filepath.Join(dir, "data")
	one := filepath.Join(data, "one", "raw_responses.jsonl")
	two := filepath.Join(data, "two", "raw_responses.jsonl")
	os.MkdirAll(filepath.Dir(one), 0o755)
	os.WriteFile(one, []byte(`{"id":"x1","completion_tokens":1}`+"\n"), 0o644)
	appendTo := func(path, s string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Error(err)
			return
		}
		f.WriteString(s)
		f.Close()
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	env := testEnv(nil)
	env.Stderr = &stderr
	done := make(chan error, 1)
	go func() { done <- run(ctx, env, []string{"--db", db, "ingest", "--follow", data}) }()

	// Each step waits until the running ingest, asked through its socket,
	// has indexed what the step before wrote.
	tokens := func() string {
		r := gendex(t, testEnv(nil), "--db", db, "query", "tokens", "--format", "csv", "--no-header")
		return r.stdout
	}
	waitFor(t, 10*time.Second, "x1 indexed", func() bool { return strings.HasPrefix(tokens(), "one,1,") })
	appendTo(one, `{"id":"x2","completion_tokens":2}`+"\n"+`{"id":"x3","compl`) // x3 is still being written
	os.MkdirAll(filepath.Dir(two), 0o755)
	appendTo(two, `{"id":"y1","completion_tokens":7}`+"\n")
	waitFor(t, 10*time.Second, "x2 and the new dataset indexed", func() bool {
		got := tokens()
		return strings.HasPrefix(got, "one,2,,3,") && strings.Contains(got, "\ntwo,1,,7,")
	})
	appendTo(one, `etion_tokens":3}`+"\n")
	waitFor(t, 10*time.Second, "x3 indexed once completed", func() bool { return strings.HasPrefix(tokens(), "one,3,,6,") })
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ingest --follow did not stop after the interrupt")
	}
	if code := exitCode(&stderr, err); code != 0 {
		t.Fatalf("ingest --follow ended with exit %d: %v\n%s", code, err, stderr.String())
	}
	got := mustGendex(t, testEnv(nil), "--db", db, "query", "tokens", "--format", "csv", "--no-header").stdout
	if !strings.HasPrefix(got, "one,3,,6,,2.0,") || !strings.Contains(got, "\ntwo,1,,7,,7.0,") { // reasoning unknown
		t.Errorf("after --follow, tokens:\n%s\nstderr:\n%s", got, stderr.String())
	}
}
