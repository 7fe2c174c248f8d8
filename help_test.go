package main

import (
	"strings"
	"testing"

	"gendex/store/terminal"
)

// TestHelpFitsEighty: no line of 'gendex help' or 'gendex help COMMAND'
// is wider than 80 columns, and every command's help names its flags
// with two dashes, each with a sentence and its default. (The README
// section 'gendex help COMMAND' prints after it is TestHelpTopicsFitEighty's.)
func TestHelpFitsEighty(t *testing.T) {
	t.Parallel()
	check := func(args []string, out string) {
		for i, l := range strings.Split(out, "\n") {
			if w := terminal.Width(l); w > 80 {
				t.Errorf("gendex %s, line %d: %d columns: %s", strings.Join(args, " "), i+1, w, l)
			}
		}
	}
	args := []string{"help"}
	check(args, mustGendex(t, testEnv(nil), args...).stdout)
	for _, cmd := range commands {
		args := []string{"help", cmd.Name}
		out := commandHelp(t, cmd.Name, mustGendex(t, testEnv(nil), args...).stdout)
		check(args, out)
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "-") && !strings.HasPrefix(strings.TrimSpace(l), "--") {
				t.Errorf("gendex help %s: a flag with one dash: %s", cmd.Name, l)
			}
		}
	}
}

// TestHelpGroupsFlags: gen's flags come under headings by purpose, each
// with its default said.
func TestHelpGroupsFlags(t *testing.T) {
	t.Parallel()
	out := mustGendex(t, testEnv(nil), "help", "gen").stdout
	order := []string{"Servers and API:", "Sampling", "Run control:", "Training records:", "Live view and metrics:", "The built-in simulator (--server sim):"}
	at := 0
	for _, h := range order {
		i := strings.Index(out[at:], "\n"+h)
		if i < 0 {
			t.Fatalf("gendex help gen: no heading %q after the one before:\n%s", h, out)
		}
		at += i + 1
	}
	for _, want := range []string{
		"  --concurrency N         requests in flight. Default: 128.",
		"  --sim-decode-tps X      decode tokens/s per request (0: instant). Default: 0.",
		"  --grace DURATION        after an interrupt, how long to wait for the answers",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("gendex help gen lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Default: 0s") || strings.Contains(out, "m0s") {
		t.Errorf("a duration default written as Go prints it:\n%s", out)
	}
}
