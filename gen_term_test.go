package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gendex/store/terminal"
)

// gen's live lines: the run's (gen: 1/1 servers up ... or, short, gen: 1/1
// up ...), a server's, a dataset's.
var (
	genHeadLine = regexp.MustCompile(`^gen: \d+/\d+ (servers )?up\b`)
	genLiveLine = regexp.MustCompile(`^(gen: \d+/\d+ (servers )?up\b|  (server )?(http://)?127\.0\.0\.1:\d+: |  (alpha_\w*|beta) \d+/\d+)`)
)

// TestGenRedrawsInPlace runs gen against a slow simulator in an 80x30
// terminal for several redraws, and reads the whole scrollback, wrapped
// rows joined: no live line is wider than the terminal, none stays behind
// (the block is there once, at the bottom, every other line a message
// that printed once), nothing but messages lies above it, each broken
// between words within the terminal's width. The terminal
// is then made 60 columns wide: the block follows. Ctrl-C's message goes
// above the block; when gen ends the block is gone and the summary
// follows the messages.
func TestGenRedrawsInPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gen in tmux")
	}
	bin := gendexBinary(t)
	t.Parallel()
	dir := t.TempDir()
	for _, name := range []string{"alpha_a_dataset_with_a_long_name", "beta"} {
		d := filepath.Join(dir, "prompts", name)
		os.MkdirAll(d, 0o755)
		var b strings.Builder
		for i := range 400 {
			fmt.Fprintf(&b, `{"id":"%s-%d","text":"say something"}`+"\n", name, i)
		}
		writePrompts(t, d, b.String())
	}
	tm := newTerm(t, dir)
	resize := func(cols int) {
		tm.tmux("resize-window", "-t", "t", "-x", fmt.Sprint(cols), "-y", "30")
	}
	resize(80)
	tm.typeLine(bin + " --db g.db gen --server sim --sim-decode-tps 50 --sim-metrics --concurrency 8 --max-new-tokens 32 --out out prompts")

	// The whole scrollback, wrapped rows joined into their line.
	lines := func() []string {
		out := strings.Split(tm.tmux("capture-pane", "-t", "t", "-p", "-J", "-S", "-"), "\n")
		for i, l := range out {
			out[i] = strings.TrimRight(l, " ")
		}
		for len(out) > 0 && out[len(out)-1] == "" {
			out = out[:len(out)-1]
		}
		return out
	}
	// heads returns the run's live lines in the scrollback.
	heads := func(ls []string) (n int, last string) {
		for _, l := range ls {
			if genHeadLine.MatchString(l) {
				n, last = n+1, l
			}
		}
		return n, last
	}
	// check finds the block once, at the bottom, every line of it within
	// cols; above it, messages only: the command, gen's messages.
	check := func(cols int, when string) {
		t.Helper()
		ls := lines()
		block := len(ls)
		for block > 0 && genLiveLine.MatchString(ls[block-1]) {
			block--
		}
		if n, _ := heads(ls); n != 1 || block == len(ls) || !genHeadLine.MatchString(ls[block]) {
			t.Fatalf("%s: %d lines of the run's status; want one, first in the block at the bottom:\n%s", when, n, strings.Join(ls, "\n"))
		}
		for _, l := range ls[block:] {
			if w := terminal.Width(l); w > cols {
				t.Errorf("%s: a live line of %d columns in a %d-column terminal: %q", when, w, cols, l)
			}
		}
		for i, l := range ls[:block] {
			// A message, or its continuation: broken between words, the
			// rest indented.
			message := strings.HasPrefix(l, "gen: ") ||
				strings.HasPrefix(l, "  ") && i > 0 && (strings.HasPrefix(ls[i-1], "gen: ") || strings.HasPrefix(ls[i-1], "  "))
			if l != "" && !strings.HasPrefix(l, "$ ") && (!message || genLiveLine.MatchString(l)) {
				t.Errorf("%s: above the block, a line that is no message (a live line left behind, or a piece of one): %q\n%s",
					when, l, strings.Join(ls, "\n"))
			}
			// Wrapped rows are joined: a line wider than the terminal is
			// one the terminal cut, wherever it fell (the messages came
			// at 80 columns).
			if message && terminal.Width(l) > 80 {
				t.Errorf("%s: a message of %d columns, cut by the terminal instead of between words: %q", when, terminal.Width(l), l)
			}
		}
	}
	// redraws waits until the run's line has changed n times, the last
	// time within cols (0: any width).
	redraws := func(n int, cols int) {
		t.Helper()
		_, prev := heads(lines())
		for seen := 0; seen < n; {
			tm.waitUntil(fmt.Sprintf("the live lines redrawn (%d of %d)", seen+1, n), func(string) bool {
				_, last := heads(lines())
				return last != "" && last != prev && (cols == 0 || terminal.Width(last) < cols)
			})
			_, prev = heads(lines())
			seen++
		}
	}
	redraws(5, 0)
	check(80, "at 80 columns")

	resize(60)
	redraws(3, 60)
	check(60, "made 60 columns wide")

	tm.send("C-c")
	summary := regexp.MustCompile(`(?m)^gen: \d+ answers? \(`)
	tm.waitUntil("gen's summary", func(string) bool { return summary.MatchString(strings.Join(lines(), "\n")) })
	tm.typeLine("echo ENDED")
	tm.waitUntil("the shell's prompt after gen", func(string) bool { return slices.Contains(lines(), "ENDED") })
	ls := lines()
	if n, last := heads(ls); n != 0 {
		t.Errorf("after gen ended, %d lines of the run's status stay (the last %q):\n%s", n, last, strings.Join(ls, "\n"))
	}
	for _, l := range ls {
		if genLiveLine.MatchString(l) {
			t.Errorf("after gen ended, a live line stays: %q", l)
		}
	}
}
