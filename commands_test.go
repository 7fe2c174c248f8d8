package main

import (
	"os"
	"strings"
	"testing"
)

// TestCommandListInDocs: README's block under "## Commands" and the
// package doc comment's block under "Commands:" are exactly the list the
// command table makes (writeCommandList), so neither can drift from it.
func TestCommandListInDocs(t *testing.T) {
	t.Parallel()
	var want strings.Builder
	writeCommandList(&want, "")
	for _, tc := range []struct{ file, heading, indent string }{
		{"README.md", "## Commands", "    "}, // a Markdown code block
		{"main.go", "// Commands:", "//\t"},  // a doc comment code block
	} {
		data, err := os.ReadFile(tc.file)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := blockAfter(string(data), tc.heading, tc.indent)
		if !ok {
			t.Errorf("%s: no block of lines starting with %q after %q and a blank line", tc.file, tc.indent, tc.heading)
			continue
		}
		if got != want.String() {
			t.Errorf("%s: the block under %q is not the command table's list; want, each line after %q:\n%s--- got:\n%s",
				tc.file, tc.heading, tc.indent, want.String(), got)
		}
	}
}

// blockAfter returns the lines that follow the line heading and one blank
// line (in a comment, "//" alone), up to the first line that does not start
// with indent, each with indent cut off; ok is false when there are none.
func blockAfter(text, heading, indent string) (block string, ok bool) {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if l != heading {
			continue
		}
		if i+1 >= len(lines) || strings.TrimSpace(strings.TrimPrefix(lines[i+1], "//")) != "" {
			return "", false
		}
		var b strings.Builder
		for _, l := range lines[i+2:] {
			if !strings.HasPrefix(l, indent) {
				break
			}
			b.WriteString(strings.TrimPrefix(l, indent) + "\n")
		}
		return b.String(), b.Len() > 0
	}
	return "", false
}
