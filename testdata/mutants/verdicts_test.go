package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// runCheck builds the check, runs it with args on a copy of
// testdata/fakemod (a module whose tests fail, hang, or hang once when
// mutated; see its guard.go) and returns its exit code and output.
func runCheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "mutants")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tree := t.TempDir()
	if err := os.CopyFS(tree, os.DirFS(filepath.Join("testdata", "fakemod"))); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"-list", "mutants.txt"}, args...)...)
	cmd.Dir = tree
	cmd.Env = append(os.Environ(), "FAKEMOD_MARKS="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatal(err)
	return 0, "", ""
}

// A test that times out has not caught its mutation: the mutation runs
// again alone, after the others; a second timeout is reported as such
// and fails the check, and a test that passes alone lets the mutation
// be seen to survive.
func TestTimeoutIsNoCatch(t *testing.T) {
	t.Parallel()
	code, out, errs := runCheck(t, "-timeout", "2s", "-j", "2")
	t.Logf("stdout:\n%s\nstderr:\n%s", out, errs)
	if code != 1 {
		t.Errorf("exit %d, want 1: a mutation caught only by a timeout, and one that survived, fail the check", code)
	}
	// The first pass (in any order), then the runs alone, in list order.
	alone := strings.Index(out, "3 mutations timed out, none of their tests failing: each runs again, alone\n")
	if alone < 0 {
		t.Fatal("the output does not say that 3 mutations run again alone")
	}
	for _, w := range []string{
		`(?m)^ 1/4 caught +kept .* by TestKept `,
		`(?m)^ 2/4 timeout +hangs .* by TestHangs .*: runs again alone$`,
		`(?m)^ 3/4 timeout +slow-once .* by TestSlowOnce .*: runs again alone$`,
		`(?m)^ 4/4 timeout +slow-once-then-fails .* by TestSlowOnceThenFails .*: runs again alone$`,
	} {
		if !regexp.MustCompile(w).MatchString(out[:alone]) {
			t.Errorf("no line %s before the runs alone", w)
		}
	}
	rest := out[alone:]
	for _, w := range []string{
		`(?m)^ 2/4 TIMEOUT +hangs .* by TestHangs .*\(alone\)$`,
		`(?m)^ 3/4 SURVIVED +slow-once .*\(alone\)$`,
		`(?m)^ 4/4 caught +slow-once-then-fails .* by TestSlowOnceThenFails .*\(alone\)$`,
	} {
		loc := regexp.MustCompile(w).FindStringIndex(rest)
		if loc == nil {
			t.Fatalf("no line %s after what came before among the runs alone", w)
		}
		rest = rest[loc[1]:]
	}
	for _, w := range []string{
		"2 of 4 mutations not caught",
		"hangs (mutants.txt:14): caught by no failing test: TestHangs timed out (-timeout 2s), alone too",
		"slow-once (mutants.txt:24): survived: no test failed",
	} {
		if !strings.Contains(errs, w) {
			t.Errorf("stderr does not say %q", w)
		}
	}
	if strings.Contains(errs, "kept") || strings.Contains(errs, "slow-once-then-fails") {
		t.Errorf("stderr names a mutation that was caught")
	}
}

// A mutation a test fails on is caught, and the check passes.
func TestFailingTestCatches(t *testing.T) {
	t.Parallel()
	code, out, errs := runCheck(t, "-only", "^kept$")
	if code != 0 || !regexp.MustCompile(`(?m)^ 1/1 caught +kept .* by TestKept `).MatchString(out) {
		t.Errorf("exit %d, want 0 and kept caught by TestKept\nstdout:\n%s\nstderr:\n%s", code, out, errs)
	}
}
