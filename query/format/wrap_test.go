package format

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
	// A line that is wrapped has its runs of spaces made one.
	if got := WrapLines("a  b\n", 3); got != "a b\n" {
		t.Errorf("WrapLines(%q, 3) = %q", "a  b\n", got)
	}
}
