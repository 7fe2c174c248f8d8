package main

import (
	"path/filepath"
	"strings"
	"testing"

	"gendex/store/terminal"
)

// TestWatchFollowsAResize: watch in a real terminal fits its width and,
// when the window is made narrower, redraws at once at the new width (it
// refreshes only every 30 s here: the redraw is the resize's), every line
// within it; the shell's help fits too.
func TestWatchFollowsAResize(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary in tmux")
	}
	bin := gendexBinary(t)
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "g.db")
	mustRunGendex(t, bin, "--db", db, "ingest", root)
	tm := newTerm(t, dir)
	tm.typeLine(bin + " --db " + db + " shell")
	tm.waitFor("gendex>")
	tm.typeLine("watch 30")
	tm.waitFor("answers/s 5m") // 160 columns: every column, whole
	tm.tmux("resize-window", "-t", "t", "-x", "60", "-y", "48")
	// The visible screen only, wrapped lines joined: a line wider than
	// the pane would show as one long line.
	visible := func() string { return tm.tmux("capture-pane", "-t", "t", "-p", "-J") }
	tm.waitUntil("watch redrawn at 60 columns", func(string) bool {
		s := visible()
		return strings.Contains(s, "hidden:") && !strings.Contains(s, "answers/s 5m  ")
	})
	for _, l := range strings.Split(visible(), "\n") {
		if w := terminal.Width(strings.TrimRight(l, " ")); w > 60 {
			t.Errorf("a line of %d columns in a 60-column terminal: %q\n%s", w, l, visible())
		}
	}
	tm.send("C-c")
	tm.waitFor("^C")
	tm.typeLine("help")
	tm.waitFor("leave (or Ctrl-D)")
	for _, l := range strings.Split(visible(), "\n") {
		if w := terminal.Width(strings.TrimRight(l, " ")); w > 60 {
			t.Errorf("help: a line of %d columns in a 60-column terminal: %q", w, l)
		}
	}
	tm.send("C-d")
}
