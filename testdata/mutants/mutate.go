package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// A result is what mutating one entry gave: the line to print, the
// tests' output (with -v), an error when it was not caught, and whether
// its tests timed out without any failing (then the error says so, and
// the mutation runs again alone).
type result struct {
	line, output string
	err          error
	timedOut     bool
	cpu          time.Duration
	wall         time.Duration // the whole of mutate: applying, building, testing
}

// mutate applies m to the copy, runs its tests and undoes it.
func (r *runner) mutate(m mutant) result {
	path := filepath.Join(r.dir, m.file)
	orig, err := os.ReadFile(path)
	if err != nil {
		return result{err: err}
	}
	if bytes.Count(orig, []byte(m.original)) != 1 {
		return result{err: fmt.Errorf("the copy's %s differs from the tree's", m.file)}
	}
	mutated := bytes.Replace(orig, []byte(m.original), []byte(m.mutated), 1)
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return result{err: err}
	}
	defer os.WriteFile(path, orig, 0o644)
	start := time.Now()
	var cpu time.Duration
	var caught, notes []string
	var lastOutput string
	var notRun []string   // test runs whose -run matched no test
	var timedOut []string // the tests running when a run timed out
	var skipped []string
	broken := false
	for _, t := range m.tests {
		o := r.goTest(t)
		cpu += o.cpu
		lastOutput = o.output
		if o.none {
			notRun = append(notRun, t.String())
		}
		if o.timedOut {
			running := topLevel(o.running)
			if len(running) == 0 {
				running = []string{t.String()}
			}
			timedOut = append(timedOut, running...)
		}
		skipped = append(skipped, o.skips...)
		caught = append(caught, topLevel(o.failed)...)
		switch o.other {
		case "":
		case "build failed":
			broken = true
		default:
			notes = append(notes, fmt.Sprintf("%s %s", t.pkg, o.other))
		}
		if len(o.failed) > 0 {
			break // caught: the entry's other tests need not run
		}
	}
	took := fmt.Sprintf("%s, %s CPU", time.Since(start).Round(100*time.Millisecond), cpu.Round(100*time.Millisecond))
	head := fmt.Sprintf("%-26s %-28s", m.name, m.file)
	switch {
	case broken:
		return result{cpu: cpu, line: "BROKEN   " + head,
			err: fmt.Errorf("the mutated tree does not build: fix the entry's '+++ mutated' snippet\n%s", lastOutput)}
	case len(caught) > 0 || len(notes) > 0:
		return result{cpu: cpu, line: fmt.Sprintf("caught   %s by %s [%s] (%s)", head, strings.Join(append(caught, notes...), ", "), took, m.promise)}
	case len(timedOut) > 0:
		// A timeout is no failing test: on a loaded machine a slow test
		// times out whether or not the mutation survived.
		return result{cpu: cpu, line: fmt.Sprintf("TIMEOUT  %s by %s [%s] (%s)", head, strings.Join(timedOut, ", "), took, m.promise),
			timedOut: true,
			err:      fmt.Errorf("caught by no failing test: %s timed out (-timeout %s)", strings.Join(timedOut, ", "), r.timeout)}
	}
	survived := fmt.Sprintf("SURVIVED %s [%s] (%s)", head, took, m.promise)
	if len(notRun) > 0 {
		return result{cpu: cpu, line: survived, err: fmt.Errorf("survived: %s ran no test: fix the entry's test: line", strings.Join(notRun, "; "))}
	}
	if len(skipped) > 0 {
		return result{cpu: cpu, line: survived, err: fmt.Errorf("survived, but tests skipped: %s; run the check as CI does", strings.Join(skipped, "; "))}
	}
	var runs []string
	for _, t := range m.tests {
		runs = append(runs, t.String())
	}
	return result{cpu: cpu, line: survived,
		err: fmt.Errorf("survived: no test failed (%s); the guard lost its test (%s): add one that fails with it, or point the entry at the test that does",
			strings.Join(runs, "; "), m.why)}
}

// topLevel keeps the tests among names (TestA, TestA/sub) once each, as
// the top-level test when only its subtests are named too.
func topLevel(names []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, n := range names {
		top, _, _ := strings.Cut(n, "/")
		if !seen[top] {
			seen[top] = true
			out = append(out, top)
		}
	}
	sort.Strings(out)
	return out
}
