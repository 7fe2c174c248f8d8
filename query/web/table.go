package web

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gendex/query"
)

// A table is a question's answer as the page shows it: the columns a
// page keeps, with readable headings, and each cell's text beside its
// value as the question gave it (data-v in the page, so a test or a
// script reads the number, not its formatting).
type table struct {
	Cols  []column
	Rows  [][]cell
	Total []cell
	Empty string // said when there are no rows
}

type column struct {
	Name, Head, Title string // the question's column, the heading, its tooltip
	Num               bool
}

type cell struct {
	Col     string
	Text    string
	Raw     string
	Href    string
	Title   string
	Unknown bool
	Num     bool
	Class   string
}

// col names a question's column, the heading a page gives it and what
// the heading means.
type col struct{ name, head, title string }

// newTable keeps cols of r, in that order (a column r lacks is left
// out); href, when not nil, links a row's first cell.
func newTable(r *query.Result, cols []col, href func(row []any) string) *table {
	t := &table{}
	at := map[string]int{}
	for i, c := range r.Columns {
		at[c] = i
	}
	var idx []int
	for _, c := range cols {
		i, ok := at[c.name]
		if !ok {
			continue
		}
		idx = append(idx, i)
		t.Cols = append(t.Cols, column{Name: c.name, Head: c.head, Title: c.title})
	}
	mk := func(row []any, link bool) []cell {
		cells := make([]cell, len(idx))
		for j, i := range idx {
			var v any
			if i < len(row) {
				v = row[i]
			}
			cells[j] = valueCell(t.Cols[j].Name, v)
			if j == 0 && link && href != nil {
				cells[j].Href = href(row)
			}
		}
		return cells
	}
	for _, row := range r.Rows {
		t.Rows = append(t.Rows, mk(row, true))
	}
	if r.Total != nil {
		t.Total = mk(r.Total, false)
	}
	for j := range t.Cols {
		for _, row := range t.Rows {
			if row[j].Num {
				t.Cols[j].Num = true
			}
		}
	}
	return t
}

// valueCell shows one value: a count with thousands separators, a share
// with its decimals, a text as it is, nothing known as "unknown".
func valueCell(name string, v any) cell {
	c := cell{Col: name}
	if v == nil && name == "message" {
		return c // no message: nothing to say, not a number unknown
	}
	if v == nil {
		c.Text, c.Unknown, c.Class = "unknown", true, "unknown"
		return c
	}
	if s, ok := v.(string); ok && name == "source" {
		// A file and line: the file's name, its folder in the tooltip.
		c.Text, c.Raw, c.Title = filepath.Base(s), s, s
		return c
	}
	if s, ok := v.(string); ok {
		c.Text, c.Raw = s, s
		return c
	}
	if b, ok := v.(bool); ok {
		c.Text, c.Raw = "no", "false"
		if b {
			c.Text, c.Raw = "yes", "true"
		}
		return c
	}
	c.Raw = fmt.Sprint(v) // as TSV writes it (a Fixed with its decimals)
	f, ok := query.AsFloat(v)
	if !ok {
		c.Text = c.Raw
		return c
	}
	c.Num = true
	c.Text = c.Raw // a share or a rate, rounded as the question rounds it
	if !strings.ContainsAny(c.Raw, ".eE") && f == math.Trunc(f) && math.Abs(f) < 1e15 {
		c.Text = thousands(int64(f))
	}
	return c
}

// thousands writes n with commas: 1234567 -> 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
