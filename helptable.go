package main

import (
	"slices"
	"strings"

	"gendex/store/terminal"
)

// tableGap is the space between two columns of a rendered table.
const tableGap = "  "

// splitTableRow returns the cells of a Markdown table line ("| a | b |"),
// each trimmed, with its inline markup removed; a '|' inside backticks or
// escaped ("\|") stays in its cell.
func splitTableRow(trimmed string) []string {
	s := strings.TrimSuffix(strings.TrimPrefix(trimmed, "|"), "|")
	var cells []string
	var cell strings.Builder
	code := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '`':
			code = !code
			cell.WriteByte(c)
		case c == '\\' && i+1 < len(s) && s[i+1] == '|':
			cell.WriteByte('|')
			i++
		case c == '|' && !code:
			cells = append(cells, inline(strings.TrimSpace(cell.String())))
			cell.Reset()
		default:
			cell.WriteByte(c)
		}
	}
	return append(cells, inline(strings.TrimSpace(cell.String())))
}

// renderTable renders a Markdown table (its lines, trimmed, the header's
// rule among them) within width columns, each line starting with indent
// spaces: as aligned columns when its cells fit; else with the widest
// columns wrapped within their cells (a blank line between rows), when
// every column keeps room for its longest word; else each row as a list
// of "header: value" lines, a blank line between rows.
func renderTable(lines []string, indent, width int) []string {
	var head []string
	var rows [][]string
	for i, l := range lines {
		switch {
		case i == 1 && isTableRule(l):
		case i == 0:
			head = splitTableRow(l)
		default:
			rows = append(rows, splitTableRow(l))
		}
	}
	n := len(head)
	for i, r := range rows {
		for len(r) < n {
			r = append(r, "")
		}
		rows[i] = r[:n]
	}
	lead := strings.Repeat(" ", indent)
	room := width - indent - len(tableGap)*(n-1)
	nat, least := make([]int, n), make([]int, n)
	for j := range n {
		nat[j], least[j] = terminal.Width(head[j]), longestWord(head[j])
		for _, r := range rows {
			nat[j] = max(nat[j], terminal.Width(r[j]))
			least[j] = max(least[j], longestWord(r[j]))
		}
	}
	if sum(least) > room {
		return tableAsList(head, rows, lead, width)
	}
	w := fitColumns(nat, least, room)
	wrapped := sum(w) < sum(nat)
	out := tableRow(head, w, lead)
	rule := make([]string, n)
	for j := range n {
		rule[j] = strings.Repeat("-", w[j])
	}
	out = append(out, tableRow(rule, w, lead)...)
	for i, r := range rows {
		if wrapped && i > 0 {
			out = append(out, "")
		}
		out = append(out, tableRow(r, w, lead)...)
	}
	return out
}

// fitColumns returns the columns' widths within room: each at least its
// least; then, the narrowest first, every column that can be whole in
// what is left is made whole; the rest of room goes a column at a time to
// the one furthest from its natural width.
func fitColumns(nat, least []int, room int) []int {
	w := make([]int, len(nat))
	order := make([]int, len(nat))
	for j := range nat {
		w[j], order[j] = min(nat[j], least[j]), j
	}
	slices.SortStableFunc(order, func(a, b int) int { return nat[a] - nat[b] })
	for _, j := range order {
		if left := room - sum(w); nat[j]-w[j] <= left {
			w[j] = nat[j]
		}
	}
	for left := room - sum(w); left > 0; left-- {
		best := -1
		for j := range w {
			if w[j] < nat[j] && (best < 0 || nat[j]-w[j] > nat[best]-w[best]) {
				best = j
			}
		}
		if best < 0 {
			break
		}
		w[best]++
	}
	return w
}

// tableRow renders one row of cells, each wrapped within its column's
// width, as the lines it takes.
func tableRow(cells []string, w []int, lead string) []string {
	cols := make([][]string, len(cells))
	height := 0
	for j, c := range cells {
		cols[j] = terminal.Wrap(c, w[j], "", "")
		height = max(height, len(cols[j]))
	}
	out := make([]string, height)
	for i := range height {
		var b strings.Builder
		b.WriteString(lead)
		for j := range cells {
			if j > 0 {
				b.WriteString(tableGap)
			}
			s := ""
			if i < len(cols[j]) {
				s = cols[j][i]
			}
			b.WriteString(s + strings.Repeat(" ", max(w[j]-terminal.Width(s), 0)))
		}
		out[i] = strings.TrimRight(b.String(), " ")
	}
	return out
}

// tableAsList renders each row as "header: value" lines, the values
// wrapped within width (their continuations indented), a blank line
// between rows; an empty cell is left out.
func tableAsList(head []string, rows [][]string, lead string, width int) []string {
	var out []string
	for i, r := range rows {
		if i > 0 {
			out = append(out, "")
		}
		for j, c := range r {
			if c == "" {
				continue
			}
			first := lead + head[j] + ": "
			if j > 0 {
				first = lead + "  " + head[j] + ": "
			}
			out = append(out, wrapWordsWithin(c, width, first, lead+"    ")...)
		}
	}
	return out
}

// longestWord returns the width of the widest word of s.
func longestWord(s string) int {
	n := 0
	for _, w := range strings.Fields(s) {
		n = max(n, terminal.Width(w))
	}
	return n
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
