package gen

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/olekukonko/tablewriter/pkg/twwidth"
)

// A live line is a status line in parts, so that a terminal too narrow
// for it gets it shortened in a chosen order instead of wrapped: a wrapped
// line takes more rows than the redraw moves up over, and what it leaves
// behind stays in the scrollback.
type liveLine []part

// A part of a live line: its text (with the separator before it, ", "),
// and how a narrow terminal gives it up.
type part struct {
	text string
	// short replaces text when the whole line does not fit ("": keep text).
	short string
	// drop orders the dropping once every part is short: the highest
	// first, the rightmost first among equals; 0 is never dropped.
	drop int
	// flex marks a name (a dataset, a server) that is cut with … down to
	// flexMin columns when the line fits no other way.
	flex bool
}

// flexMin is the fewest columns a cut name keeps.
const flexMin = 8

// String is the whole line, as the log off a terminal has it.
func (l liveLine) String() string {
	var b strings.Builder
	for _, p := range l {
		b.WriteString(p.text)
	}
	return b.String()
}

// fit returns the line within width columns: whole when it fits (or width
// <= 0); else parts made short one at a time in their drop order (the
// parts never dropped last), then parts dropped in that order, then the
// names cut, and, as a last resort, the line cut with ….
func (l liveLine) fit(width int) string {
	text := make([]string, len(l))
	for i, p := range l {
		text[i] = printableText(p.text)
	}
	line := func() string { return strings.Join(text, "") }
	if width <= 0 || textWidth(line()) <= width {
		return line()
	}
	// pick returns the part of the highest drop among those ok says, the
	// rightmost among equals, a part never dropped (0) after all others;
	// -1 when none.
	pick := func(ok func(i int) bool) int {
		rank := func(i int) int {
			if l[i].drop == 0 {
				return -1
			}
			return l[i].drop
		}
		best := -1
		for i := len(l) - 1; i >= 0; i-- {
			if ok(i) && (best < 0 || rank(i) > rank(best)) {
				best = i
			}
		}
		return best
	}
	shortened := make([]bool, len(l))
	for textWidth(line()) > width {
		i := pick(func(i int) bool { return l[i].short != "" && !shortened[i] })
		if i < 0 {
			break
		}
		text[i], shortened[i] = printableText(l[i].short), true
	}
	for textWidth(line()) > width {
		i := pick(func(i int) bool { return text[i] != "" && l[i].drop > 0 })
		if i < 0 {
			break
		}
		text[i] = ""
	}
	for over := textWidth(line()) - width; over > 0; over = textWidth(line()) - width {
		widest := -1
		for i, p := range l {
			if p.flex && textWidth(text[i]) > flexMin && (widest < 0 || textWidth(text[i]) > textWidth(text[widest])) {
				widest = i
			}
		}
		if widest < 0 {
			break
		}
		text[widest] = cutText(text[widest], max(flexMin, textWidth(text[widest])-over))
	}
	return cutText(line(), width)
}

// textWidth is the columns s takes on a terminal.
func textWidth(s string) int { return twwidth.Width(s) }

// cutText returns s within width columns, its end replaced by … when it
// is wider.
func cutText(s string, width int) string {
	if textWidth(s) <= width {
		return s
	}
	if width <= 1 {
		return strings.Repeat("…", max(width, 0))
	}
	out := twwidth.Truncate(s, width-1) + "…"
	for textWidth(out) > width { // a wide rune where the cut falls
		rs := []rune(out)
		out = string(rs[:len(rs)-2]) + "…"
	}
	return out
}

// printableText replaces what would move the cursor (a newline or a tab
// in an error message, an escape) with a space: a live line takes exactly
// one row.
func printableText(s string) string {
	if strings.IndexFunc(s, notPrintable) < 0 {
		return s
	}
	return strings.Map(func(r rune) rune {
		if notPrintable(r) {
			return ' '
		}
		return r
	}, s)
}

func notPrintable(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }

// counted says n things in English: "1 dataset", "2 datasets", "0 errors".
func counted[N int | int64 | uint64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprint(n) + " " + many
}

// splitTop splits s at the commas (", ") outside parentheses and quotes:
// "up, 3 running, 20 retried (last HTTP 500 'a, b', 3s ago)" is three
// items.
func splitTop(s string) []string {
	var items []string
	depth, quote, start := 0, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\'':
			quote = !quote
		case quote:
		case c == '(':
			depth++
		case c == ')':
			depth = max(depth-1, 0)
		case c == ',' && depth == 0 && i+1 < len(s) && s[i+1] == ' ':
			items = append(items, s[start:i])
			start = i + 2
			i++
		}
	}
	return append(items, s[start:])
}

// withoutNote is an item without its parenthesised note: "300 tokens/s
// (its count, last 30s)" is "300 tokens/s"; "" when it has none.
func withoutNote(item string) string {
	if i := strings.Index(item, " ("); i > 0 && strings.HasSuffix(item, ")") {
		return item[:i]
	}
	return ""
}
