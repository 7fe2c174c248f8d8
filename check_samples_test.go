package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckSamplesAlikeNotRepeated: every seed shape (multi-turn ShareGPT
// and chat, a function-calling set, agent trajectories, glaive) asked with
// gen --samples 3: where a prompt's samples all gave one text (the
// simulator answers a request one way, as a greedy server does), check
// says so as the note samples_alike and is ready; it does not block them
// as repeated_text, which is one text shared by several prompts (each
// sample was counted as a prompt: 3 alike samples blocked every dataset).
// With --seed each sample is sent its own seed, they differ, and neither
// is said.
func TestCheckSamplesAlikeNotRepeated(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	for _, run := range []struct {
		name  string
		args  []string
		alike bool
	}{
		{"greedy", nil, true},
		{"seeded", []string{"--seed", "7"}, false},
	} {
		root := filepath.Join(p.dir, run.name)
		seedShapes(t, root)
		db := run.name + ".db"
		args := append([]string{"--db", db}, simToolArgs...)
		p.mustRun(append(append(args, "--samples", "3", "--export", "conversations"), append(run.args, root)...)...)
		code, reasons, out := p.checkJSON("--db", db, "--allow-simulated", root)
		if code != 0 {
			t.Errorf("%s: check exit %d, want 0 (ready)\n%s", run.name, code, out)
		}
		var alike float64
		for _, ds := range seedShapeNames {
			r := reasons[ds]
			if _, ok := r["repeated_text"]; ok {
				t.Errorf("%s: %s: repeated_text %v; want none\n%s", run.name, ds, r["repeated_text"], out)
			}
			if n, ok := r["samples_alike"]; ok {
				alike += n
				if !run.alike || n <= 0 || int(n)%3 != 0 {
					t.Errorf("%s: %s: samples_alike %v; want %v (whole prompts' answers)", run.name, ds, n, run.alike)
				}
			}
		}
		if run.alike && alike == 0 {
			t.Errorf("%s: no samples_alike in any dataset; want the alike samples counted\n%s", run.name, out)
		}
		if run.alike && !strings.Contains(out, "--samples 3 --temperature 0.8") {
			t.Errorf("%s: samples_alike's fix does not ask the dataset's 3 samples:\n%s", run.name, out)
		}
	}
}
