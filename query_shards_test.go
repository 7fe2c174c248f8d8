package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestQueryShardsStates: four shards of one folder, seen from a login
// index: shard 0 answered every prompt, shard 1's gen waits on a server
// that never comes (it holds its answer file, with nothing in it, for
// longer than --quiet), shard 2 was SIGKILLed mid-run, shard 3 never
// started. query shards lists the four, each with its own state, its
// prompts and the missing ones.
func TestQueryShardsStates(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	root := t.TempDir()
	const n = 200
	writeIDPrompts(t, filepath.Join(root, "D"), "D", n)
	fast := startSimProcess(t, bin, "--unmarked")
	slow := startSimProcess(t, bin, "--unmarked", "--decode-tps", "50", "--slots", "2")
	gen := func(shard, server string) []string {
		return []string{"--db", filepath.Join(t.TempDir(), "g.db"), "gen", "--server", server, "--shard", shard,
			"--concurrency", "2", "--max-new-tokens", "16", root}
	}
	if code, out := runGendexCombined(t, bin, gen("0/4", fast)...); code != 0 {
		t.Fatalf("shard 0: exit %d\n%s", code, out)
	}
	waiting := startGendex(t, bin, "", gen("1/4", "http://"+freeAddr(t))...) // no server there: it waits, holding its files
	defer waiting.Kill()
	killed := startGendex(t, bin, "", gen("2/4", slow)...)
	raw2 := filepath.Join(root, "D", "raw_responses.shard-0002-of-0004.jsonl")
	waitFor(t, 30*time.Second, "shard 2's first answers", func() bool {
		b, _ := os.ReadFile(raw2)
		return bytes.Count(b, []byte("\n")) >= 2
	})
	killed.Kill()
	waitFor(t, 30*time.Second, "shard 1 to claim its file", func() bool {
		_, err := os.Stat(filepath.Join(root, "D", "raw_responses.shard-0001-of-0004.jsonl"))
		return err == nil
	})
	time.Sleep(1500 * time.Millisecond) // past --quiet 1s

	login := filepath.Join(t.TempDir(), "login.db")
	mustRunGendex(t, bin, "--db", login, "ingest", root)
	out := mustRunGendex(t, bin, "--db", login, "query", "shards", "--quiet", "1s", "--format", "json")
	var rows []struct {
		Shard, State              string
		Prompts, Answers, Missing *int
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 4 {
		t.Fatalf("query shards: %v\n%s", err, out)
	}
	want := []string{"done", "quiet", "stopped short", "not started"}
	total := 0
	for i, r := range rows {
		if r.State != want[i] || r.Prompts == nil || r.Missing == nil || r.Answers == nil {
			t.Errorf("shard %s: state %q, prompts %v, missing %v; want %q with both known", r.Shard, r.State, r.Prompts, r.Missing, want[i])
			continue
		}
		total += *r.Prompts
		if *r.Missing != *r.Prompts-*r.Answers {
			t.Errorf("shard %s: %d missing of %d prompts with %d answers", r.Shard, *r.Missing, *r.Prompts, *r.Answers)
		}
	}
	if total != n {
		t.Errorf("the shards' prompts add up to %d; want %d\n%s", total, n, out)
	}
}

// TestQueryShardsCountsSamples: with gen --samples 3, query shards counts
// a shard's answers and its missing ones by (id, sample), as progress
// does: a whole run of every seed shape is done with nothing missing (it
// said prompts minus answers, which wrapped below zero, and "stopped
// short"), and of a sharded one the shard never started misses every
// sample of its prompts.
func TestQueryShardsCountsSamples(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	whole := filepath.Join(p.dir, "whole")
	seedShapes(t, whole)
	p.mustRun(append(append([]string{"--db", "whole.db"}, simToolArgs...), "--samples", "3", "--seed", "7", whole)...)
	sharded := filepath.Join(p.dir, "sharded")
	writeIDPrompts(t, filepath.Join(sharded, "O"), "O", 30)
	p.mustRun("--db", "shard0.db", "gen", "--server", "sim", "--samples", "3", "--shard", "0/2", sharded)
	p.mustRun("--db", "sharded.db", "ingest", sharded) // a login index sees every shard's prompts
	type row struct {
		Dataset, Shard, State             string
		Prompts, Answers, Errors, Missing *int
	}
	check := func(db string, wantRows int) []row {
		rows := mustQueryJSON[row](t, p.bin, filepath.Join(p.dir, db), "shards")
		if len(rows) != wantRows {
			t.Fatalf("%s: %d rows, want %d: %+v", db, len(rows), wantRows, rows)
		}
		for _, r := range rows {
			if r.Prompts == nil || r.Answers == nil || r.Errors == nil || r.Missing == nil {
				t.Errorf("%s %s: a count unknown: %+v", r.Dataset, r.Shard, r)
				continue
			}
			if *r.Missing != 3**r.Prompts-*r.Answers-*r.Errors {
				t.Errorf("%s %s: %d missing of %d prompts x 3 samples with %d answers, %d errors", r.Dataset, r.Shard, *r.Missing, *r.Prompts, *r.Answers, *r.Errors)
			}
		}
		return rows
	}
	for _, r := range check("whole.db", len(seedShapeNames)) {
		if r.State != "done" || *r.Answers == 0 {
			t.Errorf("%s: state %q with %d answers; want done", r.Dataset, r.State, *r.Answers)
		}
	}
	rows := check("sharded.db", 2)
	if rows[0].State != "done" || rows[1].State != "not started" || *rows[1].Missing == 0 {
		t.Errorf("sharded: %+v; want shard 0 done, shard 1 not started missing its samples", rows)
	}
}
