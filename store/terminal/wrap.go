package terminal

import "strings"

// Wrap breaks text into lines within width columns at spaces, the first
// line starting with first and the others with indent; a word wider than
// a line stays whole on its own line. width <= 0 is one line.
func Wrap(text string, width int, first, indent string) []string {
	return wrapWords(strings.Fields(text), width, first, indent)
}

func wrapWords(words []string, width int, first, indent string) []string {
	var lines []string
	line := first
	empty := true
	for _, w := range words {
		if !empty && width > 0 && Width(line)+1+Width(w) > width {
			lines = append(lines, line)
			line, empty = indent, true
		}
		if !empty {
			line += " "
		}
		line += w
		empty = false
	}
	return append(lines, line)
}

// WrapLines wraps each line of text wider than width at spaces, its
// continuations indented two columns past the line's own indent, so a
// message on a terminal breaks between words instead of where the
// terminal cuts it (a wrapped line's runs of spaces become one). A span in
// single quotes (a command to run: 'kill -CONT 42') is kept on one line,
// whole for copying, unless it is wider than a line; a command on a line of
// its own (isCommandLine) is wrapped with " \\" at its lines' ends, so it
// still pastes into a shell as one. Lines that fit, and all of text when
// width <= 0, are kept byte for byte.
func WrapLines(text string, width int) string {
	if width <= 0 {
		return text
	}
	var b strings.Builder
	for line := range strings.Lines(text) {
		body, nl := strings.CutSuffix(line, "\n")
		if Width(body) <= width {
			b.WriteString(line)
			continue
		}
		lead := body[:len(body)-len(strings.TrimLeft(body, " "))]
		if isCommandLine(body, lead) {
			// A command given to run, on a line of its own: its lines end
			// in " \\", so that it pastes into a shell as one command.
			lines := wrapWords(quotedFields(body, width-len(lead)-4), width-2, lead, lead+"  ")
			for i, l := range lines {
				if i > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(l)
				if i < len(lines)-1 {
					b.WriteString(" \\")
				}
			}
		} else {
			for i, l := range wrapWords(quotedFields(body, width-len(lead)-2), width, lead, lead+"  ") {
				if i > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(l)
			}
		}
		if nl {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// isCommandLine reports whether line (indented by lead) is a command that a
// message gives to run: indented four columns or more, and begun by one of
// the commands gendex's messages give (gendex, mkdir, mv, cd, kill).
func isCommandLine(line, lead string) bool {
	if len(lead) < 4 {
		return false
	}
	word, _, _ := strings.Cut(line[len(lead):], " ")
	switch word {
	case "gendex", "mkdir", "mv", "cd", "kill":
		return true
	}
	return false
}

// quotedFields is strings.Fields(s), except that a span from a word that
// opens a single quote to the word that closes it is one field, when
// that span fits in width columns (else its words stay apart).
func quotedFields(s string, width int) []string {
	words := strings.Fields(s)
	var out []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		if strings.HasPrefix(w, "'") && !strings.Contains(w[1:], "'") {
			for j := i + 1; j < len(words); j++ {
				if strings.Contains(words[j], "'") {
					if span := strings.Join(words[i:j+1], " "); Width(span) <= width {
						out = append(out, span)
						i = j
						w = ""
					}
					break
				}
			}
		}
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}
