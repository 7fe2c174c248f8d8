package chart

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// MinWidth and MinHeight are the smallest terminal Text draws for; a
// smaller size is drawn at these.
const (
	MinWidth  = 40
	MinHeight = 10
)

// Text draws the chart in width columns and at most height lines, each
// ending in "\n", without trailing spaces. Line 1 is the title with the
// time span; then one panel per series (a header line, "NAME  mean M, max
// X UNIT", and its plot in braille dots, y labelled at the top, middle and
// 0); then the time axis, with a ┬ at each labelled time and the marks'
// glyphs (↓ down, ↑ up, ↻ restarted, ↕ limit) at their moments, and the
// times under it; last, when there are marks, a legend of them (the limit
// changes after the others). The first series gets
// the most lines; series that do not fit at 3 lines each (header and 2
// plot lines) are left out, and a line says how many.
func (c *Chart) Text(width, height int) string {
	width, height = max(width, MinWidth), max(height, MinHeight)
	from, to := c.span()
	loc := c.loc()
	marks := c.marks()

	var legend []string
	if len(marks) > 0 {
		legend = packLegend(c.legend(limitsLast(marks), false), width, 1+height/20)
	}
	tops := make([]float64, len(c.Series))
	gutter := 2
	for i, s := range c.Series {
		tops[i] = c.top(s)
		for _, v := range []float64{tops[i], tops[i] / 2} {
			gutter = max(gutter, len(Short(v))+1)
		}
	}
	plotW := width - gutter - 1
	rows := height - 3 - len(legend) // title, axis, times
	shown, lines, more := layout(len(c.Series), rows)

	var out strings.Builder
	line := func(s string) {
		out.WriteString(strings.TrimRight(s, " "))
		out.WriteByte('\n')
	}
	title := c.Title
	if title != "" {
		title += ", "
	}
	line(cut(title+rangeText(from, to, loc), width))
	for i := range shown {
		s := c.Series[i]
		head := s.Name + "  no value known"
		if mean, hi, ok := c.stats(s); ok {
			head = fmt.Sprintf("%s  mean %s, max %s %s", s.Name, Short(mean), Short(hi), c.Unit)
		}
		line(cut(head, width))
		for _, l := range c.panel(s, tops[i], gutter, plotW, lines[i]-1, from, to) {
			line(l)
		}
	}
	if more > 0 {
		line(cut(fmt.Sprintf("(+%d not shown: too few lines)", more), width))
	}

	// The time axis, its ticks and marks, and the times under it.
	col := func(t time.Time) int {
		f := float64(t.Sub(from)) / float64(to.Sub(from))
		return min(plotW-1, max(0, int(math.Round(f*float64(plotW-1)))))
	}
	labelW := len("15:04")
	if to.Sub(from) < 10*time.Minute {
		labelW = len("15:04:05")
	}
	if f, t := from.In(loc), to.In(loc); f.YearDay() != t.YearDay() || f.Year() != t.Year() {
		labelW += len("01-02 ")
	}
	tks := ticks(from, to, plotW/(labelW+3), loc)
	axis := []rune(strings.Repeat(" ", gutter) + "└" + strings.Repeat("─", plotW))
	under := []rune(strings.Repeat(" ", width))
	free := 0 // the first column a label may start at
	for _, tk := range tks {
		x := gutter + 1 + col(tk.at)
		axis[x] = '┬'
		l := []rune(tk.label)
		start := min(max(x-len(l)/2, gutter+1), width-len(l))
		if start < free {
			continue
		}
		copy(under[start:], l)
		free = start + len(l) + 2
	}
	ranks := map[int]int{}
	for _, m := range marks {
		x := gutter + 1 + col(m.Time)
		if r, ok := ranks[x]; ok && r >= rank(m.Kind) {
			continue
		}
		ranks[x] = rank(m.Kind)
		axis[x] = Glyph(m.Kind)
	}
	line(string(axis))
	line(string(under))
	for _, l := range legend {
		line(l)
	}
	return out.String()
}

// layout shares rows among n panels: the first gets about two fifths, the
// others the rest evenly, each at least 3 (a header and 2 plot lines);
// leftover lines go to the first. It returns how many panels are shown,
// each one's lines, and how many are left out (one line says so).
func layout(n, rows int) (shown int, lines []int, more int) {
	if n == 0 {
		return 0, nil, 0
	}
	if n == 1 {
		return 1, []int{max(rows, 3)}, 0
	}
	if rows < 7 {
		return 1, []int{max(rows-1, 3)}, n - 1 // and a line says how many are left out
	}
	k := n - 1
	avail := rows
	for k > 0 && (avail-max(4, avail*2/5))/k < 3 {
		if k == n-1 {
			avail-- // the line saying how many are left out
		}
		k--
	}
	first := max(4, avail*2/5)
	if k == 0 {
		first = avail
	}
	lines = []int{first}
	if k > 0 {
		each := (avail - first) / k
		lines[0] += avail - first - each*k
		for range k {
			lines = append(lines, each)
		}
	}
	return k + 1, lines, n - 1 - k
}

// panel draws one series in rows lines of plotW braille cells, after a
// gutter of y labels (top, middle and 0) and the y axis.
func (c *Chart) panel(s Series, top float64, gutter, plotW, rows int, from, to time.Time) []string {
	rows = max(rows, 1)
	dotsW, dotsH := plotW*2, rows*4
	grid := make([][]uint8, rows)
	for i := range grid {
		grid[i] = make([]uint8, plotW)
	}
	set := func(x, y int) {
		if x < 0 || y < 0 || x >= dotsW || y >= dotsH {
			return
		}
		grid[y/4][x/2] |= brailleBit[x%2][y%4]
	}
	xOf := func(t time.Time) int {
		f := float64(t.Sub(from)) / float64(to.Sub(from))
		return int(math.Round(f * float64(dotsW-1)))
	}
	yOf := func(v float64) int {
		f := min(max(v/top, 0), 1)
		return int(math.Round((1 - f) * float64(dotsH-1)))
	}
	havePrev := false
	var px, py int
	for i, v := range s.Values {
		if i >= len(c.Times) {
			break
		}
		if math.IsNaN(v) {
			havePrev = false
			continue
		}
		x, y := xOf(c.mid(i)), yOf(v)
		if havePrev {
			drawLine(px, py, x, y, set)
		} else {
			set(x, y)
		}
		px, py, havePrev = x, y, true
	}
	labels := map[int]string{0: Short(top), rows - 1: "0"}
	if rows >= 5 {
		labels[yOf(top/2)/4] = Short(top / 2)
	}
	out := make([]string, rows)
	for r := range rows {
		var b strings.Builder
		l := labels[r]
		b.WriteString(strings.Repeat(" ", gutter-1-utf8.RuneCountInString(l)))
		b.WriteString(l)
		b.WriteByte(' ')
		if l != "" {
			b.WriteRune('┤')
		} else {
			b.WriteRune('│')
		}
		for _, bits := range grid[r] {
			if bits == 0 {
				b.WriteByte(' ')
			} else {
				b.WriteRune(rune(0x2800 + int(bits)))
			}
		}
		out[r] = b.String()
	}
	return out
}

// brailleBit[x][y] is the bit of the dot at column x (0-1) and row y (0-3)
// of a braille cell (U+2800 + bits).
var brailleBit = [2][4]uint8{{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}}

// drawLine sets the dots from (x0, y0) to (x1, y1) (Bresenham).
func drawLine(x0, y0, x1, y1 int, set func(x, y int)) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	e := dx + dy
	for {
		set(x0, y0)
		if x0 == x1 && y0 == y1 {
			return
		}
		if e2 := 2 * e; e2 >= dy {
			e += dy
			x0 += sx
		} else {
			e += dx
			y0 += sy
		}
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// cut shortens s to width columns, with "…" when it cuts.
func cut(s string, width int) string {
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	r := []rune(s)
	return string(r[:width-1]) + "…"
}

// limitsLast returns marks with the limit changes after the others, each
// kind in time order: they are many, and the legend's room goes to the
// downs, ups and restarts first.
func limitsLast(marks []Mark) []Mark {
	out := make([]Mark, 0, len(marks))
	for _, limits := range []bool{false, true} {
		for _, m := range marks {
			if (m.Kind == "limit") == limits {
				out = append(out, m)
			}
		}
	}
	return out
}

// packLegend puts the entries on at most n lines of width, "  " between
// them, after "events: "; what does not fit is counted at the end:
// "(+3 more: gendex query events)".
func packLegend(entries []string, width, n int) []string {
	var lines [][]string
	cur := []string{}
	curW := len("events: ")
	i := 0
	for ; i < len(entries); i++ {
		w := utf8.RuneCountInString(entries[i])
		if len(cur) > 0 && curW+2+w <= width || len(cur) == 0 && curW+w <= width {
			if len(cur) > 0 {
				curW += 2
			}
			cur, curW = append(cur, entries[i]), curW+w
			continue
		}
		if len(lines)+1 >= n {
			break
		}
		lines, cur, curW = append(lines, cur), nil, 0
		i-- // again, on the new line
		if w > width {
			break
		}
	}
	if i < len(entries) {
		// Not all fit: the last line drops entries until the count fits.
		for {
			note := fmt.Sprintf("(+%d more: gendex query events)", len(entries)-i)
			if utf8.RuneCountInString(strings.Join(append(slices.Clone(cur), note), "  ")) <= width-len("events: ") || len(cur) == 0 {
				cur = append(cur, note)
				break
			}
			cur = cur[:len(cur)-1]
			i--
		}
	}
	lines = append(lines, cur)
	out := make([]string, len(lines))
	for j, l := range lines {
		out[j] = strings.Join(l, "  ")
	}
	out[0] = "events: " + out[0]
	return out
}
