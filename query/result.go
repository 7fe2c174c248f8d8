package query

import (
	"strconv"
)

// Result is the answer to a question: named columns and rows of values.
// A value is nil (unknown: the index cannot know it), int64, uint64,
// Fixed, string, or bool (a yes or no: true or false in JSON, "yes" or
// "no" in a table, TSV and CSV).
type Result struct {
	Columns []string
	Rows    [][]any
	// Total is an optional summary row that only the table format shows
	// (JSON, TSV and CSV keep one row per dataset, for scripts).
	Total []any
	// Line, when set, is a stored input line (the answer to show); it is
	// written as it is, whatever the format.
	Line []byte
	// Notes are sentences about the answer, not part of it (see Sink.Note).
	Notes []string
}

// Fixed is a decimal number shown with a fixed number of decimals.
type Fixed struct {
	V    float64
	Prec int
}

func (f Fixed) String() string { return strconv.FormatFloat(f.V, 'f', f.Prec, 64) }

// MarshalJSON writes the number as shown.
func (f Fixed) MarshalJSON() ([]byte, error) { return []byte(f.String()), nil }

// Seconds is how a span's length is shown: whole seconds as an integer,
// a span that ends in the current second (a part of it gone by) with two
// decimals.
func Seconds(secs float64) any {
	if secs == float64(int64(secs)) {
		return int64(secs)
	}
	return Fixed{secs, 2}
}
