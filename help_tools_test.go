package main

import (
	"strings"
	"testing"

	"gendex/store/terminal"
)

// TestHelpTools: 'gendex help tools' is the tool conversations' topic, on
// its own (it was part of 'help gen'): the shapes it reads, the server
// flags, the pairing, every stop and what it means, the records and how
// to review them; within 80 columns, and listed by 'gendex help'.
func TestHelpTools(t *testing.T) {
	t.Parallel()
	r := gendex(t, testEnv(nil), "help", "tools")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "Tool conversations (agentic datasets)\n===") {
		t.Fatalf("gendex help tools: %s", r)
	}
	for _, want := range []string{"function_call", "observation", "tool_call_id", "--tool-call-parser",
		"--enable-auto-tool-choice", "--jinja", "Pairing rule", "other_tool", "more_calls", "no_call",
		"bad_arguments", "No stop where the data ends at the assistant's call", "Records.", "--format ids",
		"gendex web's answer page"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("gendex help tools does not say %q", want)
		}
	}
	for i, l := range strings.Split(r.stdout, "\n") {
		if w := terminal.Width(l); w > helpWidth {
			t.Errorf("gendex help tools, line %d: %d columns: %s", i+1, w, l)
		}
	}
	if gen := mustGendex(t, testEnv(nil), "help", "gen").stdout; strings.Contains(gen, "Pairing rule") {
		t.Error("gendex help gen still holds the tool conversations' topic")
	}
	if list := mustGendex(t, testEnv(nil), "help").stdout; !strings.Contains(list, "\n  tools ") {
		t.Errorf("gendex help does not list the topic tools:\n%s", list)
	}
}
