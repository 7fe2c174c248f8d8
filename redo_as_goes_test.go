package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRedoAsGoesNothingLeftNoServer: a --redo truncated over a large set
// (GENDEX_REDO_UPFRONT=1: decided as the feeder reads) run to its end,
// then run again once its server is gone (killed, as a finished job's GPUs
// are released), has nothing left: it ends, exit 0, saying that none of
// the cut answers is asked again and that there is nothing to do, and
// `query runs` records it finished, 0 to go; a plain gen says nothing to
// do too. A redo that still has work (a higher limit) waits for a server,
// its run waiting, and once the server is back asks each answer cut below
// its limit once. Before, the redo with nothing left connected first and
// read the prompts only then: it waited for the server that never came.
func TestRedoAsGoesNothingLeftNoServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "C")
	writeIDPrompts(t, dir, "C", 60)
	db := filepath.Join(t.TempDir(), "g.db")
	addr := freeAddr(t)
	url := "http://" + addr
	sim := startSimAt(t, bin, addr, "--unmarked", "--seed", "4")
	gen := func(args ...string) *gendexProc {
		return startGendexWith(t, gendexOpts{env: []string{"GENDEX_REDO_UPFRONT=1"}}, bin, append([]string{"--db", db, "gen", "--server", url}, append(args, root)...)...)
	}
	toEnd := func(what string, args ...string) string {
		t.Helper()
		g := gen(args...)
		if code := g.WaitWithin(t, 2*time.Minute); code != 0 {
			t.Fatalf("%s: exit %d\n%s", what, code, g.Stderr())
		}
		return g.Stderr()
	}
	toEnd("the first run", "--max-new-tokens", "4")
	toEnd("the redo", "--max-new-tokens", "64", "--redo", "truncated")
	answers, lines := newestAnswers(t, dir)
	before := map[string]int{}
	eachJSONLine(t, filepath.Join(dir, "raw_responses.jsonl"), func(b []byte) {
		var a redoAnswer
		json.Unmarshal(b, &a)
		before[a.ID]++
	})
	cut64 := 0 // cut at 64: left by the redo at 64, asked by one at 128
	for _, a := range answers {
		if a.Finish == "length" && a.Tokens >= 64 {
			cut64++
		}
	}
	if cut64 == 0 || lines == 60 {
		t.Fatalf("after the redo: %d answer lines, %d cut at 64; the test wants some redone and some cut at 64", lines, cut64)
	}
	sim.Kill()

	out := toEnd("the same redo again, the server gone", "--max-new-tokens", "64", "--redo", "truncated")
	if !strings.Contains(out, "every prompt read: none of the answers cut at the token limit is asked again") || !strings.Contains(out, "nothing to do") {
		t.Errorf("the same redo again, the server gone: want none asked again, nothing to do\n%s", out)
	}
	if r := lastRun(runsOf(t, bin, db)); r.State != "finished" || r.End == nil || r.ToGo == nil || *r.ToGo != 0 {
		t.Errorf("the redo with nothing left: %+v; want finished, ended, 0 to go", r)
	}
	if out := toEnd("a plain gen, the server gone"); !strings.Contains(out, "nothing to do") {
		t.Errorf("a plain gen, the server gone: want nothing to do\n%s", out)
	}
	if _, n := newestAnswers(t, dir); n != lines {
		t.Errorf("the runs with nothing to do wrote %d answer lines", n-lines)
	}

	// Work left, no server: waiting, then the server is back.
	redo := gen("--max-new-tokens", "128", "--redo", "truncated")
	want := fmt.Sprintf("every prompt read: %d of the answers cut at the token limit are asked again", cut64)
	waitFor(t, time.Minute, "the redo to find its answers and wait for a server", func() bool {
		rows, err := queryJSON[runRow](t, bin, db, "runs")
		return err == nil && lastRun(rows).State == "waiting" && strings.Contains(redo.Stderr(), want)
	})
	select {
	case <-redo.Done():
		t.Fatalf("the redo with work ended without a server: exit %d\n%s", redo.Wait(), redo.Stderr())
	default:
	}
	startSimAt(t, bin, addr, "--unmarked", "--seed", "4")
	if code := redo.WaitWithin(t, 2*time.Minute); code != 0 {
		t.Fatalf("the redo once the server is back: exit %d\n%s", code, redo.Stderr())
	}
	if _, n := newestAnswers(t, dir); n != lines+cut64 {
		t.Errorf("%d answer lines; want the %d before and the %d cut at 64 asked once each\n%s", n, lines, cut64, redo.Stderr())
	}
	perID := map[string]int{}
	eachJSONLine(t, filepath.Join(dir, "raw_responses.jsonl"), func(b []byte) {
		var a redoAnswer
		json.Unmarshal(b, &a)
		perID[a.ID]++
	})
	for id, a := range answers {
		if a.Finish == "length" && a.Tokens >= 64 && perID[id] != before[id]+1 {
			t.Errorf("%s, cut at 64: %d answer lines, want %d", id, perID[id], before[id]+1)
		}
	}
	if r := lastRun(runsOf(t, bin, db)); r.State != "finished" || r.ToGo == nil || *r.ToGo != 0 {
		t.Errorf("the redo once the server is back: %+v; want finished, 0 to go", r)
	}
}

// TestRedoAsGoesCountsSamples: a --redo truncated decided as the feeder
// reads (GENDEX_REDO_UPFRONT=1) over every seed shape answered with
// --samples 3 says what it keeps in answers of the prompts' samples, as
// a plain resume does: it said "144 of 48 prompts already answered".
func TestRedoAsGoesCountsSamples(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	root := filepath.Join(p.dir, "seeds")
	seedShapes(t, root)
	gen := append(append([]string{"--db", "s.db"}, simToolArgs...), "--samples", "3", "--seed", "7")
	p.mustRun(append(gen, "--max-new-tokens", "32", root)...)
	code, _, errOut := runGendexWithin(t, 2*time.Minute, gendexOpts{dir: p.dir, env: []string{"GENDEX_REDO_UPFRONT=1"}}, p.bin,
		append(gen, "--max-new-tokens", "64", "--redo", "truncated", root)...)
	if code != 0 {
		t.Fatalf("the redo: exit %d\n%s", code, errOut)
	}
	progress := p.progress("s.db")
	for _, ds := range seedShapeNames {
		prompts := int(progress[ds]["prompts"].(float64))
		want := fmt.Sprintf("  %s: %d of %d answers (3 samples of %d prompts) already made or failed, not asked again but for the cut answers", ds, 3*prompts, 3*prompts, prompts)
		if !strings.Contains(errOut, want) {
			t.Errorf("%s: no line %q\n%s", ds, want, errOut)
		}
	}
}
