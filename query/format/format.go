// Package format writes an answer as a table (for a terminal), TSV, CSV
// or JSON: Writer is the query.Sink that the query command and the shell
// stream answers into. layout.go decides which columns a table too wide
// for the terminal keeps and how each is cut; text widths, cutting and
// wrapping themselves are store/terminal's, shared with ingest.
package format

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"

	"gendex/query"
	"gendex/store/terminal"
	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Options controls Write.
type Options struct {
	Format   query.Format // query.Auto is treated as TSV
	NoHeader bool         // TSV and CSV: no header line
	// Width is the terminal's width: a table is fitted to it (see
	// Layouts); 0 leaves it as wide as its cells. TSV, CSV and JSON
	// ignore it.
	Width int
	// Layout names the table's entry in Layouts: the question's name, or
	// watch's "watch" and "watch-servers".
	Layout string
	// Notes receives the answer's notes (see query.Sink.Note), each as
	// "note: ..." on a line of its own, after the answer is flushed: the
	// query command's and the shell's stderr, so that the data on stdout
	// stays as it is. nil drops them.
	Notes io.Writer
}

// Unknown is how the table format shows a value the index cannot know.
// TSV and CSV leave the cell empty; JSON writes null.
const Unknown = "unknown"

// Write renders a collected Result to w.
func Write(w io.Writer, r *query.Result, opts Options) error {
	out := NewWriter(w, opts)
	if err := query.Replay(r, out); err != nil {
		return err
	}
	return out.Close()
}

// Writer is a query.Sink that renders an answer to an io.Writer. TSV, CSV and
// JSON stream row by row; a table is laid out when Close is called.
type Writer struct {
	w    *bufio.Writer
	opts Options
	cols []string
	rows int
	csv  *csv.Writer
	rec  []string
	// table
	table [][]any
	total []any
	notes []string
}

// NewWriter returns a Writer for w. Call Close when the answer is complete.
func NewWriter(w io.Writer, opts Options) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10), opts: opts}
}

func (o *Writer) Columns(cols []string) error {
	o.cols = cols
	switch o.opts.Format {
	case query.Table:
	case query.JSON:
		o.w.WriteString("[")
	case query.CSV:
		o.csv = csv.NewWriter(o.w)
		o.rec = make([]string, len(cols))
		if !o.opts.NoHeader {
			return o.csv.Write(cols)
		}
	default:
		if !o.opts.NoHeader {
			o.w.WriteString(strings.Join(cols, "\t"))
			o.w.WriteByte('\n')
		}
	}
	return nil
}

func (o *Writer) Row(row []any) error {
	o.rows++
	switch o.opts.Format {
	case query.Table:
		o.table = append(o.table, append([]any(nil), row...))
	case query.JSON:
		if o.rows > 1 {
			o.w.WriteString(",")
		}
		o.w.WriteString("\n  {")
		for j, v := range row {
			if j > 0 {
				o.w.WriteString(", ")
			}
			writeJSONString(o.w, o.cols[j])
			o.w.WriteString(": ")
			writeJSONValue(o.w, v)
		}
		o.w.WriteString("}")
	case query.CSV:
		for i, v := range row {
			o.rec[i], _ = cell(v)
		}
		return o.csv.Write(o.rec)
	default:
		for i, v := range row {
			if i > 0 {
				o.w.WriteByte('\t')
			}
			s, _ := cell(v)
			tsvEscaper.WriteString(o.w, s)
		}
		o.w.WriteByte('\n')
	}
	return nil
}

func (o *Writer) Total(row []any) error {
	o.total = append([]any(nil), row...)
	return nil
}

func (o *Writer) Line(line []byte) error {
	o.w.Write(line)
	o.w.WriteByte('\n')
	return nil
}

// Note keeps a note for Options.Notes; Close writes it there.
func (o *Writer) Note(note string) error {
	o.notes = append(o.notes, note)
	return nil
}

// Close finishes the answer and flushes it, then writes its notes to
// Options.Notes.
func (o *Writer) Close() error {
	if err := o.close(); err != nil {
		return err
	}
	if o.opts.Notes != nil {
		for _, n := range o.notes {
			if _, err := io.WriteString(o.opts.Notes, "note: "+n+"\n"); err != nil {
				return err
			}
		}
	}
	o.notes = nil
	return nil
}

func (o *Writer) close() error {
	switch o.opts.Format {
	case query.Table:
		if o.cols != nil {
			if err := writeTable(o.w, o.cols, o.table, o.total, o.opts); err != nil {
				return err
			}
		}
	case query.JSON:
		if o.cols != nil {
			if o.rows > 0 {
				o.w.WriteString("\n")
			}
			o.w.WriteString("]\n")
		}
	case query.CSV:
		if o.csv != nil {
			o.csv.Flush()
			if err := o.csv.Error(); err != nil {
				return err
			}
		}
	}
	return o.w.Flush()
}

var tsvEscaper = strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")

func writeJSONString(w *bufio.Writer, s string) {
	var sb strings.Builder
	e := json.NewEncoder(&sb)
	e.SetEscapeHTML(false)
	e.Encode(s) // a string always encodes
	w.WriteString(strings.TrimSuffix(sb.String(), "\n"))
}

func writeJSONValue(w *bufio.Writer, v any) {
	switch x := v.(type) {
	case nil:
		w.WriteString("null")
	case string:
		writeJSONString(w, x)
	case bool:
		w.WriteString(strconv.FormatBool(x))
	default:
		s, _ := cell(x)
		w.WriteString(s)
	}
}

// zeroHidden are the columns a table leaves out when they are 0 in every
// row and in the total: counts that matter only when they are not 0.
// TSV, CSV and JSON always have them, so that scripts see stable columns.
// (finish's tool_calls, abort and content_filter are rare, stop and length
// are not; progress's redo and stale count only during and after a redo.)
var zeroHidden = map[string]bool{"skipped": true, "excluded": true, "turns": true,
	"tool_calls": true, "abort": true, "content_filter": true, "redo": true, "stale": true,
	"tool_stops": true}

// blankHidden are the columns a table leaves out when no row has a value
// in them (list's tool_stop: only a stopped tool conversation has one;
// server's limit, in_flight and preemptions: unknown for every server of
// an index a gen older than the limit wrote, or a server that counts no
// preemptions).
var blankHidden = map[string]bool{"tool_stop": true, "limit": true, "in_flight": true, "preemptions": true}

// zeroOrBlankHidden are the columns a table leaves out when every row has
// 0 or no value in them (progress's no_prompt: answers whose prompts
// changed ids or went, unknown for a dataset without prompts).
var zeroOrBlankHidden = map[string]bool{"no_prompt": true}

// hideZeroColumns returns cols, rows and total without the zeroHidden
// columns that are 0 everywhere (and the blankHidden and
// zeroOrBlankHidden ones, by their rule).
func hideZeroColumns(cols []string, rows [][]any, total []any) ([]string, [][]any, []any) {
	var drop []int
	for j, c := range cols {
		hide := isZero
		switch {
		case blankHidden[c]:
			hide = isBlank
		case zeroOrBlankHidden[c]:
			hide = func(v any) bool { return isZero(v) || isBlank(v) }
		case !zeroHidden[c]:
			continue
		}
		zero := total == nil || (j < len(total) && hide(total[j]))
		for _, row := range rows {
			zero = zero && hide(row[j])
		}
		if zero {
			drop = append(drop, j)
		}
	}
	if len(drop) == 0 {
		return cols, rows, total
	}
	keep := func(row []any) []any {
		if row == nil {
			return nil
		}
		out := make([]any, 0, len(row))
		for j, v := range row {
			if !slices.Contains(drop, j) {
				out = append(out, v)
			}
		}
		return out
	}
	var kc []string
	for j, c := range cols {
		if !slices.Contains(drop, j) {
			kc = append(kc, c)
		}
	}
	kr := make([][]any, len(rows))
	for i, row := range rows {
		kr[i] = keep(row)
	}
	return kc, kr, keep(total)
}

func isZero(v any) bool {
	s, ok := cell(v)
	return ok && s == "0"
}

func isBlank(v any) bool {
	s, _ := cell(v)
	return s == ""
}

func writeTable(w io.Writer, cols []string, rows [][]any, total []any, opts Options) error {
	cols, rows, total = hideZeroColumns(cols, rows, total)
	isNum := make([]bool, len(cols))
	for j := range cols {
		for _, row := range rows {
			if numeric(row[j]) {
				isNum[j] = true
				break
			}
		}
	}
	text := make([][]string, 0, len(rows))
	for _, row := range rows {
		text = append(text, tableRow(row))
	}
	var foot []string
	if total != nil && len(rows) > 1 {
		foot = tableRow(total)
	}
	var legend []string // what ShortURLs left out of a column
	for j, c := range cols {
		if Layouts[opts.Layout].col(c, j).URL {
			if l := ShortURLs(text, j); l != "" {
				legend = append(legend, l)
			}
		}
	}
	f := fit(opts.Width, Layouts[opts.Layout], cols, text, foot, isNum)
	var align []tw.Align
	for j := range cols {
		if slices.Contains(f.hidden, cols[j]) {
			continue
		}
		align = append(align, tw.AlignLeft)
		if isNum[j] {
			align[len(align)-1] = tw.AlignRight
		}
	}
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders:  tw.BorderNone,
			Symbols:  tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{Separators: tw.SeparatorsNone, Lines: tw.LinesNone},
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignLeft),
		tablewriter.WithRowAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithFooterAlignmentConfig(tw.CellAlignment{PerColumn: align}),
		tablewriter.WithFooterAutoFormat(tw.Off),
	)
	t.Header(f.cols)
	if err := t.Bulk(f.rows); err != nil {
		return err
	}
	if f.total != nil {
		t.Footer(f.total)
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, l := range legend {
		if opts.Width > 0 { // a long host: its ":PORT" kept
			l = terminal.CutMiddle(l, opts.Width, strings.LastIndex(l, ":"))
		}
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return err
		}
	}
	if len(f.short) > 0 {
		for _, l := range shortNote(f.short, opts.Width) {
			if _, err := io.WriteString(w, l+"\n"); err != nil {
				return err
			}
		}
	}
	if len(f.hidden) > 0 {
		_, err := io.WriteString(w, hiddenNote(f.hidden, opts.Width)+"\n")
		return err
	}
	return nil
}

func tableRow(row []any) []string {
	out := make([]string, len(row))
	for i, v := range row {
		s, ok := cell(v)
		if !ok {
			s = Unknown
		}
		out[i] = strings.Map(printable, s)
	}
	return out
}

// printable keeps control characters (a server message's \r or escape
// sequences) from reaching the terminal.
func printable(r rune) rune {
	if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
		return ' '
	}
	return r
}

// cell renders v as text; unknown is returned as ("", false).
func cell(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", false
	case int64:
		return strconv.FormatInt(x, 10), true
	case uint64:
		return strconv.FormatUint(x, 10), true
	case int:
		return strconv.Itoa(x), true
	case query.Fixed:
		return x.String(), true
	case string:
		return x, true
	case bool:
		if x {
			return "yes", true
		}
		return "no", true
	}
	return "", false
}

// numeric reports whether v is shown as a number (right-aligned in tables).
func numeric(v any) bool {
	switch v.(type) {
	case int64, uint64, int, query.Fixed:
		return true
	}
	return false
}
