package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestRedoToolConversations: --redo truncated asks a tool conversation
// again from its cut step: the steps before it, kept in turns.jsonl, are
// not asked again and stay as they were in its new raw line, and the steps
// asked are asked on them; --redo FILE asks a listed conversation again
// from its first step (no step of the run before is this redo's), and the
// same list again asks nothing; after each, the index equals a fresh
// ingest of the folder. (Before, a redo asked every step again.)
func TestRedoToolConversations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	var sp stepProxy
	url := sp.start(t, startSimProcess(t, bin, "--tool-calls", "--tool-call-parser", "qwen25"), "/v1/tokenize")
	const n = 30
	dir := simToolDataset(t, n)
	db := filepath.Join(t.TempDir(), "g.db")
	run := 0
	gen := func(args ...string) string {
		t.Helper()
		run++
		sp.run.Store(int64(run))
		code, out := runGendexCombined(t, bin, append([]string{"--db", db, "gen", "--server", url}, append(args, dir)...)...)
		if code != 0 {
			t.Fatalf("gen %v: exit %d\n%s", args, code, out)
		}
		checkNoneHalfDone(t, out)
		return out
	}
	// asks is each conversation's steps asked by the last run, in order.
	asks := func() map[string][]int {
		m := map[string][]int{}
		for _, a := range sp.asks {
			if a.run == run {
				m[a.id] = append(m[a.id], a.step)
			}
		}
		return m
	}
	gen("--max-new-tokens", "100")
	old := newestSteps(t, dir)
	cutAt := map[string]int{} // a conversation whose last step was cut: that step
	later := 0
	for id, steps := range old {
		var finish string
		json.Unmarshal(steps[len(steps)-1]["finish_reason"], &finish)
		if finish == "length" {
			cutAt[id] = len(steps)
			if len(steps) > 1 {
				later++
			}
		}
	}
	if later < 2 {
		t.Fatalf("%d conversations cut at a later step than the first; the test wants 2 or more", later)
	}
	out := gen("--max-new-tokens", "400", "--redo", "truncated")
	asked := asks()
	for id, k := range cutAt {
		if len(asked[id]) == 0 || asked[id][0] != k {
			t.Errorf("%s, cut at step %d: the redo asked steps %v; want from %d on", id, k, asked[id], k)
		}
	}
	for id, steps := range asked {
		if cutAt[id] == 0 {
			t.Errorf("%s, not cut, was asked again: steps %v", id, steps)
		}
	}
	redone := newestSteps(t, dir)
	for id, k := range cutAt {
		for i := range k - 1 {
			if !sameJSON(redone[id][i], old[id][i]) {
				t.Errorf("%s: step %d, before the cut one, changed in the redo:\n%s\n%s", id, i+1, mustJSON(old[id][i]), mustJSON(redone[id][i]))
			}
		}
	}
	checkAskedOn(t, &sp, run, redone)
	checkToolIndex(t, db, dir)
	if t.Failed() {
		t.Logf("the redo:\n%s", out)
	}
	// A list: its conversations from their first step, once.
	var listed []string
	for id, steps := range redone {
		if len(steps) > 1 {
			listed = append(listed, id)
		}
	}
	slices.Sort(listed)
	listed = listed[:2]
	list := filepath.Join(t.TempDir(), "redo.txt")
	os.WriteFile(list, []byte(strings.Join(listed, "\n")+"\n"), 0o644)
	gen("--max-new-tokens", "400", "--redo", list)
	asked = asks()
	for _, id := range listed {
		if len(asked[id]) == 0 || asked[id][0] != 1 {
			t.Errorf("%s, listed: the redo asked steps %v; want from 1 on", id, asked[id])
		}
	}
	if len(asked) != len(listed) {
		t.Errorf("the list of %v asked %v", listed, asked)
	}
	checkAskedOn(t, &sp, run, newestSteps(t, dir))
	checkToolIndex(t, db, dir)
	if out := gen("--max-new-tokens", "400", "--redo", list); !strings.Contains(out, "nothing to do") || len(asks()) > 0 {
		t.Errorf("the same list again asked %v:\n%s", asks(), out)
	}
}

// newestSteps returns the steps of each conversation's newest raw line in
// dir (a redo's, if any).
func newestSteps(t *testing.T, dir string) map[string][]map[string]json.RawMessage {
	t.Helper()
	out := map[string][]map[string]json.RawMessage{}
	redo := map[string]bool{}
	for _, l := range toolLines(t, filepath.Join(dir, "raw_responses.jsonl")) {
		id, r := lineID(l), string(l["redo"]) == "true"
		if _, seen := out[id]; seen && !r {
			continue
		}
		var steps []map[string]json.RawMessage
		if err := json.Unmarshal(l["turns"], &steps); err != nil || len(steps) == 0 {
			t.Fatalf("%s: raw line without steps: %v", id, err)
		}
		out[id], redo[id] = steps, r
	}
	return out
}

// checkAskedOn checks each step the proxy saw asked in run was asked (its
// last request) on the history of the steps before it in newest.
func checkAskedOn(t *testing.T, sp *stepProxy, run int, newest map[string][]map[string]json.RawMessage) {
	t.Helper()
	last := map[string]stepAsk{}
	for _, a := range sp.asks {
		if a.run == run {
			last[a.id+"#"+strconv.Itoa(a.step)] = a
		}
	}
	for key, a := range last {
		steps := newest[a.id]
		if a.step > len(steps) {
			t.Errorf("%s was asked, but the conversation's line has %d steps", key, len(steps))
			continue
		}
		checkStepHistory(t, key, a.msgs, steps[:a.step-1])
	}
}

// checkToolIndex checks that the index db counts what a fresh ingest of
// dir counts.
func checkToolIndex(t *testing.T, db, dir string) {
	t.Helper()
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	mustGendex(t, testEnv(nil), "--db", fresh, "ingest", dir)
	for _, q := range [][]string{{"progress"}, {"tokens"}, {"files"}, {"finish"}, {"stops"}} {
		query := func(db string) string {
			return mustGendex(t, testEnv(nil), append([]string{"--db", db, "query"}, append(q, "--format", "json")...)...).stdout
		}
		if got, want := query(db), query(fresh); got != want {
			t.Errorf("query %s: the index says\n%s\na fresh index of the files says\n%s", q[0], got, want)
		}
	}
}
