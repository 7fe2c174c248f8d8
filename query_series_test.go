package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSeriesRightAfterGenSumsToTheFiles: asked the moment gen exits,
// series counts every answer line, whatever the step (the current
// second is its last row), and throughput over the run counts what query
// tokens counts. Before, every span ended at the current second,
// exclusive: the answers of that second were in no row (1,199 of 1,200).
func TestSeriesRightAfterGenSumsToTheFiles(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	real := startSimProcess(t, p.bin, "--unmarked")
	p.mustRun("gen", "--server", real, "demo")
	lines, _ := p.answers("demo")
	if lines != 200 {
		t.Fatalf("%d answer lines, want 200", lines)
	}
	ask := func(args ...string) []map[string]any {
		t.Helper()
		code, out, stderr := runGendex(t, p.bin, p.dir, append(append([]string{"query"}, args...), "--format", "json")...)
		if code != 0 {
			t.Fatalf("query %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(out), &rows); err != nil {
			t.Fatal(err)
		}
		return rows
	}
	sum := func(rows []map[string]any, key string) (n float64) {
		for _, r := range rows {
			n += r[key].(float64)
		}
		return n
	}
	// Each question right after the run, as a user's script asks them (in
	// the second of the last answers, most of the time: where the old
	// rule lost them).
	for _, step := range []string{"1s", "5s", "1m", ""} {
		args := []string{"series"}
		if step != "" {
			args = append(args, "--step", step)
		}
		if got := sum(ask(args...), "answers"); got != float64(lines) {
			t.Errorf("series %s: %v answers, the files hold %d", step, got, lines)
		}
	}
	if got, want := sum(ask("throughput", "--window", "1h"), "records"), sum(ask("tokens"), "records"); got != want || want != float64(lines) {
		t.Errorf("throughput --window 1h: %v records; query tokens %v, the files %d", got, want, lines)
	}
}
