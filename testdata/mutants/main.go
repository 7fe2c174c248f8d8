// Command mutants checks that gendex's guards stay guarded: it applies
// each mutation of .ci/mutants.txt (a small, named weakening of the code
// behind one of README's Guarantees) to a copy of the tree, runs the tests
// the entry names, and fails when a mutation fails none of them (it
// survived: no test holds that guard any more; a -run that matches no test,
// or tests that skip, never count as catching it), when a mutation's
// original snippet is not found exactly once in its file (the code moved:
// the list must be updated, and the message says where its first line is
// now), when README.md does not name a mutation, or when a mutated tree
// does not build. The tests run without -race and without vet, for speed.
//
// A timeout is not a catch: on a loaded machine a slow test times out
// whether or not its mutation survived. A mutation whose tests timed out
// (go test's -timeout), none failing, runs again after the others, alone;
// if its tests time out again it is reported as TIMEOUT, with the tests
// that were running, and the check fails.
//
// The working tree is never touched: the files git knows (tracked, and
// untracked but not ignored) are copied to one temporary folder per worker
// (-j, 2 by default), and each worker applies its mutations to its own
// copy, one at a time, undoing each before the next. The copies share
// Go's build cache: they build with -trimpath, so that their folders do
// not enter the cache's keys, and the unmutated packages are built once,
// before the workers start. The mutations whose tests are in the root
// package (the longest) run first; each verdict is printed as it is
// known, with its wall and CPU time, the five slowest are named at the
// end, and the mutations not caught are listed after them in the list's
// order.
//
// Usage (from the repository's root; .ci/mutants runs it):
//
//	go run ./testdata/mutants [-list .ci/mutants.txt] [-only REGEXP] [-j N] [-baseline] [-find] [-keep] [-v]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

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
	env, err := goEnv()
	if err != nil {
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
		runners[w] = &runner{ctx: r.ctx, dir: dir, env: env, verbose: r.verbose, timeout: r.timeout}
	}
	if err := runners[0].warm(ms); err != nil {
		return err
	}
	if baseline {
		if err := runners[0].baseline(ms); err != nil {
			return err
		}
	}
	failed, cpu, err := runAll(runners, ms, list)
	if err != nil {
		return err
	}
	fmt.Printf("%d mutations in %s (%d at a time, %s CPU)\n", len(ms), time.Since(start).Round(time.Second), len(runners), cpu.Round(time.Second))
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d mutations not caught:\n  %s", len(failed), len(ms), strings.Join(failed, "\n  "))
	}
	return nil
}

// runAll hands ms to the runners (one mutation at a time each, in its own
// copy), those whose tests build the root package first (the longest:
// the root's tests build gendex too), and prints each verdict as soon as
// it is known. The mutations whose tests timed out, with none failing,
// then run again one at a time, alone on the machine: their verdicts are
// those of this second run, and a second timeout fails the check. It
// returns the mutations not caught (in list order) and the CPU time the
// tests took, or the context's error when interrupted (after every
// worker has stopped).
func runAll(runners []*runner, ms []mutant, list string) ([]string, time.Duration, error) {
	ctx := runners[0].ctx
	results := make([]result, len(ms))
	jobs, done := make(chan int), make(chan int)
	for _, r := range runners {
		go func() {
			for i := range jobs {
				if ctx.Err() == nil {
					start := time.Now()
					results[i] = r.mutate(ms[i])
					results[i].wall = time.Since(start)
					results[i].output = r.takeLog()
				}
				done <- i
			}
		}()
	}
	go func() {
		for _, i := range longestFirst(ms) {
			jobs <- i
		}
		close(jobs)
	}()
	var again []int // the mutations that timed out
	var cpu time.Duration
	for range ms {
		i := <-done
		if ctx.Err() != nil {
			continue
		}
		res := results[i]
		cpu += res.cpu
		fmt.Print(res.output)
		if res.timedOut {
			again = append(again, i)
			fmt.Printf("%2d/%d %s: runs again alone\n", i+1, len(ms), strings.Replace(res.line, "TIMEOUT ", "timeout ", 1))
		} else {
			fmt.Printf("%2d/%d %s\n", i+1, len(ms), res.line)
		}
	}
	if len(again) > 0 && ctx.Err() == nil {
		fmt.Printf("%d mutations timed out, none of their tests failing: each runs again, alone\n", len(again))
	}
	sort.Ints(again)
	for _, i := range again {
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		results[i] = runners[0].mutate(ms[i])
		results[i].wall = time.Since(start)
		cpu += results[i].cpu
		if res := &results[i]; res.timedOut {
			res.err = fmt.Errorf("%v, alone too; a timeout does not count as catching a mutation: make the test fail by "+
				"itself, with a deadline of its own well within -timeout, or point the entry at a test that does (%s)", res.err, ms[i].why)
		}
		fmt.Print(runners[0].takeLog())
		fmt.Printf("%2d/%d %s (alone)\n", i+1, len(ms), results[i].line)
	}
	if ctx.Err() == nil {
		fmt.Println(slowest(ms, results, 5))
	}
	var failed []string
	for i, res := range results {
		if res.err != nil {
			failed = append(failed, fmt.Sprintf("%s (%s:%d): %v", ms[i].name, list, ms[i].line, res.err))
		}
	}
	return failed, cpu, ctx.Err()
}

// slowest names the n mutations that took the longest (wall time), the
// longest first: where to look when the check grows slow.
func slowest(ms []mutant, results []result, n int) string {
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return results[order[a]].wall > results[order[b]].wall })
	var parts []string
	for _, i := range order[:min(n, len(order))] {
		parts = append(parts, fmt.Sprintf("%s %s", ms[i].name, results[i].wall.Round(100*time.Millisecond)))
	}
	return "slowest: " + strings.Join(parts, ", ")
}

// longestFirst orders ms's indexes for the runners: the mutations whose
// tests are in the root package first (each builds the root's large test
// package and the gendex binary), then the others, each in list order;
// so no worker is left with a long one while the other has finished.
func longestFirst(ms []mutant) []int {
	var root, rest []int
	for i, m := range ms {
		if slices.ContainsFunc(m.tests, func(t testRun) bool { return t.pkg == "." }) {
			root = append(root, i)
		} else {
			rest = append(rest, i)
		}
	}
	return append(root, rest...)
}
