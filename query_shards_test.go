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
