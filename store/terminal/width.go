package terminal

import (
	"strings"

	"github.com/olekukonko/tablewriter/pkg/twwidth"
)

// Width is the display width of s on a terminal.
func Width(s string) int { return twwidth.Width(s) }

// Cut returns s within width columns, its end (or, left, its start)
// replaced by … when it is wider.
func Cut(s string, width int, left bool) string {
	if Width(s) <= width {
		return s
	}
	if width <= 1 {
		return strings.Repeat("…", max(width, 0))
	}
	if !left {
		return twwidth.Truncate(s, width-1) + "…"
	}
	rs := []rune(s)
	for i := range rs {
		if t := string(rs[i:]); Width(t) <= width-1 {
			return "…" + t
		}
	}
	return "…"
}

// CutMiddle returns s within width columns, cut in the middle: its end
// from byte i on (a URL's port; a path's last folder and file name) is
// kept whole when it leaves room for a start of two columns or more, and
// the start gets the rest, then "…". Otherwise (or with i <= 0) it keeps
// s's end, as Cut does with left.
func CutMiddle(s string, width, i int) string {
	if Width(s) <= width {
		return s
	}
	if i <= 0 {
		return Cut(s, width, true)
	}
	tail := s[i:]
	room := width - 1 - Width(tail)
	if room < 2 {
		return Cut(s, width, true)
	}
	return twwidth.Truncate(s[:i], room) + "…" + tail
}
