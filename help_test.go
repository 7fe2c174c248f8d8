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
		"  --concurrency N         requests in flight at most, over all servers: a hard",
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

func TestHelp(t *testing.T) {
	t.Parallel()
	r := mustGendex(t, testEnv(nil), "help")
	for _, s := range []string{"ingest", "query", "progress", "throughput", "missing DATASET", "show DATASET ID", "--db", "GENDEX_DB"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("help does not mention %q:\n%s", s, r.stdout)
		}
	}
	// Without a command the usage goes to stderr, not into piped data.
	if r := gendex(t, testEnv(nil)); r.stdout != "" || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("no command: usage should go to stderr\n%s", r)
	}
}

// TestCommandHelp: for every command in the table, 'gendex help NAME',
// 'gendex NAME --help' and 'gendex NAME -h' print the same help to stdout
// (its usage lines and summary from the table; 'gendex help NAME' then
// README's section, when NAME is a help topic too) and exit 0; a usage
// error of that command points at 'gendex help NAME'.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, cmd := range commands {
		t.Run(cmd.Name, func(t *testing.T) {
			r := mustGendex(t, testEnv(nil), "help", cmd.Name)
			// Help wraps its lines within 80 columns (TestHelpFitsEighty).
			words := strings.Join(strings.Fields(r.stdout), " ")
			if want := "usage: gendex " + cmd.Usage[0] + " "; !strings.HasPrefix(words, want) || !strings.Contains(words, " "+cmd.Summary+" ") || r.stderr != "" {
				t.Errorf("help %s: want stdout starting with %q and holding the summary\n%s", cmd.Name, want, r)
			}
			for _, h := range []string{"--help", "-h"} {
				if r2 := mustGendex(t, testEnv(nil), cmd.Name, h); r2.stdout != commandHelp(t, cmd.Name, r.stdout) {
					t.Errorf("%s %s differs from help %s\n%s", cmd.Name, h, cmd.Name, r2)
				}
			}
			if cmd.Name == "help" {
				return
			}
			u := gendex(t, testEnv(nil), cmd.Name, "--bogus")
			if u.code != 2 || !strings.Contains(u.stderr, "Run 'gendex help "+cmd.Name+"' for usage.") {
				t.Errorf("%s --bogus: want exit 2 pointing at 'gendex help %s'\n%s", cmd.Name, cmd.Name, u)
			}
		})
	}
	if r := gendex(t, testEnv(nil), "help", "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, "Run 'gendex help' for usage.") {
		t.Errorf("help of an unknown command: want exit 2 pointing at 'gendex help'\n%s", r)
	}
}
