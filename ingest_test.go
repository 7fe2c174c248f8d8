// Tests of `gendex ingest` reading a folder or file into the index: invalid
// lines named, a file given alone, reading twice, a torn last line, an
// interrupted ingest.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestIngestInvalidLines(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "g.db")
	r := gendex(t, testEnv(nil), "--db", db, "ingest", brokenRaw)
	if r.code != 1 || !errors.Is(r.err, errSkipped) {
		t.Fatalf("ingest of a file with invalid lines: exit %d (%v), want 1\n%s", r.code, r.err, r)
	}
	abs, _ := filepath.Abs(brokenRaw)
	for _, line := range []string{":2: ", ":3: ", ":4: "} { // torn JSON, not JSON, no id
		if !strings.Contains(r.stderr, abs+line) {
			t.Errorf("stderr does not point at %s%s\n%s", abs, line, r)
		}
	}
	for _, line := range []string{":1: ", ":5: "} {
		if strings.Contains(r.stderr, abs+line) {
			t.Errorf("stderr blames the good line %s%s\n%s", abs, line, r)
		}
	}
	if !strings.Contains(r.stderr, "3 lines were skipped") {
		t.Errorf("stderr does not count the skipped lines\n%s", r)
	}
	// The rest is indexed: r1 and r3 (dataset "bad", from the folder name).
	q := mustGendex(t, testEnv(nil), "--db", db, "query", "datasets", "--format", "csv", "--no-header")
	if q.stdout != "bad,1,0,2,0,0,0,0\n" {
		t.Errorf("datasets after a partial ingest = %q, want bad with 2 responses", q.stdout)
	}
	// progress and tokens say that 3 lines were left out, in every format.
	tty := testEnv(nil)
	tty.StdoutTTY = true
	golden(t, "tokens-skipped.table.golden", mustGendex(t, tty, "--db", db, "query", "tokens").stdout)
	if q := mustGendex(t, testEnv(nil), "--db", db, "query", "progress", "--no-header"); q.stdout != "bad\t\t2\t0\t0\t\t0\t2\t\t1\t0\t0\t0\t\t\t3\t\n" { // answered, failed and no_prompt unknown: no prompts
		t.Errorf("progress TSV after a partial ingest = %q, want 3 skipped", q.stdout)
	}
	q = mustGendex(t, testEnv(nil), "--db", db, "query", "tokens", "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(q.stdout), &rows); err != nil || len(rows) != 1 || rows[0]["completion_tokens"] != 40.0 {
		t.Errorf("tokens after a partial ingest = %s (%v), want 40 completion tokens (10 + 30)", q.stdout, err)
	}
}

func TestIngestSingleFileWithDatasetAndStage(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "g.db")
	file := filepath.Join(t.TempDir(), "some_output.jsonl")
	if err := os.WriteFile(file, []byte(`{"id":"x1","completion_tokens":3}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The name says no stage: it must be given.
	if r := gendex(t, testEnv(nil), "--db", db, "ingest", file); r.code != 1 || !strings.Contains(r.stderr, "--stage") {
		t.Errorf("ingest of an unnamed file without --stage: want exit 1 and a hint about --stage\n%s", r)
	}
	mustGendex(t, testEnv(nil), "--db", db, "ingest", file, "--dataset", "mine", "--stage", "raw")
	q := mustGendex(t, testEnv(nil), "--db", db, "query", "datasets", "--no-header")
	if q.stdout != "mine\t1\t0\t1\t0\t0\t0\t0\n" {
		t.Errorf("datasets = %q, want mine with one response", q.stdout)
	}
}

func TestIngestTwiceIsUnchanged(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "g.db")
	files := 0
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			files++
		}
		return nil
	})
	first := mustGendex(t, testEnv(nil), "--db", db, "ingest", root)
	if strings.Contains(first.stderr, " 0 new records") || !strings.Contains(first.stderr, "from 7 files (0 unchanged") || files != 7 {
		t.Errorf("first ingest (%d files):\n%s", files, first)
	}
	before := mustGendex(t, testEnv(nil), "--db", db, "query", "progress").stdout
	second := mustGendex(t, testEnv(nil), "--db", db, "ingest", root)
	if !strings.Contains(second.stderr, "indexed 0 new records from 7 files (7 unchanged, 0 B read)") {
		t.Errorf("second ingest of unchanged files:\n%s", second)
	}
	if after := mustGendex(t, testEnv(nil), "--db", db, "query", "progress").stdout; after != before {
		t.Errorf("a second ingest changed the answers:\n%s\n%s", before, after)
	}
}

// A one-shot ingest of a file whose last line has no newline (a writer may
// still be writing it): README, ingest, "Bad input": the complete line is
// indexed, the torn one is not (half a line is never indexed), and the exit
// status is 1 because a line was left out.
func TestIngestLastLineWithoutNewline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "ds", "raw_responses.jsonl")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(`{"id":"a","completion_tokens":1}`+"\n"+`{"id":"b","completion_tokens":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "g.db")
	r := gendex(t, testEnv(nil), "--db", db, "ingest", dir)
	if r.code != 1 || !strings.Contains(r.stderr, file+":2:") {
		t.Errorf("ingest of a file with a torn last line: want exit 1 and a warning at line 2\n%s", r)
	}
	// dataset, files, prompts, raw, tokenized, errors, turns, excluded: one raw record.
	if q := mustGendex(t, testEnv(nil), "--db", db, "query", "datasets", "--no-header"); q.stdout != "ds\t1\t0\t1\t0\t0\t0\t0\n" {
		t.Errorf("the index holds %q; want exactly one raw record", q.stdout)
	}
	if q := gendex(t, testEnv(nil), "--db", db, "query", "show", "ds", "a"); q.code != 0 || !strings.Contains(q.stdout, `"completion_tokens":1`) {
		t.Errorf("the complete line is not indexed:\n%s", q)
	}
	if q := gendex(t, testEnv(nil), "--db", db, "query", "show", "ds", "b"); q.code != exitNotFound || !strings.Contains(q.stderr, `no record with id "b"`) {
		t.Errorf("the torn line is indexed:\n%s", q)
	}
}

func TestIngestInterrupted(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "g.db")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr bytes.Buffer
	env := testEnv(nil)
	env.Stderr = &stderr
	err := run(ctx, env, []string{"--db", db, "ingest", root})
	if code := exitCode(&stderr, err); code != 130 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("interrupted ingest: exit %d (%v), want 130\n%s", code, err, stderr.String())
	}
	// What was read before the interrupt is committed, and a new ingest finishes the job.
	mustGendex(t, testEnv(nil), "--db", db, "ingest", root)
	if got := mustGendex(t, testEnv(nil), "--db", db, "query", "datasets", "--no-header").stdout; strings.Count(got, "\n") != 3 {
		t.Errorf("datasets after resuming: %q", got)
	}
}
