package format_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gendex/query"
	"gendex/query/format"
	"gendex/store/terminal"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/query")

// golden compares got with testdata/query/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("..", "..", "testdata", "query", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run 'go test ./query -update' to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with -update after checking):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// mixed has every kind of value, including unknowns and awkward strings.
func mixed() *query.Result {
	return &query.Result{
		Columns: []string{"dataset", "prompts", "done_pct", "avg_tokens", "note"},
		Rows: [][]any{
			{"alpha", uint64(12), query.Fixed{V: 75, Prec: 2}, query.Fixed{V: 1.0 / 3, Prec: 1}, "tab\there"},
			{"beta", nil, nil, nil, "line1\nline2\tend"},
			{"gamma,comma", int64(-3), query.Fixed{V: 100, Prec: 0}, query.Fixed{V: 2.25, Prec: 3}, `quote "q" <b>&amp;</b>`},
		},
		Total: []any{"TOTAL", uint64(9), nil, query.Fixed{V: 1.5, Prec: 1}, nil},
	}
}

func oneRow() *query.Result {
	return &query.Result{
		Columns: []string{"dataset", "records", "p50_completion_tokens"},
		Rows:    [][]any{{"alpha", uint64(7), int64(10)}},
		Total:   []any{"TOTAL", uint64(7), int64(10)},
	}
}

func noRows() *query.Result {
	return &query.Result{Columns: []string{"dataset", "stage", "id"}}
}

func render(t *testing.T, r *query.Result, opts format.Options) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := format.Write(&buf, r, opts); err != nil {
		t.Fatalf("Write(%v): %v", opts.Format, err)
	}
	return buf.Bytes()
}

func TestWriteGolden(t *testing.T) {
	results := map[string]func() *query.Result{"mixed": mixed, "one": oneRow, "empty": noRows}
	formats := []struct {
		name string
		opts format.Options
	}{
		{"table", format.Options{Format: query.Table}},
		{"tsv", format.Options{Format: query.TSV}},
		{"tsv-noheader", format.Options{Format: query.TSV, NoHeader: true}},
		{"csv", format.Options{Format: query.CSV}},
		{"csv-noheader", format.Options{Format: query.CSV, NoHeader: true}},
		{"json", format.Options{Format: query.JSON}},
	}
	for rname, mk := range results {
		for _, f := range formats {
			t.Run(rname+"/"+f.name, func(t *testing.T) {
				golden(t, rname+"."+f.name+".golden", render(t, mk(), f.opts))
			})
		}
	}
}

func TestWriteTSV(t *testing.T) {
	got := string(render(t, mixed(), format.Options{Format: query.TSV}))
	want := "dataset\tprompts\tdone_pct\tavg_tokens\tnote\n" +
		"alpha\t12\t75.00\t0.3\ttab here\n" +
		"beta\t\t\t\tline1 line2 end\n" +
		"gamma,comma\t-3\t100\t2.250\tquote \"q\" <b>&amp;</b>\n"
	if got != want {
		t.Errorf("TSV:\n got %q\nwant %q", got, want)
	}
	// Every line has exactly one field per column: no tab or newline leaks out of a cell.
	for i, line := range strings.Split(strings.TrimSuffix(got, "\n"), "\n") {
		if n := strings.Count(line, "\t") + 1; n != 5 {
			t.Errorf("line %d has %d fields: %q", i+1, n, line)
		}
	}
	if strings.Contains(got, "TOTAL") {
		t.Errorf("TSV holds the TOTAL row; it is for tables only:\n%s", got)
	}

	noHeader := string(render(t, mixed(), format.Options{Format: query.TSV, NoHeader: true}))
	if noHeader != strings.SplitN(want, "\n", 2)[1] {
		t.Errorf("TSV --no-header:\n got %q\nwant %q", noHeader, strings.SplitN(want, "\n", 2)[1])
	}
	// A carriage return (CRLF from a server message) is replaced too.
	cr := &query.Result{Columns: []string{"id", "message"}, Rows: [][]any{{"a\rb", "x\r\ny\tz"}}}
	if got, want := string(render(t, cr, format.Options{Format: query.TSV, NoHeader: true})), "a b\tx  y z\n"; got != want {
		t.Errorf("TSV with CR: got %q, want %q", got, want)
	}
	// Auto (the caller did not decide) is written as TSV.
	if auto := string(render(t, mixed(), format.Options{})); auto != want {
		t.Errorf("Auto:\n got %q\nwant TSV %q", auto, want)
	}
}

func TestWriteCSV(t *testing.T) {
	out := render(t, mixed(), format.Options{Format: query.CSV})
	recs, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatalf("CSV does not parse: %v\n%s", err, out)
	}
	want := [][]string{
		{"dataset", "prompts", "done_pct", "avg_tokens", "note"},
		{"alpha", "12", "75.00", "0.3", "tab\there"},
		{"beta", "", "", "", "line1\nline2\tend"},
		{"gamma,comma", "-3", "100", "2.250", `quote "q" <b>&amp;</b>`},
	}
	if !reflect.DeepEqual(recs, want) {
		t.Errorf("CSV records:\n got %q\nwant %q", recs, want)
	}
	if !bytes.Contains(out, []byte(`"gamma,comma"`)) || !bytes.Contains(out, []byte(`"quote ""q"" <b>&amp;</b>"`)) {
		t.Errorf("CSV does not quote commas and quotes:\n%s", out)
	}
	noHeader, err := csv.NewReader(bytes.NewReader(render(t, mixed(), format.Options{Format: query.CSV, NoHeader: true}))).ReadAll()
	if err != nil || !reflect.DeepEqual(noHeader, want[1:]) {
		t.Errorf("CSV --no-header = %q, %v; want %q", noHeader, err, want[1:])
	}
}

// jsonObjects decodes an array of objects, keeping each object's key order
// and its numbers as written.
func jsonObjects(t *testing.T, b []byte) (keys [][]string, objs []map[string]any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	expect := func(want json.Delim) {
		tok, err := dec.Token()
		if err != nil || tok != want {
			t.Fatalf("JSON: got token %v (%v), want %v in\n%s", tok, err, want, b)
		}
	}
	expect('[')
	for dec.More() {
		expect('{')
		var ks []string
		obj := map[string]any{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				t.Fatalf("JSON key: %v\n%s", err, b)
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("JSON value: %v\n%s", err, b)
			}
			ks = append(ks, k.(string))
			obj[k.(string)] = v
		}
		expect('}')
		keys = append(keys, ks)
		objs = append(objs, obj)
	}
	expect(']')
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("JSON: trailing data after the array (%v)\n%s", err, b)
	}
	return keys, objs
}

func TestWriteJSON(t *testing.T) {
	r := mixed()
	out := render(t, r, format.Options{Format: query.JSON})
	if !json.Valid(out) {
		t.Fatalf("not valid JSON:\n%s", out)
	}
	keys, objs := jsonObjects(t, out)
	if len(objs) != len(r.Rows) {
		t.Fatalf("%d objects, want %d (one per row, no TOTAL)", len(objs), len(r.Rows))
	}
	for i := range objs {
		if !reflect.DeepEqual(keys[i], r.Columns) {
			t.Errorf("object %d keys %q, want the columns in order %q", i, keys[i], r.Columns)
		}
	}
	want := []map[string]any{
		{"dataset": "alpha", "prompts": json.Number("12"), "done_pct": json.Number("75.00"), "avg_tokens": json.Number("0.3"), "note": "tab\there"},
		{"dataset": "beta", "prompts": nil, "done_pct": nil, "avg_tokens": nil, "note": "line1\nline2\tend"},
		{"dataset": "gamma,comma", "prompts": json.Number("-3"), "done_pct": json.Number("100"), "avg_tokens": json.Number("2.250"), "note": `quote "q" <b>&amp;</b>`},
	}
	if !reflect.DeepEqual(objs, want) {
		t.Errorf("JSON objects:\n got %#v\nwant %#v", objs, want)
	}
	for _, s := range []string{`"done_pct": 75.00`, `"prompts": null`, `<b>&amp;</b>`} {
		if !bytes.Contains(out, []byte(s)) {
			t.Errorf("JSON lacks %s (numbers as shown, null for unknown, no HTML escaping):\n%s", s, out)
		}
	}
	if bytes.Contains(out, []byte(`\u003c`)) || bytes.Contains(out, []byte("TOTAL")) {
		t.Errorf("JSON has HTML escapes or the TOTAL row:\n%s", out)
	}

	empty := render(t, noRows(), format.Options{Format: query.JSON})
	if strings.TrimSpace(string(empty)) != "[]" {
		t.Errorf("JSON of no rows = %q, want []", empty)
	}
}

func TestWriteTable(t *testing.T) {
	r := mixed()
	r.Rows[1][4] = "plain" // one line per row here; multi-line cells are in the golden file
	out := string(render(t, r, format.Options{Format: query.Table}))
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("table has %d lines, want header + 3 rows + TOTAL:\n%s", len(lines), out)
	}
	if got := strings.Fields(lines[0]); !reflect.DeepEqual(got, r.Columns) {
		t.Errorf("header %q, want the column names as typed %q", got, r.Columns)
	}
	if strings.Contains(out, "DONE") || strings.Contains(out, "done pct") {
		t.Errorf("header was auto-formatted:\n%s", out)
	}
	if got := strings.Fields(lines[2]); len(got) < 4 || got[0] != "beta" || got[1] != format.Unknown || got[2] != format.Unknown || got[3] != format.Unknown {
		t.Errorf("row with unknowns = %q, want them shown as %q", got, format.Unknown)
	}
	if got := strings.Fields(lines[4]); len(got) < 4 || got[0] != "TOTAL" || got[1] != "9" || got[2] != format.Unknown || got[3] != "1.5" {
		t.Errorf("TOTAL row = %q, want TOTAL 9 unknown 1.5 ...", got)
	}
	// Numbers are right-aligned: the column's values end in the same place.
	col := strings.Index(lines[1], "0.3") + len("0.3")
	if !strings.HasSuffix(lines[3][:col], "2.250") {
		t.Errorf("numeric column is not right-aligned:\n%s", out)
	}

	one := string(render(t, oneRow(), format.Options{Format: query.Table}))
	if strings.Contains(one, "TOTAL") {
		t.Errorf("a one-row table has a TOTAL row:\n%s", one)
	}
	if n := strings.Count(strings.TrimRight(one, "\n"), "\n") + 1; n != 2 {
		t.Errorf("one-row table has %d lines, want 2:\n%s", n, one)
	}
	empty := string(render(t, noRows(), format.Options{Format: query.Table}))
	if strings.Contains(empty, "TOTAL") || !strings.Contains(empty, "dataset") {
		t.Errorf("empty table = %q, want the header only", empty)
	}
}

// A table goes to a terminal: what a cell holds (an error message from a
// server, an id, a folder name) must not move the cursor or change colours.
func TestWriteTableNoControlCharacters(t *testing.T) {
	r := &query.Result{
		Columns: []string{"dataset", "id", "message"},
		Rows: [][]any{
			{"alpha", "a1", "first line\r\nsecond line"},
			{"alpha", "a2", "boom \x1b[2J\x1b[31mred\x07"},
		},
	}
	out := render(t, r, format.Options{Format: query.Table})
	for i, c := range out {
		if c < 0x20 && c != '\n' || c == 0x7f {
			t.Fatalf("table output has control byte 0x%02x at %d:\n%q", c, i, out)
		}
	}
}

func TestWriteLine(t *testing.T) {
	// The answer to show is written as it is, in every format.
	line := []byte(`{"id":"x","text":"<a>\t&"}`)
	for _, f := range []query.Format{query.Table, query.TSV, query.CSV, query.JSON} {
		got := render(t, &query.Result{Line: line}, format.Options{Format: f})
		if want := append(append([]byte{}, line...), '\n'); !bytes.Equal(got, want) {
			t.Errorf("%v: got %q, want %q", f, got, want)
		}
	}
}

// NewWriter streams: what Run sends it is what Write renders from a Result.
func TestNewWriterStreams(t *testing.T) {
	for _, f := range []query.Format{query.Table, query.TSV, query.CSV, query.JSON} {
		r := mixed()
		var buf bytes.Buffer
		w := format.NewWriter(&buf, format.Options{Format: f})
		if err := w.Columns(r.Columns); err != nil {
			t.Fatal(err)
		}
		for _, row := range r.Rows {
			if err := w.Row(row); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Total(r.Total); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if want := render(t, r, format.Options{Format: f}); !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%v: NewWriter gave\n%s\nWrite gave\n%s", f, buf.Bytes(), want)
		}
	}
}

// TestTableHidesZeroCounts: a table leaves out skipped, excluded and turns
// while they are 0 in every row and the total, and shows them otherwise;
// TSV keeps every column.
func TestTableHidesZeroCounts(t *testing.T) {
	r := &query.Result{Columns: []string{"dataset", "raw", "excluded", "turns", "skipped"},
		Rows:  [][]any{{"a", uint64(3), uint64(0), uint64(0), uint64(0)}, {"b", uint64(2), uint64(1), uint64(0), uint64(0)}},
		Total: []any{"TOTAL", uint64(5), uint64(1), uint64(0), uint64(0)}}
	head := strings.Fields(strings.SplitN(string(render(t, r, format.Options{Format: query.Table})), "\n", 2)[0])
	if !reflect.DeepEqual(head, []string{"dataset", "raw", "excluded"}) {
		t.Errorf("table header %q, want turns and skipped hidden, excluded shown", head)
	}
	if tsv := string(render(t, r, format.Options{Format: query.TSV})); !strings.HasPrefix(tsv, "dataset\traw\texcluded\tturns\tskipped\n") {
		t.Errorf("TSV dropped a column:\n%s", tsv)
	}
}

// TestServersLegendFitsTheWidth: the legend under a table whose servers
// share a host too long for the line ("servers: http://HOST:PORT") is cut
// in the middle within the width, its :PORT kept.
func TestServersLegendFitsTheWidth(t *testing.T) {
	host := "gpu-node-17.a-very-long-cluster-domain-name.example.internal.company.com"
	r := &query.Result{Columns: []string{"server", "up"}, Rows: [][]any{{"http://" + host + ":30000", true}, {"http://" + host + ":30001", false}}}
	var b bytes.Buffer
	if err := format.Write(&b, r, format.Options{Format: query.Table, Width: 80, Layout: "watch-servers"}); err != nil {
		t.Fatal(err)
	}
	legend := ""
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if strings.HasPrefix(l, "servers: ") {
			legend = l
		}
		if terminal.Width(l) > 80 {
			t.Errorf("a line of %d columns at 80:\n%s", terminal.Width(l), b.String())
		}
	}
	if !strings.HasPrefix(legend, "servers: http://gpu-node-17") || !strings.HasSuffix(legend, "…:PORT") {
		t.Errorf("the servers' legend: %q; want it cut in the middle, its :PORT kept\n%s", legend, b.String())
	}
}
