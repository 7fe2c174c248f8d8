package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/store/terminal"
)

// TestHelpPagesOnATerminal: on a terminal, a help longer than the
// terminal goes through $PAGER (here "sh pager.sh", a script that records
// it ran, then prints what it was given), its tables fitted to the
// terminal's width; a help that fits, PAGER=cat and PAGER set empty print
// directly; piped, help never pages.
func TestHelpPagesOnATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary in tmux")
	}
	bin := gendexBinary(t)
	t.Parallel()
	dir := t.TempDir()
	pager := shScript(t, filepath.Join(dir, "pager.sh"), "echo paged >> "+filepath.Join(dir, "used")+"\ncat\necho END-OF-PAGER\n")
	used := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "used"))
		return strings.Count(string(b), "paged")
	}
	tm := newTerm(t, dir)
	tm.tmux("resize-window", "-t", "t", "-x", "70", "-y", "40")
	visible := func() string { return tm.tmux("capture-pane", "-t", "t", "-p", "-J", "-S", "-3000") }

	// Long: through the pager, at the terminal's width.
	tm.typeLine("PAGER='" + pager + "' " + bin + " help formats; echo DONE-$((1))")
	tm.waitFor("DONE-1")
	if n := used(); n != 1 {
		t.Fatalf("help formats (longer than 40 lines) on a terminal: the pager ran %d times; want 1:\n%s", n, visible())
	}
	s := visible()
	if !strings.Contains(s, "END-OF-PAGER") || !strings.Contains(s, "shape: SGLang /generate") {
		t.Errorf("the pager did not show help formats, its table as a list at 70 columns:\n%s", s)
	}
	for _, l := range strings.Split(s, "\n") {
		if w := terminal.Width(strings.TrimRight(l, " ")); w > 70 && !strings.HasPrefix(l, "$ ") && !strings.HasPrefix(l, "    ") {
			t.Errorf("a line of %d columns on a 70-column terminal: %q", w, l)
		}
	}

	// Short, PAGER=cat, PAGER empty: printed directly.
	for i, line := range []string{
		"PAGER='" + pager + "' " + bin + " help export | cat; echo DONE-$((2))", // piped
		"PAGER=cat " + bin + " help export; echo DONE-$((3))",
		"PAGER= " + bin + " help export; echo DONE-$((4))",
	} {
		tm.typeLine("clear")
		tm.typeLine(line)
		tm.waitFor("DONE-" + string(rune('2'+i)))
		time.Sleep(100 * time.Millisecond)
		if n := used(); n != 1 {
			t.Errorf("%s: the pager ran (%d times in all)", line, n)
		}
	}
	tm.typeLine("clear")
	tm.typeLine("PAGER='" + pager + "' " + bin + " help drop; echo DONE-$((5))")
	tm.waitFor("DONE-5")
	if n := used(); n != 1 {
		t.Errorf("help drop (shorter than the terminal) went through the pager:\n%s", visible())
	}
}
