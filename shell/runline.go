package shell

import (
	"strings"

	"gendex/store/terminal"
)

// runLines is the run's state line (query.RunLine) within width columns:
// wrapped at spaces (terminal.WrapLines: a command in quotes kept whole
// when it fits), then a line still wider, which holds a word longer than
// a line (a path in a failed run's error, a long server URL or host
// name), broken at the edge, its rest on the next lines indented as a
// continuation (two columns, or as the line is). Nothing is cut: a failed run's whole error stays on the
// screen. width <= 0 keeps the line as it is.
func runLines(line string, width int) string {
	text := terminal.WrapLines(line+"\n", width)
	if width <= 0 {
		return text
	}
	var b strings.Builder
	for l := range strings.Lines(text) {
		body, nl := strings.CutSuffix(l, "\n")
		lead := body[:len(body)-len(strings.TrimLeft(body, " "))] // a continuation's
		if lead == "" {
			lead = "  "
		}
		for terminal.Width(body) > width && width > terminal.Width(lead) {
			head, rest := splitAt(body, width)
			b.WriteString(head + "\n")
			body = lead + rest
		}
		b.WriteString(body)
		if nl {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// splitAt splits s after its first width columns.
func splitAt(s string, width int) (head, rest string) {
	w := 0
	for i, r := range s {
		if w += terminal.Width(string(r)); w > width {
			return s[:i], s[i:]
		}
	}
	return s, ""
}
