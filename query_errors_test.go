package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// TestQueryErrorsNameSamples: with gen --samples 3, query errors names
// each failed answer by its id and sample (a column, as missing has), no
// unit key with its NUL byte, one row per line of the errors files (every
// seed shape, requests failing at once); check's note counts those
// failures as answers, not prompts.
func TestQueryErrorsNameSamples(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	root := filepath.Join(p.dir, "seeds")
	seedShapes(t, root)
	p.mustRun(append(append([]string{"--db", "e.db"}, simToolArgs...), "--samples", "3", "--seed", "7",
		"--sim-error-rate", "0.2", "--max-attempts", "1", root)...)
	want := map[string]bool{}
	for _, ds := range seedShapeNames {
		eachJSONLine(t, filepath.Join(root, ds, "errors.jsonl"), func(b []byte) {
			var l struct {
				ID     string `json:"id"`
				Sample int    `json:"sample"`
			}
			if err := json.Unmarshal(b, &l); err != nil {
				t.Fatal(err)
			}
			want[fmt.Sprintf("%s %s %d", ds, l.ID, l.Sample)] = true
		})
	}
	if len(want) == 0 {
		t.Fatal("no request failed: the test tests nothing")
	}
	type row struct {
		Dataset, ID string
		Sample      *int
	}
	rows := mustQueryJSON[row](t, p.bin, filepath.Join(p.dir, "e.db"), "errors")
	got := map[string]bool{}
	for _, r := range rows {
		if r.Sample == nil || strings.ContainsRune(r.ID, 0) {
			t.Errorf("row %+v: want the id without its sample, and the sample", r)
			continue
		}
		got[fmt.Sprintf("%s %s %d", r.Dataset, r.ID, *r.Sample)] = true
	}
	if len(rows) != len(want) || len(got) != len(want) {
		t.Errorf("query errors: %d rows (%d distinct); the errors files hold %d failed answers", len(rows), len(got), len(want))
	}
	for k := range want {
		if !got[k] {
			t.Errorf("query errors does not name %s", k)
		}
	}
	_, _, out := p.checkJSON("--db", "e.db", root)
	if !strings.Contains(out, `"answers that failed for good (3 samples per prompt`) || strings.Contains(out, "prompts that failed for good") {
		t.Errorf("check's failed_prompts does not count answers:\n%s", out)
	}
}
