package query_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/format"
)

// cutOf counts the responses of a model dataset cut at the token limit
// (finish reason length).
func cutOf(raw map[string]mRec) int64 {
	var n int64
	for _, r := range raw {
		if r.finish == "length" {
			n++
		}
	}
	return n
}

// TestTruncated: progress and tokens count, per dataset and in TOTAL, the
// responses whose finish reason is length, in every shape a response comes
// in (gendex's flat line, SGLang's meta_info object, OpenAI's choices, a
// conversation line), each id once; JSON and TSV under the key truncated.
func TestTruncated(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "c", "raw_responses.jsonl"), strings.Join([]string{
		`{"id":"a","text":"x","completion_tokens":8,"finish_reason":"length"}`,
		`{"id":"b","text":"x","meta_info":{"completion_tokens":8,"finish_reason":{"type":"length","length":8}}}`,
		`{"id":"c","choices":[{"message":{"content":"x"},"finish_reason":"length"}],"usage":{"completion_tokens":8}}`,
		`{"id":"d","turns":[{"text":"t","finish_reason":"stop"},{"text":"u","finish_reason":"length"}],"completion_tokens":9,"finish_reason":"length"}`,
		`{"id":"e","text":"x","completion_tokens":3,"finish_reason":"stop"}`,
		`{"id":"f","text":"x","completion_tokens":3}`,
		`{"id":"a","text":"x","completion_tokens":8,"finish_reason":"length"}`, // a duplicate: counted once
	}, "\n")+"\n")
	writeFile(t, filepath.Join(root, "z", "raw_responses.jsonl"), `{"id":"q","text":"y","completion_tokens":2,"finish_reason":"stop"}`+"\n")
	db, _ := ingesttest.Index(t, root)
	want := map[string]int64{"c": 4, "z": 0, "TOTAL": 4}
	for _, q := range []string{"progress", "tokens"} {
		r := answer(t, db, time.Now(), q)
		col := -1
		for i, c := range r.Columns {
			if c == "truncated" {
				col = i
			}
		}
		if col < 0 {
			t.Fatalf("%s columns %v: no truncated", q, r.Columns)
		}
		for _, row := range append(r.Rows, r.Total) {
			name := row[0].(string)
			if got := norm(row[col]); got != want[name] {
				t.Errorf("%s %s truncated = %v; want %d", q, name, got, want[name])
			}
		}
		var js bytes.Buffer
		if err := format.Write(&js, r, format.Options{Format: query.JSON}); err != nil {
			t.Fatal(err)
		}
		var rows []map[string]any
		if err := json.Unmarshal(js.Bytes(), &rows); err != nil {
			t.Fatal(err)
		}
		if rows[0]["dataset"] != "c" || rows[0]["truncated"] != 4.0 {
			t.Errorf("%s JSON: %v; want c with truncated 4", q, rows[0])
		}
		var tsv bytes.Buffer
		if err := format.Write(&tsv, r, format.Options{Format: query.TSV}); err != nil {
			t.Fatal(err)
		}
		if head := strings.Split(strings.SplitN(tsv.String(), "\n", 2)[0], "\t"); head[col] != "truncated" {
			t.Errorf("%s TSV header %q: truncated is not column %d", q, head, col)
		}
	}
}
