package query_test

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/format"
	"gendex/store"
)

// TestSkipped: progress and tokens say how many lines of each dataset's
// files were left out (invalid JSON, no id, not storable), as an integer in
// every format; the table shows the column only when one is not 0, TSV and
// JSON always.
func TestSkipped(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("i", store.MaxIDLen+1)
	writeFile(t, filepath.Join(root, "s", "prompts.jsonl"), `{"id":"a","text":"x"}`+"\n"+`{"id":"b","text":`+"\n"+`{"id":"c","text":"z"}`+"\n")
	writeFile(t, filepath.Join(root, "s", "raw_responses.jsonl"),
		`{"id":"a","completion_tokens":4}`+"\n"+`{"completion_tokens":9}`+"\n"+`{"id":"`+long+`","completion_tokens":5}`+"\n")
	writeFile(t, filepath.Join(root, "z", "raw_responses.jsonl"), `{"id":"q","completion_tokens":2}`+"\n")
	db, problems := ingesttest.Index(t, root)
	if len(problems) != 3 {
		t.Errorf("problems %v; want the three lines left out", problems)
	}
	render := func(f query.Format, args ...string) string {
		t.Helper()
		var b bytes.Buffer
		if err := format.Write(&b, answer(t, db, time.Now(), args...), format.Options{Format: f}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, q := range []string{"progress", "tokens"} {
		r := answer(t, db, time.Now(), q)
		last := slices.Index(r.Columns, "skipped")
		if last < 0 {
			t.Fatalf("%s columns %v: want skipped", q, r.Columns)
		}
		if got := []any{norm(r.Rows[0][last]), norm(r.Rows[1][last]), norm(r.Total[last])}; got[0] != int64(3) || got[1] != int64(0) || got[2] != int64(3) {
			t.Errorf("%s skipped s, z, TOTAL = %v; want 3, 0, 3", q, got)
		}
		table := render(query.Table, q)
		if head := strings.Fields(strings.SplitN(table, "\n", 2)[0]); head[len(head)-1] != "skipped" {
			t.Errorf("%s table does not show skipped:\n%s", q, table)
		}
		// z alone has none: the table leaves the column out, TSV and JSON keep it.
		if table := render(query.Table, q, "z"); strings.Contains(table, "skipped") {
			t.Errorf("%s z table shows a skipped column of zeros:\n%s", q, table)
		}
		tsv := strings.Split(render(query.TSV, q, "z"), "\n")
		head, row := strings.Split(tsv[0], "\t"), strings.Split(tsv[1], "\t")
		if i := slices.Index(head, "skipped"); i < 0 || len(row) != len(head) || row[i] != "0" {
			t.Errorf("%s z TSV:\n%s", q, strings.Join(tsv, "\n"))
		}
		if js := render(query.JSON, q, "s"); !strings.Contains(js, `"skipped": 3`) {
			t.Errorf("%s s JSON:\n%s", q, js)
		}
	}
}
