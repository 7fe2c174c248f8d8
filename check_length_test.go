package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// checkVerdicts runs check --format json with args and returns its exit
// code and each dataset's reasons by name, whole.
func (p *placeRun) checkVerdicts(args ...string) (int, map[string]map[string]checkReason, string) {
	p.t.Helper()
	code, out, errOut := p.check(append([]string{"--format", "json"}, args...)...)
	var v struct{ Datasets []verdict }
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		p.t.Fatalf("gendex check --format json %q: %v\n%s\n%s", args, err, out, errOut)
	}
	by := map[string]map[string]checkReason{}
	for _, d := range v.Datasets {
		by[d.Dataset] = map[string]checkReason{}
		for _, r := range d.Reasons {
			by[d.Dataset][r.Reason] = r
		}
	}
	return code, by, out
}

// runMoveAsideFix runs over_max_length's fix as printed: "move FILE aside
// and run gendex ARGS...", with db given before ARGS.
func (p *placeRun) runMoveAsideFix(fix, db string) {
	p.t.Helper()
	file, cmd, ok := strings.Cut(strings.TrimPrefix(fix, "move "), " aside and run gendex ")
	if !ok || !strings.HasPrefix(fix, "move ") {
		p.t.Fatalf("over_max_length's fix is not 'move FILE aside and run gendex ...': %q", fix)
	}
	if err := os.Rename(file, file+".aside"); err != nil {
		p.t.Fatal(err)
	}
	p.mustRun(append([]string{"--db", db}, strings.Fields(cmd)...)...)
}

// recordLengths reads, as a reader outside gendex would, the length of
// each record of a folder's tokenized.jsonl: an ids record's input_ids, or
// for a conversations record its answer's last turn's prompt + completion
// tokens (the server's counts of the whole conversation and the answer).
func recordLengths(t *testing.T, dir string) map[string]int {
	t.Helper()
	last := map[string]int{}
	for id, turns := range assistantTurns(t, dir) {
		tn := turns[len(turns)-1]
		p, _ := tn["prompt_tokens"].(float64)
		c, _ := tn["completion_tokens"].(float64)
		last[id] = int(p + c)
	}
	out := map[string]int{}
	eachJSONLine(t, filepath.Join(dir, "tokenized.jsonl"), func(l []byte) {
		var r struct {
			ID       string
			InputIDs []int `json:"input_ids"`
		}
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if r.InputIDs != nil {
			out[r.ID] = len(r.InputIDs)
		} else {
			out[r.ID] = last[r.ID]
		}
	})
	return out
}

// TestCheckMaxLengthAsExported: check --max-length measures each record as
// export writes it, on every seed shape: a conversations record as its
// ids record's input_ids count it (the last turn's prompt + completion
// tokens, checked against the ids records export makes of the same
// answers), an ids record by its input_ids. It names the count, the tokens
// and the longest; its fix, run as printed, clears the reason, for
// conversations records and ids records alike. Before, a conversation was
// measured as the sum of its steps' prompt tokens (and the fix never
// cleared it).
func TestCheckMaxLengthAsExported(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	seedShapes(t, filepath.Join(p.dir, "seeds"))
	p.mustRun(append(simToolArgs, "--export", "conversations", "seeds")...)
	p.mustRun("--db", "ids.db", "export", "--format", "ids", "--out", "ids", "seeds")
	lengths := map[string]map[string]int{}
	for _, ds := range seedShapeNames {
		conv, ids := recordLengths(t, filepath.Join(p.dir, "seeds", ds)), recordLengths(t, filepath.Join(p.dir, "ids", ds))
		if len(conv) == 0 || len(conv) != len(ids) {
			t.Fatalf("%s: %d conversations records, %d ids records; want the same, some", ds, len(conv), len(ids))
		}
		for id, n := range conv {
			if ids[id] != n {
				t.Errorf("%s %s: the answer's last turn counts %d tokens, its ids record %d input_ids", ds, id, n, ids[id])
			}
		}
		lengths[ds] = conv
	}
	for _, run := range []struct{ db, dir, format string }{{"gendex.db", "seeds", ""}, {"ids.db", "ids", " --format ids"}} {
		p.maxLengthClears(run.db, run.dir, run.format, lengths)
	}
}

// maxLengthClears checks the records under dir (index db) against a
// --max-length that some of them exceed: check names, for each dataset,
// the records over it, their tokens and the longest, as lengths (an
// outside reading) says, and a fix (export with format's flags) that,
// run as printed, leaves none over it and as many excluded as max_len.
func (p *placeRun) maxLengthClears(db, dir, format string, lengths map[string]map[string]int) {
	t := p.t
	t.Helper()
	var all []int
	for _, ls := range lengths {
		for _, n := range ls {
			all = append(all, n)
		}
	}
	slices.Sort(all)
	maxLen := all[len(all)*2/3]
	over := func(ds string) (n, tokens, longest int) {
		for _, l := range lengths[ds] {
			if l > maxLen {
				n, tokens, longest = n+1, tokens+l, max(longest, l)
			}
		}
		return
	}
	code, by, out := p.checkVerdicts("--db", db, "--allow-simulated", "--max-length", fmt.Sprint(maxLen), dir)
	if code != 1 {
		t.Errorf("%s: check --max-length %d: exit %d, want 1\n%s", dir, maxLen, code, out)
	}
	for ds := range lengths {
		n, tokens, longest := over(ds)
		r := by[ds]["over_max_length"]
		if n == 0 {
			if r.Reason != "" {
				t.Errorf("%s/%s: over_max_length %v, want none\n%s", dir, ds, r.Count, out)
			}
			continue
		}
		if r.Count != float64(n) || r.Tokens != float64(tokens) || !strings.Contains(r.Detail, fmt.Sprintf("the longest %d", longest)) ||
			!strings.Contains(r.Fix, fmt.Sprintf("gendex export%s --max-len %d", format, maxLen)) {
			t.Errorf("%s/%s: over_max_length %v (%v tokens) %q, fix %q; want %d records, %d tokens, the longest %d, export%s --max-len %d",
				dir, ds, r.Count, r.Tokens, r.Detail, r.Fix, n, tokens, longest, format, maxLen)
			continue
		}
		p.runMoveAsideFix(r.Fix, db)
	}
	code, by, out = p.checkVerdicts("--db", db, "--allow-simulated", "--max-length", fmt.Sprint(maxLen), dir)
	if code != 0 {
		t.Errorf("%s: check --max-length %d after each printed fix: exit %d, want 0\n%s", dir, maxLen, code, out)
	}
	for ds := range lengths {
		excluded := 0
		eachJSONLine(t, filepath.Join(p.dir, dir, ds, "excluded.jsonl"), func(l []byte) {
			if strings.Contains(string(l), `"reason":"max_len"`) {
				excluded++
			}
		})
		if n, _, _ := over(ds); excluded != n || by[ds]["over_max_length"].Reason != "" {
			t.Errorf("%s/%s: after the fix, %d excluded as max_len and over_max_length %v; want %d and none", dir, ds, excluded, by[ds]["over_max_length"].Count, n)
		}
	}
}
