package format_test

import (
	"bytes"
	"testing"

	"gendex/query"
	"gendex/query/format"
)

// A note goes to Options.Notes after the answer, never into the data; with
// no Notes writer it is dropped.
func TestWriterNotes(t *testing.T) {
	r := &query.Result{Columns: []string{"id"}, Rows: [][]any{{"a"}, {"b"}}, Notes: []string{"some answers have no id"}}
	for _, f := range []query.Format{query.Table, query.TSV, query.CSV, query.JSON} {
		var out, notes bytes.Buffer
		if err := format.Write(&out, r, format.Options{Format: f, NoHeader: true, Notes: &notes}); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(out.Bytes(), []byte("note")) {
			t.Errorf("%v: the note is in the data: %q", f, out.String())
		}
		if notes.String() != "note: some answers have no id\n" {
			t.Errorf("%v: notes = %q", f, notes.String())
		}
		out.Reset()
		if err := format.Write(&out, r, format.Options{Format: f, NoHeader: true}); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(out.Bytes(), []byte("note")) {
			t.Errorf("%v without Notes: the note is in the data: %q", f, out.String())
		}
	}
	var out bytes.Buffer
	format.Write(&out, r, format.Options{Format: query.TSV, NoHeader: true, Notes: &bytes.Buffer{}})
	if out.String() != "a\nb\n" {
		t.Errorf("tsv --no-header = %q", out.String())
	}
}
