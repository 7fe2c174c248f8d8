package chart

import (
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"time"
)

// SVG palette: a line per panel, and the marks' colours.
var (
	lineColors = []string{"#1f5fbf", "#d0661a", "#2a9a48", "#8a3fb8", "#b8323a", "#2a8f9a", "#7a6a20", "#c4478f"}
	markColors = map[string]string{"down": "#c62828", "up": "#2e7d32", "restarted": "#ef6c00", "limit": "#6a3fb5"}
	// markDashes: a limit change, frequent, is drawn lighter than a down.
	markDashes = map[string]string{"limit": "2 4"}
)

// svgLegendLines bounds the SVG's legend: past it, the marks of the
// highest rank are listed (a down before a limit change), in time order,
// and a last line counts the others.
const svgLegendLines = 30

// SVG draws the same chart as Text as a self-contained SVG document, width
// pixels wide: the title, one panel per series (the first taller) with its
// y axis labelled at 0, the middle and the top, a shared time axis, each
// mark as a dashed vertical line through every panel with its glyph on the
// time axis, and a legend of the marks. It holds no script and refers to
// nothing outside itself; text is in the viewer's sans-serif font.
func (c *Chart) SVG(width int) []byte {
	width = max(width, 400)
	from, to := c.span()
	loc := c.loc()
	marks := c.marks()
	legend := svgLegend(marks, c.legend(marks, true))

	const (
		left, right = 70, 34
		titleH      = 34
		headH       = 20
		axisH       = 44
		legendLine  = 18
		firstH      = 190
		otherH      = 110
		gap         = 12
	)
	plotW := float64(width - left - right)
	heights := make([]float64, len(c.Series))
	total := float64(titleH)
	for i := range c.Series {
		heights[i] = otherH
		if i == 0 {
			heights[i] = firstH
		}
		total += headH + heights[i] + gap
	}
	axisY := total - gap
	total += axisH + float64(legendLine*len(legend)) + 10
	height := int(math.Ceil(total))

	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	title := c.Title
	if title != "" {
		title += ", "
	}
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold" fill="#222">%s</text>`+"\n", left, esc(title+rangeText(from, to, loc)))

	xOf := func(t time.Time) float64 {
		return left + float64(t.Sub(from))/float64(to.Sub(from))*plotW
	}
	y := float64(titleH)
	for i, s := range c.Series {
		top := c.top(s)
		head := s.Name + ": no value known"
		if mean, hi, ok := c.stats(s); ok {
			head = fmt.Sprintf("%s: mean %s, max %s %s", s.Name, Short(mean), Short(hi), c.Unit)
		}
		color := lineColors[i%len(lineColors)]
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-weight="bold" fill="%s">%s</text>`+"\n", left, y+14, color, esc(head))
		y += headH
		h := heights[i]
		yOf := func(v float64) float64 { return y + (1-min(max(v/top, 0), 1))*h }
		for _, v := range []float64{0, top / 2, top} {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#e3e3e3"/>`+"\n", left, yOf(v), left+plotW, yOf(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#555">%s</text>`+"\n", left-6, yOf(v)+4, esc(Short(v)))
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#999"/>`+"\n", left, y, plotW, h)
		// The line, broken where a value is not known.
		var pts []string
		flush := func() {
			if len(pts) == 1 {
				fmt.Fprintf(&b, `<circle cx="%s" r="1.5" fill="%s"/>`+"\n", strings.Replace(pts[0], ",", `" cy="`, 1), color)
			} else if len(pts) > 1 {
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" stroke-linejoin="round" points="%s"/>`+"\n", color, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for j, v := range s.Values {
			if j >= len(c.Times) {
				break
			}
			if math.IsNaN(v) {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xOf(c.mid(j)), yOf(v)))
		}
		flush()
		y += h + gap
	}

	// The time axis: ticks and times, then the marks through every panel.
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, axisY, left+plotW, axisY)
	for _, tk := range ticks(from, to, int(plotW/90), loc) {
		x := xOf(tk.at)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", x, axisY, x, axisY+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#333">%s</text>`+"\n", x, axisY+18, esc(tk.label))
	}
	for _, m := range marks {
		x := xOf(m.Time)
		color := markColors[m.Kind]
		if color == "" {
			color = "#555"
		}
		dash := markDashes[m.Kind]
		if dash == "" {
			dash = "4 3"
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="%s"><title>%s</title></line>`+"\n",
			x, titleH, x, axisY, color, dash, esc(strings.TrimSpace(m.Label+" "+m.Detail)))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="14" fill="%s">%c</text>`+"\n", x, axisY+34, color, Glyph(m.Kind))
	}
	for i, l := range legend {
		color := markColors[l.kind]
		if color == "" {
			color = "#555"
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="%s">%s</text>`+"\n", left, axisY+axisH+float64(legendLine*(i+1))-4, color, esc(l.text))
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

// legendEntry is one line of the SVG's legend and the kind of its mark
// ("" for the line counting those left out).
type legendEntry struct{ kind, text string }

// svgLegend returns the legend's lines for marks (entries, one each): all
// of them when they fit in svgLegendLines, else those of the highest rank
// that fit, in time order, and a line saying how many more there are.
func svgLegend(marks []Mark, entries []string) []legendEntry {
	keep := make([]bool, len(marks))
	room := len(marks)
	if room > svgLegendLines {
		room = svgLegendLines - 1 // and the line that counts the rest
		order := make([]int, len(marks))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return rank(marks[b].Kind) - rank(marks[a].Kind) })
		order = order[:room]
		for _, i := range order {
			keep[i] = true
		}
	} else {
		for i := range keep {
			keep[i] = true
		}
	}
	var out []legendEntry
	for i, m := range marks {
		if keep[i] {
			out = append(out, legendEntry{m.Kind, entries[i]})
		}
	}
	if left := len(marks) - room; left > 0 {
		out = append(out, legendEntry{"", fmt.Sprintf("(+%d more: gendex query events)", left)})
	}
	return out
}

func esc(s string) string { return html.EscapeString(s) }
