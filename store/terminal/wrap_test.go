package terminal

import (
	"strings"
	"testing"
)

// TestWrapLines: lines wider than the width break between words, their
// continuations indented past the line's own indent; the rest is kept.
func TestWrapLines(t *testing.T) {
	in := "gen: short\n" +
		"gen: http://127.0.0.1:38249 is ready: SGLang, model sim-model, context length 32768\n" +
		"  B1_ids: 50/50 answered (50 this run), 0 errors, 0 still missing, 5 truncated -> /tmp/gendex-demo/B1_ids/raw_responses.jsonl\n" +
		"no newline at the end of this long line, which is still wrapped"
	want := "gen: short\n" +
		"gen: http://127.0.0.1:38249 is ready: SGLang, model sim-model,\n" +
		"  context length 32768\n" +
		"  B1_ids: 50/50 answered (50 this run), 0 errors, 0 still\n" +
		"    missing, 5 truncated ->\n" +
		"    /tmp/gendex-demo/B1_ids/raw_responses.jsonl\n" +
		"no newline at the end of this long line, which is still\n" +
		"  wrapped"
	if got := WrapLines(in, 62); got != want {
		t.Errorf("WrapLines at 62:\n%s\nwant:\n%s", got, want)
	}
	for _, l := range strings.Split(WrapLines(in, 62), "\n") {
		if Width(l) > 62 && !strings.Contains(l, "/tmp/") {
			t.Errorf("line wider than 62: %q", l)
		}
	}
	if got := WrapLines(in, 0); got != in {
		t.Errorf("width 0 changed the text: %q", got)
	}
	// A command in quotes stays whole on its line; one wider than a line,
	// or a quote never closed, is wrapped as words.
	msg := "gendex: the writer is not answering: it is stopped (Ctrl-Z or SIGSTOP): resume it with 'fg' in its terminal or 'kill -CONT 4929'\n"
	wantMsg := "gendex: the writer is not answering: it is stopped (Ctrl-Z or\n" +
		"  SIGSTOP): resume it with 'fg' in its terminal or\n" +
		"  'kill -CONT 4929'\n"
	if got := WrapLines(msg, 62); got != wantMsg {
		t.Errorf("WrapLines of a quoted command at 62:\n%s\nwant:\n%s", got, wantMsg)
	}
	if got := WrapLines("run 'a b c d e f' now or 'never\n", 9); got != "run 'a b\n  c d e\n  f' now\n  or\n  'never\n" {
		t.Errorf("a quote wider than a line, and one never closed: %q", got)
	}
	// A line that is wrapped has its runs of spaces made one.
	if got := WrapLines("a  b\n", 3); got != "a b\n" {
		t.Errorf("WrapLines(%q, 3) = %q", "a  b\n", got)
	}
}

// TestWrapLinesKeepsCommandsRunnable: a command a message gives on a line
// of its own, wider than the terminal, is wrapped with " \" at each line's
// end, so that pasted into a shell it is the one command it was; a
// sentence is not.
func TestWrapLinesKeepsCommandsRunnable(t *testing.T) {
	cmd := "mkdir -p /tmp/nc/sh/B4_sharegpt/sharded-2-ways && mv /tmp/nc/sh/B4_sharegpt/*.shard-*-of-0002.jsonl /tmp/nc/sh/B4_sharegpt/sharded-2-ways/"
	text := "Move them:\n    " + cmd + "\n  and a sentence long enough to be wrapped at forty columns here\n"
	got := WrapLines(text, 40)
	lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
	var joined []string
	in := false
	for _, l := range lines {
		if Width(l) > 40 && !strings.Contains(strings.TrimSpace(strings.TrimSuffix(l, " \\")), " ") {
			// a word wider than a line stays whole
		} else if Width(l) > 40 {
			t.Errorf("line wider than 40: %q", l)
		}
		switch {
		case strings.HasPrefix(l, "    mkdir"):
			in = true
			joined = append(joined, strings.TrimSpace(strings.TrimSuffix(l, " \\")))
		case in:
			joined = append(joined, strings.TrimSpace(strings.TrimSuffix(l, " \\")))
			in = strings.HasSuffix(l, " \\")
		default:
			if strings.HasSuffix(l, "\\") {
				t.Errorf("a sentence's line ends in a backslash: %q", l)
			}
		}
	}
	if strings.Join(joined, " ") != cmd {
		t.Errorf("the command, joined again: %q\nwant %q\n%s", strings.Join(joined, " "), cmd, got)
	}
}
