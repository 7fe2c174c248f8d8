// Command mutants checks that gendex's guards stay guarded: it applies
// each mutation of .ci/mutants.txt (a small, named weakening of the code
// behind one of README's Guarantees) to a copy of the tree, runs the tests
// the entry names, and fails when a mutation fails none of them (it
// survived: no test holds that guard any more; a -run that matches no test,
// or tests that skip, never count as catching it), when a mutation's
// original snippet is not found exactly once in its file (the code moved:
// the list must be updated, and the message says where its first line is
// now), when README.md does not name a mutation, or when a mutated tree
// does not build. The tests run without -race and without vet, for speed;
// a test that times out (-timeout) counts as catching its mutation.
//
// The working tree is never touched: the files git knows (tracked, and
// untracked but not ignored) are copied to one temporary folder per worker
// (-j, 2 by default; they share Go's build cache), and each worker applies
// its mutations to its own copy, one at a time, undoing each before the
// next. The verdicts are printed in the list's order.
//
// Usage (from the repository's root; .ci/mutants runs it):
//
//	go run ./testdata/mutants [-list .ci/mutants.txt] [-only REGEXP] [-j N] [-baseline] [-find] [-keep] [-v]
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A mutant is one entry of the list.
type mutant struct {
	name, promise, why, file string
	line                     int // of its "==" line in the list
	tests                    []testRun
	original, mutated        string
}

// A testRun is a package and the -run pattern of the tests that must
// catch a mutant there.
type testRun struct {
	pkg, run string
}

func (t testRun) String() string { return fmt.Sprintf("go test -run '%s' %s", t.run, t.pkg) }

func main() {
	list := flag.String("list", ".ci/mutants.txt", "the list of mutations")
	only := flag.String("only", "", "run only the mutations whose name matches this regular expression")
	baseline := flag.Bool("baseline", false, "first run each package's tests on the unmutated copy: they must pass")
	keep := flag.Bool("keep", false, "keep the copies of the tree (their paths are printed)")
	workers := flag.Int("j", 2, "how many mutations run at once, each in its own copy of the tree")
	verbose := flag.Bool("v", false, "print the output of every test run")
	find := flag.Bool("find", false, "only check that every original snippet is found once and README names every mutation")
	timeout := flag.Duration("timeout", 3*time.Minute, "go test's -timeout for one mutation's tests")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *find {
		ms, err := parseList(*list)
		if err == nil {
			err = findAll(*list, ms)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "mutants:", err)
			os.Exit(1)
		}
		fmt.Printf("every snippet of %s's %d mutations is found once\n", *list, len(ms))
		return
	}
	if *workers < 1 {
		fmt.Fprintln(os.Stderr, "mutants: -j wants 1 or more workers")
		os.Exit(2)
	}
	r := &runner{ctx: ctx, verbose: *verbose, timeout: *timeout}
	if err := check(r, *list, *only, *workers, *baseline, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

// check runs the mutations of list (those matching only) on workers
// copies of the tree, each with a runner set as r is.
func check(r *runner, list, only string, workers int, baseline, keep bool) error {
	start := time.Now()
	ms, err := parseList(list)
	if err != nil {
		return err
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			return fmt.Errorf("-only: %v", err)
		}
		var kept []mutant
		for _, m := range ms {
			if re.MatchString(m.name) {
				kept = append(kept, m)
			}
		}
		if ms = kept; len(ms) == 0 {
			return fmt.Errorf("-only %q matches no mutation of %s", only, list)
		}
	}
	// Every snippet is looked up before anything runs: a list that no
	// longer fits the code fails at once, naming every entry to update.
	if err := findAll(list, ms); err != nil {
		return err
	}
	runners := make([]*runner, min(workers, len(ms)))
	for w := range runners {
		dir, err := copyTree()
		if err != nil {
			return err
		}
		if keep {
			fmt.Printf("copy %d of the tree: %s\n", w+1, dir)
		} else {
			defer os.RemoveAll(dir)
		}
		runners[w] = &runner{ctx: r.ctx, dir: dir, verbose: r.verbose, timeout: r.timeout}
	}
	if baseline {
		if err := runners[0].baseline(ms); err != nil {
			return err
		}
	}
	failed, err := runAll(runners, ms, list)
	if err != nil {
		return err
	}
	fmt.Printf("%d mutations in %s (%d at a time)\n", len(ms), time.Since(start).Round(time.Second), len(runners))
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d mutations not caught:\n  %s", len(failed), len(ms), strings.Join(failed, "\n  "))
	}
	return nil
}

// A result is what mutating one entry gave: the line to print, the
// tests' output (with -v) and an error when it was not caught.
type result struct {
	line, output string
	err          error
}

// runAll hands ms to the runners (one mutation at a time each, in its own
// copy) and prints each verdict in list order as soon as it and those
// before it are done. It returns the mutations not caught, or the
// context's error when interrupted (after every worker has stopped).
func runAll(runners []*runner, ms []mutant, list string) ([]string, error) {
	ctx := runners[0].ctx
	results := make([]result, len(ms))
	jobs, done := make(chan int), make(chan int)
	for _, r := range runners {
		go func() {
			for i := range jobs {
				if ctx.Err() == nil {
					line, err := r.mutate(ms[i])
					results[i] = result{line, r.takeLog(), err}
				}
				done <- i
			}
		}()
	}
	go func() {
		for i := range ms {
			jobs <- i
		}
		close(jobs)
	}()
	var failed []string
	finished := make([]bool, len(ms))
	next := 0
	for range ms {
		finished[<-done] = true
		for ; next < len(ms) && finished[next]; next++ {
			if ctx.Err() != nil {
				continue
			}
			res, m := results[next], ms[next]
			fmt.Print(res.output)
			fmt.Printf("%2d/%d %s\n", next+1, len(ms), res.line)
			if res.err != nil {
				failed = append(failed, fmt.Sprintf("%s (%s:%d): %v", m.name, list, m.line, res.err))
			}
		}
	}
	return failed, ctx.Err()
}

// parseList reads the list: entries of the form
//
//	== NAME
//	promise: ...
//	why:     ...
//	file:    PATH
//	test:    PACKAGE REGEXP      (one or more)
//	--- original
//	<the exact lines, as in the file>
//	+++ mutated
//	<the lines that replace them>
//
// Lines starting with # are comments, anywhere (no line of Go starts
// with #); a snippet's blank lines at its ends are dropped.
func parseList(path string) ([]mutant, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var ms []mutant
	var cur *mutant
	var block *[]string
	var orig, mut []string
	finish := func() error {
		if cur == nil {
			return nil
		}
		cur.original = strings.Join(trimBlank(orig), "\n")
		cur.mutated = strings.Join(trimBlank(mut), "\n")
		switch {
		case cur.promise == "" || cur.file == "" || len(cur.tests) == 0:
			return fmt.Errorf("%s:%d: %s wants promise:, file: and test: lines", path, cur.line, cur.name)
		case cur.original == "":
			return fmt.Errorf("%s:%d: %s has no '--- original' snippet", path, cur.line, cur.name)
		case cur.original == cur.mutated:
			return fmt.Errorf("%s:%d: %s's mutated snippet is its original", path, cur.line, cur.name)
		}
		ms = append(ms, *cur)
		return nil
	}
	seen := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		switch {
		case strings.HasPrefix(line, "== "):
			if err := finish(); err != nil {
				return nil, err
			}
			name := strings.TrimSpace(line[3:])
			if at, dup := seen[name]; dup {
				return nil, fmt.Errorf("%s:%d: %s is also the name at line %d", path, n, name, at)
			}
			seen[name] = n
			cur, block, orig, mut = &mutant{name: name, line: n}, nil, nil, nil
		case strings.HasPrefix(line, "#"): // no line of Go starts with #
		case cur == nil:
			if strings.TrimSpace(line) != "" {
				return nil, fmt.Errorf("%s:%d: %q before the first '== NAME'", path, n, line)
			}
		case line == "--- original":
			block = &orig
		case line == "+++ mutated":
			block = &mut
		case block != nil:
			*block = append(*block, line)
		case strings.TrimSpace(line) == "":
		default:
			key, val, ok := strings.Cut(line, ":")
			val = strings.TrimSpace(val)
			switch {
			case !ok:
				return nil, fmt.Errorf("%s:%d: %q: want 'key: value'", path, n, line)
			case key == "promise":
				cur.promise = val
			case key == "why":
				cur.why = val
			case key == "file":
				cur.file = val
			case key == "test":
				pkg, run, ok := strings.Cut(val, " ")
				if !ok || strings.TrimSpace(run) == "" {
					return nil, fmt.Errorf("%s:%d: test: wants a package and a -run pattern", path, n)
				}
				cur.tests = append(cur.tests, testRun{pkg, strings.TrimSpace(run)})
			default:
				return nil, fmt.Errorf("%s:%d: unknown key %q", path, n, key)
			}
		}
	}
	if err := finish(); err != nil {
		return nil, err
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("%s: no mutation", path)
	}
	return ms, nil
}

// trimBlank drops the blank lines at both ends of a snippet.
func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// findAll checks that each original snippet is in its file exactly once,
// and that README names each mutation.
func findAll(list string, ms []mutant) error {
	var moved []string
	for _, m := range ms {
		data, err := os.ReadFile(m.file)
		if err != nil {
			moved = append(moved, fmt.Sprintf("%s (%s:%d): %v; if the guard moved to another file, change the entry's file: line",
				m.name, list, m.line, err))
			continue
		}
		if n := bytes.Count(data, []byte(m.original)); n != 1 {
			moved = append(moved, fmt.Sprintf("%s (%s:%d): its '--- original' is found %d times in %s, not once; %s\n%s",
				m.name, list, m.line, n, m.file, whereNow(m, data), indent(m.original)))
		}
	}
	if len(moved) > 0 {
		return fmt.Errorf("the code of %d mutations moved: update %s (each entry's '--- original' must be in its file exactly once, "+
			"tabs included; copy the guard's lines as they are now, make the same weakening in '+++ mutated', and check the "+
			"entry's tests still catch it: .ci/mutants -baseline -only '^NAME$')\n%s", len(moved), list, strings.Join(moved, "\n"))
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		return err
	}
	var unnamed []string
	for _, m := range ms {
		if !bytes.Contains(readme, []byte("`"+m.name+"`")) {
			unnamed = append(unnamed, m.name)
		}
	}
	if len(unnamed) > 0 {
		return fmt.Errorf("README.md's Guarantees does not name the mutations %s: add each, in backquotes, to its promise's line",
			strings.Join(unnamed, ", "))
	}
	return nil
}

// whereNow says where m's original snippet may have gone: the lines of
// data (its file) that hold its first line, else the Go files of the tree
// that do.
func whereNow(m mutant, data []byte) string {
	first := ""
	for _, l := range strings.Split(m.original, "\n") {
		if first = strings.TrimSpace(l); first != "" {
			break
		}
	}
	var at []string
	for i, l := range strings.Split(string(data), "\n") {
		if strings.Contains(l, first) {
			at = append(at, strconv.Itoa(i+1))
		}
	}
	switch {
	case len(at) > 1:
		return fmt.Sprintf("its first line is at lines %s of %s: add a line around it to the snippet, or take a more telling one, "+
			"so that it is found once", strings.Join(at, ", "), m.file)
	case len(at) == 1:
		return fmt.Sprintf("its first line is at %s:%s, but the lines after it (or its indentation) changed: copy them again", m.file, at[0])
	}
	out, _ := exec.Command("git", "grep", "-n", "-F", "-e", first, "--", "*.go", ":(exclude)*_test.go").Output()
	if len(out) > 0 {
		var where []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f, rest, ok := strings.Cut(l, ":"); ok {
				n, _, _ := strings.Cut(rest, ":")
				where = append(where, f+":"+n)
			}
		}
		return fmt.Sprintf("its first line is now at %s: change the entry's file: line (and its test:, if the guard's tests moved)",
			strings.Join(where, ", "))
	}
	return fmt.Sprintf("its first line %q is in no Go file of the tree: the guard was rewritten; find where the promise %q is "+
		"kept now and write the entry anew (never drop an entry without saying why in README's Guarantees)", first, m.promise)
}

func indent(s string) string {
	return "\t| " + strings.ReplaceAll(s, "\n", "\n\t| ")
}

// copyTree copies the files git knows (tracked, or untracked and not
// ignored) to a new temporary folder; without git, every file but .git's.
func copyTree() (string, error) {
	dir, err := os.MkdirTemp("", "gendex-mutants-")
	if err != nil {
		return "", err
	}
	var files []string
	if out, err := exec.Command("git", "ls-files", "-z", "-c", "-o", "--exclude-standard").Output(); err == nil {
		for _, f := range strings.Split(string(out), "\x00") {
			if f != "" {
				files = append(files, f)
			}
		}
	} else {
		err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == ".git" {
				return filepath.SkipDir
			}
			if d.Type().IsRegular() {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	for _, f := range files {
		if err := copyFile(f, filepath.Join(dir, f)); err != nil {
			os.RemoveAll(dir)
			return "", err
		}
	}
	return dir, nil
}

func copyFile(from, to string) error {
	fi, err := os.Lstat(from)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted but not yet committed
	}
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

type runner struct {
	ctx     context.Context
	dir     string
	verbose bool
	timeout time.Duration
	log     strings.Builder // with verbose, the output of the test runs since the last take
}

// outcome is what one go test run said.
type outcome struct {
	failed []string // the tests that failed, as --- FAIL names them
	other  string   // the package failed without a failing test: why
	output string
	none   bool     // -run matched no test
	skips  []string // the tests that skipped, with why
}

var (
	failLine    = regexp.MustCompile(`(?m)^\s*--- FAIL: (\S+)`)
	skipLine    = regexp.MustCompile(`^\s*--- SKIP: (\S+)`)
	buildFailed = regexp.MustCompile(`(?m)^FAIL\s+\S+ \[(build|setup) failed\]|^# \S+`)
)

// goTest runs t's tests in the copy, without -race (for speed) and
// without vet (a mutation may leave code vet dislikes).
func (r *runner) goTest(t testRun) outcome {
	cmd := exec.CommandContext(r.ctx, "go", "test", "-v", "-count=1", "-vet=off", "-timeout", r.timeout.String(), "-run", t.run, t.pkg)
	cmd.Dir = r.dir
	// Interrupted, the whole group goes: go test and the test binaries
	// and servers it started.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	o := outcome{output: out.String()}
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
	switch {
	case err == nil:
	case buildFailed.MatchString(o.output):
		o.other = "build failed"
	case strings.Contains(o.output, "panic: test timed out"):
		o.other = "timed out"
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
		if len(o.failed) > 0 || o.other != "" {
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

// mutate applies m to the copy, runs its tests and undoes it. It returns
// the line to print, and an error when m was not caught.
func (r *runner) mutate(m mutant) (string, error) {
	path := filepath.Join(r.dir, m.file)
	orig, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if bytes.Count(orig, []byte(m.original)) != 1 {
		return "", fmt.Errorf("the copy's %s differs from the tree's", m.file)
	}
	mutated := bytes.Replace(orig, []byte(m.original), []byte(m.mutated), 1)
	if err := os.WriteFile(path, mutated, 0o644); err != nil {
		return "", err
	}
	defer os.WriteFile(path, orig, 0o644)
	start := time.Now()
	var caught, notes []string
	var lastOutput string
	var notRun []string // test runs whose -run matched no test
	var skipped []string
	broken := false
	for _, t := range m.tests {
		o := r.goTest(t)
		lastOutput = o.output
		if o.none {
			notRun = append(notRun, t.String())
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
	}
	took := time.Since(start).Round(100 * time.Millisecond)
	head := fmt.Sprintf("%-26s %-28s", m.name, m.file)
	switch {
	case broken:
		return "BROKEN   " + head, fmt.Errorf("the mutated tree does not build: fix the entry's '+++ mutated' snippet\n%s", lastOutput)
	case len(caught) > 0 || len(notes) > 0:
		return fmt.Sprintf("caught   %s by %s [%s] (%s)", head, strings.Join(append(caught, notes...), ", "), took, m.promise), nil
	}
	if len(notRun) > 0 {
		return fmt.Sprintf("SURVIVED %s [%s] (%s)", head, took, m.promise),
			fmt.Errorf("survived: %s ran no test: fix the entry's test: line", strings.Join(notRun, "; "))
	}
	if len(skipped) > 0 {
		return fmt.Sprintf("SURVIVED %s [%s] (%s)", head, took, m.promise),
			fmt.Errorf("survived, but tests skipped: %s; run the check as CI does", strings.Join(skipped, "; "))
	}
	var runs []string
	for _, t := range m.tests {
		runs = append(runs, t.String())
	}
	return fmt.Sprintf("SURVIVED %s [%s] (%s)", head, took, m.promise),
		fmt.Errorf("survived: no test failed (%s); the guard lost its test (%s): add one that fails with it, or point the entry at the test that does",
			strings.Join(runs, "; "), m.why)
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
