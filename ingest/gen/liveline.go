package gen

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode"

	"gendex/store/terminal"

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

// liveLog is the log on a terminal: the status lines (the block) stay at
// the bottom, each fitted to the terminal's width as it is at that moment
// (liveLine.fit: a line never wraps), and no more of them than the
// terminal has rows. Each redraw moves up over exactly the rows the block
// took, clears them and draws it again; a message (any other write) goes
// above the block, which is drawn again under it at once. Messages may
// wrap: they are written once and never moved over.
type liveLog struct {
	mu sync.Mutex
	w  io.Writer
	// size returns the terminal's columns and rows now (0, 0: unknown, the
	// lines are not fitted); nil reads them from w when it is a terminal.
	size    func() (cols, rows int)
	block   []liveLine // the status lines, as last built
	drawn   []int      // the columns of each line on screen
	partial []byte     // the start of a message's line, until its newline
	stopped bool       // the block is gone for good: writes go straight through
}

func (l *liveLog) termSize() (cols, rows int) {
	if l.size != nil {
		return l.size()
	}
	if f, ok := l.w.(interface{ Fd() uintptr }); ok {
		return terminal.Size(f.Fd())
	}
	return 0, 0
}

// Write writes the whole lines of p above the block, each broken between
// words to the terminal's width; the start of a line waits for its end.
func (l *liveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cols, rows := l.termSize()
	if l.stopped {
		_, err := io.WriteString(l.w, terminal.WrapLines(string(p), cols-1))
		return len(p), err
	}
	l.partial = append(l.partial, p...)
	i := bytes.LastIndexByte(l.partial, '\n')
	if i < 0 {
		return len(p), nil
	}
	var b bytes.Buffer
	l.erase(&b, cols, true)
	b.WriteString(terminal.WrapLines(string(l.partial[:i+1]), cols-1))
	l.partial = append(l.partial[:0], l.partial[i+1:]...)
	l.render(&b, cols, rows)
	_, err := l.w.Write(b.Bytes())
	return len(p), err
}

// erase moves the cursor up to the block's first row, and clears the
// block when clear (else the redraw clears each row as it writes it).
// The rows are the ones the block takes now: a line of w columns drawn
// in a terminal made narrower since takes ceil(w/cols) rows once the
// terminal has re-wrapped it (tmux, VTE, iTerm2, kitty and Windows
// Terminal do).
func (l *liveLog) erase(b *bytes.Buffer, cols int, clear bool) {
	rows := 0
	for _, w := range l.drawn {
		if cols > 0 && w > cols {
			rows += (w + cols - 1) / cols
		} else {
			rows++
		}
	}
	l.drawn = l.drawn[:0]
	if rows == 0 {
		return
	}
	fmt.Fprintf(b, "\r\x1b[%dA", rows)
	if clear {
		b.WriteString("\x1b[J")
	}
}

// render draws the block at the cursor, fitted to cols (a column to spare,
// so that no terminal wraps a full line) and to rows (a row to spare for
// the cursor; the lines that do not fit are counted on the last).
func (l *liveLog) render(b *bytes.Buffer, cols, rows int) {
	width := 0
	if cols > 1 {
		width = cols - 1
	}
	lines := make([]string, 0, len(l.block))
	for _, ll := range l.block {
		lines = append(lines, ll.fit(width))
	}
	if room := rows - 1; rows > 0 && len(lines) > max(room, 1) {
		keep := max(room-1, 1)
		more := liveLine{{text: fmt.Sprintf("  … and %d more lines (a taller terminal shows them; gendex watch too)", len(lines)-keep),
			short: fmt.Sprintf("  … %d more", len(lines)-keep)}}
		lines = lines[:keep]
		if room > 1 {
			lines = append(lines, more.fit(width))
		}
	}
	for _, s := range lines {
		b.WriteString("\x1b[2K" + s + "\n")
		l.drawn = append(l.drawn, textWidth(s))
	}
	b.WriteString("\x1b[J")
}

// draw replaces the block with lines.
func (l *liveLog) draw(lines []liveLine) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.block = lines
	l.redrawLocked()
}

// redraw draws the block again (the terminal was resized).
func (l *liveLog) redraw() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.redrawLocked()
}

func (l *liveLog) redrawLocked() {
	if l.stopped {
		return
	}
	var b bytes.Buffer
	cols, rows := l.termSize()
	l.erase(&b, cols, false)
	l.render(&b, cols, rows)
	io.Copy(l.w, &b)
}

// stop clears the block for good (the run's summary follows), and ends a
// message's unfinished line.
func (l *liveLog) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b bytes.Buffer
	cols, _ := l.termSize()
	l.erase(&b, cols, true)
	if len(l.partial) > 0 {
		b.Write(l.partial)
		b.WriteString("\n")
		l.partial = nil
	}
	l.block, l.stopped = nil, true
	io.Copy(l.w, &b)
}
