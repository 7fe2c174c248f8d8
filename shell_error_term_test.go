package main

import (
	"path/filepath"
	"strings"
	"testing"

	"gendex/store/terminal"
)

// TestShellErrorWrapsInATerminal: in the interactive shell of a 50-column
// terminal, a long error breaks between words, each line within the
// terminal (captured with the terminal's own wrapping joined, a line the
// terminal broke mid-word would be one line wider than it).
func TestShellErrorWrapsInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary in tmux")
	}
	bin := gendexBinary(t)
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "g.db")
	indexShapes(t, bin, db)
	tm := newTerm(t, dir)
	tm.tmux("resize-window", "-t", "t", "-x", "50", "-y", "40")
	tm.typeLine(bin + " --db " + db + " shell")
	tm.waitFor("gendex>")
	tm.typeLine("progres")
	tm.waitFor("unknown")
	tm.typeLine("quit")
	tm.waitFor("$ ")
	visible := tm.tmux("capture-pane", "-t", "t", "-p", "-J")
	var msg []string
	in := false
	for _, l := range strings.Split(visible, "\n") {
		in = in || strings.HasPrefix(l, "gendex: ")
		if in && strings.HasPrefix(l, "gendex>") {
			break
		}
		if in {
			msg = append(msg, l)
			if w := terminal.Width(strings.TrimRight(l, " ")); w > 50 {
				t.Errorf("a line of the error %d columns wide in a 50-column terminal (broken where the terminal cut it): %q", w, l)
			}
		}
	}
	if len(msg) < 2 {
		t.Errorf("no long error on the screen:\n%s", visible)
	}
}
