package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A redo of a list of ids is decided by content (issue 41, item 3): FILE's
// timestamps play no part. These tests fail on the code that asked again
// only the ids answered before FILE was last written.

// TestRedoListOlderThanAnswers: a list made before the run (cp -p, rsync
// -a, git checkout, a clock stepped back) asks every listed id again; the
// same list again, touched, asks nothing; another list asks its own ids
// again, whoever redid them before.
func TestRedoListOlderThanAnswers(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	real := startSimProcess(t, p.bin, "--unmarked")
	p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "demo")
	list := filepath.Join(p.dir, "again.txt")
	os.WriteFile(list, []byte("B1_ids-00001\nB1_ids-00002\nB2_text\tB2_text-00003\n"), 0o644)
	old := time.Now().Add(-24 * time.Hour)
	if err := os.Chtimes(list, old, old); err != nil {
		t.Fatal(err)
	}
	errOut := p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "--redo", list, "demo")
	if n, _ := p.answers("demo"); n != 203 || !strings.Contains(errOut, "2 of the ids "+list+" lists are asked again") {
		t.Errorf("a redo list older than the answers: %d answer lines, want 203 (each of its 3 ids asked again)\n%s", n, errOut)
	}
	redone := func(ds string) []string {
		newest, _ := newestAnswers(t, filepath.Join(p.dir, "demo", ds))
		var ids []string
		for id, a := range newest {
			if a.Redo {
				ids = append(ids, id)
			}
		}
		return ids
	}
	if got := append(redone("B1_ids"), redone("B2_text")...); len(got) != 3 {
		t.Errorf("redone: %v, want the 3 listed ids", got)
	}

	future := time.Now().Add(time.Hour)
	os.Chtimes(list, future, future)
	errOut = p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "--redo", list, "demo")
	if n, _ := p.answers("demo"); n != 203 || !strings.Contains(errOut, "answered again already") || !strings.Contains(errOut, "nothing to do") {
		t.Errorf("the same list again, newer than every answer: %d answer lines, want 203 and nothing to do\n%s", n, errOut)
	}

	other := filepath.Join(p.dir, "other.txt")
	os.WriteFile(other, []byte("B1_ids-00001\n"), 0o644)
	os.Chtimes(other, old, old)
	errOut = p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "--redo", other, "demo")
	if n, _ := p.answers("demo"); n != 204 {
		t.Errorf("another list, of an id an earlier redo answered: %d answer lines, want 204\n%s", n, errOut)
	}
}

// TestRedoListResumesAfterSIGKILL: a redo of a list older than the answers,
// SIGKILLed while its answers come in, then started again with the same
// list (now newer than every answer): it asks only the ids the killed run
// did not answer again, so each listed id is answered exactly once more.
func TestRedoListResumesAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	const n, listed = 240, 200
	root := t.TempDir()
	dir := filepath.Join(root, "r")
	writeIDPrompts(t, dir, "r", n)
	db := filepath.Join(t.TempDir(), "g.db")
	fast := startSimProcess(t, bin, "--unmarked", "--seed", "6")
	if code, out := runGendexCombined(t, bin, "--db", db, "gen", "--server", fast, "--max-new-tokens", "64", root); code != 0 {
		t.Fatalf("the first run: exit %d\n%s", code, out)
	}
	var b strings.Builder
	for i := 1; i <= listed; i++ {
		fmt.Fprintf(&b, "r-%05d\n", i)
	}
	list := filepath.Join(t.TempDir(), "redo.txt")
	if err := os.WriteFile(list, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-24 * time.Hour)
	os.Chtimes(list, old, old)
	lines := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "raw_responses.jsonl"))
		return bytes.Count(b, []byte("\n"))
	}
	// 64 tokens at 1280 tokens/s: 50 ms an answer, 4 at a time.
	slow := startSimProcess(t, bin, "--unmarked", "--seed", "6", "--decode-tps", "1280")
	redo := []string{"--db", db, "gen", "--server", slow, "--max-new-tokens", "64", "--concurrency", "4", "--redo", list, root}
	gen := startGendex(t, bin, "", redo...)
	grow := 1 + rand.IntN(listed/2)
	waitFor(t, 2*time.Minute, "the redo's answers to come in", func() bool {
		select {
		case <-gen.Done():
			t.Fatalf("the redo ended before %d of its answers came in (%d answer lines):\n%s", grow, lines()-n, gen.Stderr())
		default:
		}
		return lines() >= n+grow
	})
	gen.Kill()
	killed := lines() - n
	t.Logf("killed after %d redone answers", killed)
	if killed >= listed {
		t.Fatalf("the redo finished before it was killed (%d answers)", killed)
	}

	future := time.Now().Add(time.Hour)
	os.Chtimes(list, future, future)
	code, out := runGendexCombined(t, bin, redo...)
	if code != 0 {
		t.Fatalf("the redo started again: exit %d\n%s", code, out)
	}
	if done := fmt.Sprintf("%d answered again already", killed); !strings.Contains(out, done) {
		t.Errorf("the resumed redo does not say %q:\n%s", done, out)
	}
	count := map[string]int{}
	eachJSONLine(t, filepath.Join(dir, "raw_responses.jsonl"), func(line []byte) {
		var a redoAnswer
		if json.Unmarshal(line, &a) == nil {
			count[a.ID]++
		}
	})
	for i := 1; i <= n; i++ {
		id, want := fmt.Sprintf("r-%05d", i), 1
		if i <= listed {
			want = 2
		}
		if count[id] != want {
			t.Errorf("%s: %d answers, want %d", id, count[id], want)
		}
	}
	if r := mustQueryJSON[map[string]any](t, bin, db, "progress"); len(r) != 1 || r[0]["raw"] != float64(n) {
		t.Errorf("progress %v, want %d answers", r, n)
	}
	if _, out := runGendexCombined(t, bin, redo...); !strings.Contains(out, "nothing to do") {
		t.Errorf("the same redo after its end has something to do:\n%s", out)
	}
}

// TestRedoListConversations: a list of conversations answered turn by
// turn, older than their answers, asks each again from its first turn
// (no turn of an earlier run is this redo's), and the same list again
// asks nothing.
func TestRedoListConversations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	root := t.TempDir()
	writeShardPrompts(t, root, 10)
	for _, ds := range []string{"I", "T"} {
		os.RemoveAll(filepath.Join(root, ds))
	}
	dir := filepath.Join(root, "C")
	db := filepath.Join(t.TempDir(), "g.db")
	url := startSimProcess(t, bin, "--unmarked", "--seed", "7")
	gen := func(args ...string) string {
		t.Helper()
		code, out := runGendexCombined(t, bin, append([]string{"--db", db, "gen", "--server", url, "--max-new-tokens", "8"}, append(args, root)...)...)
		if code != 0 {
			t.Fatalf("gen %v: exit %d\n%s", args, code, out)
		}
		return out
	}
	gen()
	list := filepath.Join(t.TempDir(), "redo.txt")
	os.WriteFile(list, []byte("C-00001\nC-00004\nC-00007\n"), 0o644)
	old := time.Now().Add(-24 * time.Hour)
	os.Chtimes(list, old, old)
	out := gen("--redo", list)
	turns := map[string][]bool{} // id -> each turn line's redo, in order
	eachJSONLine(t, filepath.Join(dir, "turns.jsonl"), func(b []byte) {
		var l struct {
			ID   string `json:"id"`
			Redo bool   `json:"redo"`
		}
		json.Unmarshal(b, &l)
		turns[l.ID] = append(turns[l.ID], l.Redo)
	})
	newest, lines := newestAnswers(t, dir)
	for i := range 10 {
		id := fmt.Sprintf("C-%05d", i)
		listed := i == 1 || i == 4 || i == 7
		want := []bool{false}
		if listed {
			want = []bool{false, true}
		}
		if fmt.Sprint(turns[id]) != fmt.Sprint(want) || newest[id].Redo != listed {
			t.Errorf("%s (listed %v): turn 1 lines %v, want %v; conversation redone %v", id, listed, turns[id], want, newest[id].Redo)
		}
	}
	if lines != 13 {
		t.Errorf("%d conversation lines, want 10 and 3 redone\n%s", lines, out)
	}
	os.Chtimes(list, time.Now(), time.Now())
	if out := gen("--redo", list); !strings.Contains(out, "3 answered again already") || !strings.Contains(out, "nothing to do") {
		t.Errorf("the same list again: want nothing to do\n%s", out)
	}
}
