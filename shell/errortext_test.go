package shell

import (
	"errors"
	"strings"
	"testing"

	"gendex/store/terminal"
)

// TestErrorTextWrapsAtWords: a long error in the interactive shell breaks
// between words within the terminal's width (a column to spare), every
// word kept whole and in order, a quoted command on one line; with no
// width it is one line.
func TestErrorTextWrapsAtWords(t *testing.T) {
	msg := `usage: unknown question "progres" (want one of progress, tokens, throughput, series, spec, server, events, missing, finish, errors, datasets, files, shards, list, show); run 'gendex query progress --format tsv' to see every column`
	err := errors.New(msg)
	for _, width := range []int{40, 60, 80} {
		out := errorText(err, width)
		if !strings.HasSuffix(out, "\n") || !strings.HasPrefix(out, "gendex: unknown question") {
			t.Errorf("width %d: %q", width, out)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) < 2 {
			t.Errorf("width %d: one line of %d columns", width, terminal.Width(out))
		}
		for _, l := range lines {
			if terminal.Width(l) > width-1 {
				t.Errorf("width %d: a line of %d columns: %q", width, terminal.Width(l), l)
			}
		}
		if got, want := strings.Join(strings.Fields(out), " "), "gendex: "+strings.TrimPrefix(msg, "usage: "); got != want {
			t.Errorf("width %d: the words changed:\n%s\nwant %s", width, got, want)
		}
		if !strings.Contains(out, "'gendex query progress --format tsv'") {
			t.Errorf("width %d: the quoted command is split:\n%s", width, out)
		}
	}
	if out := errorText(err, 0); strings.Count(out, "\n") != 1 {
		t.Errorf("no width: %q", out)
	}
}
