package query

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Format is an output format.
type Format int

// The formats. Auto is decided by the caller: Table on a terminal, TSV when piped.
const (
	Auto Format = iota
	Table
	TSV
	CSV
	JSON
)

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "", "auto":
		return Auto, nil
	case "table":
		return Table, nil
	case "tsv":
		return TSV, nil
	case "csv":
		return CSV, nil
	case "json":
		return JSON, nil
	}
	return Auto, fmt.Errorf("unknown format %q (want table, tsv, csv or json)", s)
}

func (f Format) String() string {
	return [...]string{"auto", "table", "tsv", "csv", "json"}[f]
}

// Options controls Write.
type Options struct {
	Format   Format // Auto is treated as TSV
	NoHeader bool   // TSV and CSV: no header line
}

// Unknown is how the table format shows a value the index cannot know.
// TSV and CSV leave the cell empty; JSON writes null.
const Unknown = "unknown"

// Write renders a collected Result to w.
func Write(w io.Writer, r *Result, opts Options) error {
	out := NewWriter(w, opts)
	if err := Replay(r, out); err != nil {
		return err
	}
	return out.Close()
}

// Writer is a Sink that renders an answer to an io.Writer. TSV, CSV and
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
}

// NewWriter returns a Writer for w. Call Close when the answer is complete.
func NewWriter(w io.Writer, opts Options) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10), opts: opts}
}

func (o *Writer) Columns(cols []string) error {
	o.cols = cols
	switch o.opts.Format {
	case Table:
	case JSON:
		o.w.WriteString("[")
	case CSV:
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
	case Table:
		o.table = append(o.table, append([]any(nil), row...))
	case JSON:
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
	case CSV:
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

// Close finishes the answer and flushes it.
func (o *Writer) Close() error {
	switch o.opts.Format {
	case Table:
		if o.cols != nil {
			if err := writeTable(o.w, o.cols, o.table, o.total); err != nil {
				return err
			}
		}
	case JSON:
		if o.cols != nil {
			if o.rows > 0 {
				o.w.WriteString("\n")
			}
			o.w.WriteString("]\n")
		}
	case CSV:
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
	default:
		s, _ := cell(x)
		w.WriteString(s)
	}
}

// zeroHidden are the columns a table leaves out when they are 0 in every
// row and in the total: counts that matter only when they are not 0.
// TSV, CSV and JSON always have them, so that scripts see stable columns.
var zeroHidden = map[string]bool{"skipped": true}

// hideZeroColumns returns cols, rows and total without the zeroHidden
// columns that are 0 everywhere.
func hideZeroColumns(cols []string, rows [][]any, total []any) ([]string, [][]any, []any) {
	var drop []int
	for j, c := range cols {
		if !zeroHidden[c] {
			continue
		}
		zero := total == nil || (j < len(total) && isZero(total[j]))
		for _, row := range rows {
			zero = zero && isZero(row[j])
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

func writeTable(w io.Writer, cols []string, rows [][]any, total []any) error {
	cols, rows, total = hideZeroColumns(cols, rows, total)
	align := make([]tw.Align, len(cols))
	for j := range cols {
		align[j] = tw.AlignLeft
		for _, row := range rows {
			if numeric(row[j]) {
				align[j] = tw.AlignRight
				break
			}
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
	t.Header(cols)
	text := make([][]string, 0, len(rows))
	for _, row := range rows {
		text = append(text, tableRow(row))
	}
	if err := t.Bulk(text); err != nil {
		return err
	}
	if total != nil && len(rows) > 1 {
		t.Footer(tableRow(total))
	}
	return t.Render()
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
