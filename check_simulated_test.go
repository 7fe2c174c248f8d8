package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckBlocksSimulatedAnswers: a dataset of the simulator's answers
// (gen --server sim) is not ready to train on, on every seed shape:
// simulated, with every answer counted, blocks; --allow-simulated makes
// it a note. Its fix, run as printed against a real server (the
// simulator unmarked, as gen takes a real one), answers into a new folder
// whose check is ready without --allow-simulated. Before, check called
// the simulator's answers ready.
func TestCheckBlocksSimulatedAnswers(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	seedShapes(t, filepath.Join(p.dir, "seeds"))
	p.mustRun(append(simToolArgs, "--export", "conversations", "seeds")...)
	code, by, out := p.checkVerdicts("seeds")
	if code != 1 {
		t.Errorf("check of the simulator's answers: exit %d, want 1\n%s", code, out)
	}
	allowed, byAllowed, outAllowed := p.checkVerdicts("--allow-simulated", "seeds")
	for _, ds := range seedShapeNames {
		if r := byAllowed[ds]["simulated"]; r.Blocks || r.Fix != "" || !strings.Contains(r.Detail, "--allow-simulated") {
			t.Errorf("%s: check --allow-simulated: simulated %+v; want a note", ds, r)
		}
	}
	if allowed != 0 {
		t.Errorf("check --allow-simulated of a clean run: exit %d, want 0\n%s", allowed, outAllowed)
	}
	real := startSimProcess(t, p.bin, "--unmarked", "--tool-calls", "--tool-call-parser", "qwen25")
	for _, ds := range seedShapeNames {
		answers := len(assistantTurns(t, filepath.Join(p.dir, "seeds", ds)))
		r := by[ds]["simulated"]
		prompts := filepath.Join(p.dir, "seeds", ds)
		want := "gendex gen --server URL --out NEWDIR " + prompts + " "
		if r.Count != float64(answers) || !r.Blocks || !strings.Contains(r.Fix, want) {
			t.Errorf("%s: simulated %v (blocks %v), fix %q; want %d answers, blocking, fix %q", ds, r.Count, r.Blocks, r.Fix, answers, want)
			continue
		}
		cmd, _, _ := strings.Cut(r.Fix[strings.Index(r.Fix, "gendex gen"):], " (")
		cmd = strings.NewReplacer("URL", real, "NEWDIR", filepath.Join(p.dir, "real")).Replace(cmd)
		p.mustRun(strings.Fields(strings.TrimPrefix(cmd, "gendex "))...)
	}
	_, by, out = p.checkVerdicts("seeds") // its prompts: the datasets now hold the real answers
	for _, ds := range seedShapeNames {
		if r, ok := by[ds]["simulated"]; ok {
			t.Errorf("%s: simulated %v after the fix; the index should have forgotten the simulator's answers\n%s", ds, r.Count, out)
		}
	}
	p.mustRun("export", "real")
	if code, by, out := p.checkVerdicts("real"); code != 0 || len(by) != len(seedShapeNames) {
		t.Errorf("check of the real server's answers: exit %d, %d datasets; want 0 and %d\n%s", code, len(by), len(seedShapeNames), out)
	}
}
