package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// A runner runs go test in one copy of the tree (dir), one run at a time.
type runner struct {
	ctx     context.Context
	dir     string
	env     []string // go test's environment (see goEnv)
	verbose bool
	timeout time.Duration
	log     strings.Builder // with verbose, the output of the test runs since the last take
}

// outcome is what one go test run said.
type outcome struct {
	failed []string // the tests that failed, as --- FAIL names them
	other  string   // the package failed without a failing test, nor a timeout: why
	output string
	none   bool     // -run matched no test
	skips  []string // the tests that skipped, with why
	// timedOut says the run ended by a timeout, not by a failure: go
	// test's -timeout (the tests still running are in running), its kill
	// at -timeout and a minute, or the runner's own deadline.
	timedOut bool
	running  []string
	cpu      time.Duration // go test's, its compiles' and its tests' (those it waited for)
}

// passed says whether every test that ran passed.
func (o outcome) passed() bool { return len(o.failed) == 0 && o.other == "" && !o.timedOut }

var (
	failLine    = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	skipLine    = regexp.MustCompile(`^\s*--- SKIP: (\S+)`)
	buildFailed = regexp.MustCompile(`(?m)^FAIL\s+\S+ \[(build|setup) failed\]|^# \S+`)
	// go test's -timeout: the test binary panics, naming the tests
	// still running one a line ("\t\tTestX (3m0s)"); a minute later go
	// test kills it.
	timeoutPanic = regexp.MustCompile(`(?m)^panic: test timed out after .*\n(?:\s*running tests:\n)?((?:\t\t\S+ \(.*\)\n)*)`)
	killedLine   = regexp.MustCompile(`(?m)^\*\*\* Test killed.*: ran too long`)
)

// goEnv is the environment of every go command the check runs: this
// process's, with -trimpath added to GOFLAGS (as go env has it) so that
// the build cache serves every copy of the tree whatever its folder (go
// test's and the go builds the tests run themselves, which inherit
// GOFLAGS); -ldflags=-w: the binaries are linked without debug
// information, which nothing here reads; and -gcflags=gendex/...=-l:
// gendex's own packages, which each mutation rebuilds (the mutated one,
// those that import it, and the tested one with its tests), are compiled
// without inlining: the same program, the root package built in about
// half the CPU time and ingest/gen with its tests in about 4/5 (the
// standard library, built once, keeps its inlining).
func goEnv() ([]string, error) {
	out, err := exec.Command("go", "env", "GOFLAGS").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOFLAGS: %v", err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GOFLAGS=") {
			env = append(env, kv)
		}
	}
	return append(env, "GOFLAGS="+strings.TrimSpace(strings.TrimSpace(string(out))+" -trimpath -ldflags=-w -gcflags=gendex/...=-l")), nil
}

// warm builds, in the unmutated copy, every package the tests of ms
// import but the tested packages themselves and package main (each
// mutation rebuilds those), so that the workers start from a warm build
// cache rather than each building it.
func (r *runner) warm(ms []mutant) error {
	start := time.Now()
	args := []string{"list", "-deps", "-test", "-f", `{{if and (not .ForTest) (ne .Name "main")}}{{.ImportPath}}{{end}}`}
	seen := map[string]bool{}
	for _, m := range ms {
		for _, t := range m.tests {
			if !seen[t.pkg] {
				seen[t.pkg] = true
				args = append(args, t.pkg)
			}
		}
	}
	list := exec.CommandContext(r.ctx, "go", args...)
	list.Dir, list.Env = r.dir, r.env
	out, err := list.Output()
	if err != nil {
		return fmt.Errorf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	build := exec.CommandContext(r.ctx, "go", append([]string{"build"}, pkgs...)...)
	build.Dir, build.Env = r.dir, r.env
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build, before any mutation: %v\n%s", err, out)
	}
	cpu := build.ProcessState.UserTime() + build.ProcessState.SystemTime()
	fmt.Printf("build cache warmed: %d packages [%s, %s CPU]\n", len(pkgs), time.Since(start).Round(100*time.Millisecond),
		cpu.Round(100*time.Millisecond))
	return nil
}

// buildAllowance is how long a go test run may take beyond its -timeout
// (building the tree, and go test's own minute of grace) before the
// runner kills it as timed out.
const buildAllowance = 5 * time.Minute

// goTest runs t's tests in the copy, without -race (for speed) and
// without vet (a mutation may leave code vet dislikes).
func (r *runner) goTest(t testRun) outcome {
	ctx, cancel := context.WithTimeout(r.ctx, r.timeout+buildAllowance)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-v", "-count=1", "-vet=off", "-timeout", r.timeout.String(), "-run", t.run, t.pkg)
	cmd.Dir, cmd.Env = r.dir, r.env
	// Interrupted or past its deadline, the whole group goes: go test and
	// the test binaries and servers it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	o := outcome{output: out.String()}
	if cmd.ProcessState != nil {
		o.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if r.verbose {
		r.log.WriteString(o.output)
	}
	o.none = strings.Contains(o.output, "[no tests to run]") || strings.Contains(o.output, "testing: warning: no tests to run")
	lines := strings.Split(o.output, "\n")
	for i, l := range lines {
		if m := skipLine.FindStringSubmatch(l); m != nil {
			why := "" // -v prints t.Skip's message on the line before
			if i > 0 && strings.Contains(lines[i-1], "_test.go:") {
				why = " (" + strings.TrimSpace(lines[i-1]) + ")"
			}
			o.skips = append(o.skips, m[1]+why)
		}
	}
	for _, m := range failLine.FindAllStringSubmatch(o.output, -1) {
		o.failed = append(o.failed, m[1])
	}
	if m := timeoutPanic.FindStringSubmatch(o.output); m != nil {
		o.timedOut = true
		for _, l := range strings.Split(strings.TrimSpace(m[1]), "\n") {
			if name, _, _ := strings.Cut(strings.TrimSpace(l), " "); name != "" {
				o.running = append(o.running, name)
			}
		}
	}
	switch {
	case err == nil:
	case buildFailed.MatchString(o.output):
		o.other = "build failed"
	case o.timedOut:
	case killedLine.MatchString(o.output) || (ctx.Err() == context.DeadlineExceeded && r.ctx.Err() == nil):
		o.timedOut = true
	case len(o.failed) == 0 && strings.Contains(o.output, "panic:"):
		o.other = "panicked"
	case len(o.failed) == 0:
		o.other = err.Error()
	}
	return o
}

// baseline runs every entry's tests on the unmutated copy, one go test a
// package (the -run patterns of top-level tests joined; one of subtests,
// with a /, goes alone), and fails when one does not pass.
func (r *runner) baseline(ms []mutant) error {
	var pkgs []string
	runs := map[string][]string{}
	for _, m := range ms {
		for _, t := range m.tests {
			if runs[t.pkg] == nil {
				pkgs = append(pkgs, t.pkg)
			}
			if !slices.Contains(runs[t.pkg], t.run) {
				runs[t.pkg] = append(runs[t.pkg], t.run)
			}
		}
	}
	var all []testRun
	for _, pkg := range pkgs {
		var top []string // patterns of top-level tests join into one
		for _, run := range runs[pkg] {
			if strings.Contains(run, "/") {
				all = append(all, testRun{pkg, run})
			} else {
				top = append(top, run)
			}
		}
		if len(top) > 0 {
			all = append(all, testRun{pkg, "(" + strings.Join(top, ")|(") + ")"})
		}
	}
	for _, t := range all {
		start := time.Now()
		o := r.goTest(t)
		fmt.Print(r.takeLog())
		if o.timedOut {
			return fmt.Errorf("unmutated, %s times out (-timeout %s; running: %s): fix it first\n%s",
				t, r.timeout, strings.Join(o.running, " "), o.output)
		}
		if !o.passed() {
			return fmt.Errorf("unmutated, %s fails (%s%s): fix it first\n%s", t, strings.Join(o.failed, " "), o.other, o.output)
		}
		if o.none {
			return fmt.Errorf("%s runs no test: fix the entries' test: lines", t)
		}
		fmt.Printf("baseline: %s passes [%s]\n", t, time.Since(start).Round(100*time.Millisecond))
	}
	return nil
}

// takeLog returns the test output logged since the last call.
func (r *runner) takeLog() string {
	out := r.log.String()
	r.log.Reset()
	return out
}
