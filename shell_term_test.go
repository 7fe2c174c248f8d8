package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gendex/query/live"
)

// These tests drive the real shell of the real binary in a real terminal:
// tmux.

type term struct {
	t    *testing.T
	sock string
}

// newTerm starts a 160x48 terminal running bash in dir, on a tmux server
// of the test's own.
func newTerm(t *testing.T, dir string, env ...string) *term {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux is not installed (.ci/run installs it)")
	}
	tm := &term{t: t, sock: filepath.Join(t.TempDir(), "tmux.sock")}
	cmd := append([]string{"env", "TERM=xterm-256color", "PS1=$ "}, env...)
	cmd = append(cmd, "bash", "--norc", "--noprofile")
	tm.tmux(append([]string{"-f", "/dev/null", "new-session", "-d", "-s", "t", "-x", "160", "-y", "48", "-c", dir}, cmd...)...)
	t.Cleanup(func() { exec.Command("tmux", "-S", tm.sock, "kill-server").Run() })
	tm.waitFor("$")
	return tm
}

func (tm *term) tmux(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.sock}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// send types keys: text, or tmux key names such as Enter, Tab, C-c, C-d, Up.
func (tm *term) send(keys ...string) { tm.tmux(append([]string{"send-keys", "-t", "t"}, keys...)...) }

// typeLine types text and Enter.
func (tm *term) typeLine(text string) {
	tm.send("-l", text)
	tm.send("Enter")
}

func (tm *term) screen() string { return tm.tmux("capture-pane", "-t", "t", "-p", "-S", "-300") }

// lastLine returns the last non-empty line of the screen.
func (tm *term) lastLine() string {
	ls := strings.Split(strings.TrimRight(tm.screen(), "\n "), "\n")
	return ls[len(ls)-1]
}

// waitUntil polls the screen until ok holds, failing the test after 30 s
// (a screen that never comes, not a measure of speed); what says what was
// awaited.
func (tm *term) waitUntil(what string, ok func(screen string) bool) {
	tm.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		s := tm.screen()
		if ok(s) {
			return
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the terminal never showed %s:\n%s", what, s)
		}
	}
}

// waitFor waits until the screen holds s.
func (tm *term) waitFor(s string) {
	tm.t.Helper()
	tm.waitUntil(strconv.Quote(s), func(screen string) bool { return strings.Contains(screen, s) })
}

// waitLastLine waits until the last non-empty line satisfies ok.
func (tm *term) waitLastLine(what string, ok func(line string) bool) {
	tm.t.Helper()
	tm.waitUntil("a last line "+what, func(string) bool { return ok(tm.lastLine()) })
}

// watchClock finds the time in watch's header; the greedy (?s).* makes it
// the newest header, as the screen is captured with its history.
var watchClock = regexp.MustCompile(`(?s).*(\d\d:\d\d:\d\d) +\(Ctrl-C to stop\)`)

func indexShapes(t *testing.T, bin, db string) {
	t.Helper()
	mustRunGendex(t, bin, "--db", db, "ingest", filepath.Join("testdata", "shapes", "demo"))
}

func TestShellInATerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary in tmux")
	}
	bin := gendexBinary(t)
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "g.db")
	indexShapes(t, bin, db)
	state := filepath.Join(dir, "state")
	tm := newTerm(t, dir, "XDG_STATE_HOME="+state)
	shellCmd := bin + " --db " + db + " shell"

	tm.typeLine("stty -a > before.txt")
	tm.typeLine(shellCmd)
	tm.waitFor("gendex>")

	// Completion of a question, then of a dataset name.
	tm.send("-l", "prog")
	tm.send("Tab")
	tm.waitFor("gendex> progress")
	tm.send("Enter")
	tm.waitFor("done_pct")
	tm.send("-l", "tokens de")
	tm.send("Tab")
	tm.waitFor("gendex> tokens demo")
	tm.send("Enter")
	tm.waitFor("unk_prompt") // tokens is wider than 160 columns: its headers are shortened
	tm.send("-l", "finish --fo")
	tm.send("Tab")
	tm.waitFor("finish --format")
	tm.send("-l", "js")
	tm.send("Tab")
	tm.send("Enter")
	tm.waitFor(`"stop": 8`) // testdata/shapes/demo: 8 answers finished with stop (one an Anthropic end_turn)

	// Ctrl-C at the prompt clears the line; the shell stays.
	tm.send("-l", "half a command")
	tm.send("C-c")
	tm.typeLine("datasets")
	tm.waitFor("files  prompts")

	// Ctrl-C stops watch, not the shell.
	// It is stopped once it has refreshed: its clock has moved.
	tm.typeLine("watch 0.3")
	var first string
	tm.waitUntil("watch refreshing", func(s string) bool {
		m := watchClock.FindStringSubmatch(s)
		if m == nil {
			return false
		}
		if first == "" {
			first = m[1]
		}
		return m[1] != first
	})
	tm.send("C-c")
	tm.waitFor("^C")
	tm.typeLine("errors")
	tm.waitFor("context_length_exceeded")

	// Ctrl-D leaves, and the terminal is as it was.
	// What is typed before bash's prompt is back can be read (and lost)
	// by the shell's buffered reader with the Ctrl-D: wait for the prompt.
	tm.send("C-d")
	tm.waitLastLine("bash's prompt after Ctrl-D", func(l string) bool { return l == "$" })
	tm.typeLine("stty -a > after.txt; cmp before.txt after.txt && echo TERMINAL-SAME")
	tm.waitFor("TERMINAL-SAME")

	// History survives into the next session, in a private file.
	hist := filepath.Join(state, "gendex", "history")
	fi, err := os.Stat(hist)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("history file: %v %v", fi, err)
	}
	tm.typeLine("clear")
	tm.typeLine(shellCmd)
	tm.waitFor("gendex>")
	tm.send("Up") // the last command of the previous session
	tm.waitLastLine(`ending in "gendex> errors"`, func(l string) bool { return strings.HasSuffix(strings.TrimSpace(l), "gendex> errors") })
	tm.send("Up")
	tm.waitLastLine(`holding "watch 0.3"`, func(l string) bool { return strings.Contains(l, "watch 0.3") })
	tm.send("C-c")
	tm.typeLine("quit")
	tm.waitLastLine("bash's prompt after quit", func(l string) bool { return l == "$" })
	tm.typeLine("echo LEFT")
	tm.waitLastLine("LEFT, printed by bash", func(l string) bool { return l == "$" && strings.Contains(tm.screen(), "\nLEFT\n") })
}

// TestShellWhileGenWrites: the shell answers from the database gen is
// writing at that very moment, through gen's socket.
func TestShellWhileGenWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gen and the binary in tmux")
	}
	bin := gendexBinary(t)
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "g.db")
	root := filepath.Join(dir, "prompts", "live")
	os.MkdirAll(root, 0o755)
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, `{"id":"p%05d","text":"say something"}`+"\n", i)
	}
	writePrompts(t, root, b.String())
	gen := startGendex(t, bin, "", "--db", db, "gen", "--server", "sim", "--sim-decode-tps", "100", "--concurrency", "16",
		"--out", filepath.Join(dir, "out"), filepath.Join(dir, "prompts"))
	defer func() { gen.Interrupt(); gen.Wait() }()
	waitFor(t, 60*time.Second, "gen's socket", func() bool { _, err := os.Stat(live.SocketPath(db)); return err == nil })
	tm := newTerm(t, dir)
	tm.typeLine(bin + " --db " + db + " shell")
	tm.waitFor("gendex>")
	tm.typeLine("progress")
	tm.waitFor(" live ")
	tm.typeLine("throughput --window 30s")
	tm.waitFor("records_per_s")
	if s := tm.screen(); strings.Contains(s, "locked") || strings.Contains(s, "in use") || strings.Contains(s, "gendex: ") {
		t.Errorf("the shell reported an error while gen runs:\n%s", s)
	}
	tm.send("C-d")
}
