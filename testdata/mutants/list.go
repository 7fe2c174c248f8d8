package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
