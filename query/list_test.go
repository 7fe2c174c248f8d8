package query_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
)

// TestList: list pages a stage in id order forwards and back, keeps one
// finish reason, says where the next page starts, shows unknown counts as
// unknown, lists errors with their message, and samples distinct ids.
func TestList(t *testing.T) {
	root := t.TempDir()
	var lines []string
	for i := range 12 {
		finish := "stop"
		if i%4 == 3 {
			finish = "length"
		}
		lines = append(lines, fmt.Sprintf(`{"id":"r%02d","text":"x","completion_tokens":%d,"finish_reason":%q}`, i, i+1, finish))
	}
	lines = append(lines, `{"id":"r99","text":"x"}`)
	writeFile(t, filepath.Join(root, "d", "raw_responses.jsonl"), strings.Join(lines, "\n")+"\n")
	writeFile(t, filepath.Join(root, "d", "errors.jsonl"), `{"id":"e1","error":"prompt too long"}`+"\n")
	db, _ := ingesttest.Index(t, root)
	ids := func(r *query.Result) string {
		var s []string
		for _, row := range r.Rows {
			s = append(s, fmt.Sprint(row[0]))
		}
		return strings.Join(s, " ")
	}
	cases := []struct {
		args      []string
		want      string
		moreAfter string
	}{
		{[]string{"list", "d", "--limit", "3"}, "r00 r01 r02", "r02"},
		{[]string{"list", "d", "--limit", "3", "--after", "r10"}, "r11 r99", ""},
		{[]string{"list", "d", "--limit", "3", "--before", "r05"}, "r02 r03 r04", "r02"},
		{[]string{"list", "d", "--finish", "length"}, "r03 r07 r11", ""},
		{[]string{"list", "d", "--finish", "length", "--limit", "2"}, "r03 r07", "r07"},
		{[]string{"list", "d", "--stage", "errors"}, "e1", ""},
	}
	for _, c := range cases {
		r := answer(t, db, time.Now(), c.args...)
		if got := ids(r); got != c.want {
			t.Errorf("%v: ids %q, want %q", c.args, got, c.want)
		}
		more := ""
		if r.Total != nil {
			if r.Total[0] != query.MoreAfter {
				t.Errorf("%v: total row %v", c.args, r.Total)
			}
			more = fmt.Sprint(r.Total[1])
		}
		if more != c.moreAfter {
			t.Errorf("%v: more after %q, want %q", c.args, more, c.moreAfter)
		}
	}
	r := answer(t, db, time.Now(), "list", "d", "--after", "r11")
	if len(r.Rows) != 1 || r.Rows[0][3] != nil || r.Rows[0][1] != nil {
		t.Errorf("a record without counts or finish reason: %v (want unknown, not 0)", r.Rows)
	}
	if !strings.HasSuffix(fmt.Sprint(r.Rows[0][7]), "raw_responses.jsonl:13") {
		t.Errorf("source %v, want the file and line 13", r.Rows[0][7])
	}
	r = answer(t, db, time.Now(), "list", "d", "--stage", "errors")
	if r.Rows[0][1] == nil || r.Rows[0][6] != "prompt too long" {
		t.Errorf("an error's row: %v", r.Rows[0])
	}
	r = answer(t, db, time.Now(), "list", "d", "--sample", "5")
	seen := map[any]bool{}
	for _, row := range r.Rows {
		seen[row[0]] = true
	}
	if len(r.Rows) != 5 || len(seen) != 5 {
		t.Errorf("sample of 5: %v", r.Rows)
	}
	writeFile(t, filepath.Join(root, "p", "prompts.jsonl"), `{"id":"p1","prompt":"a"}`+"\n"+`{"id":"p2","prompt":"b"}`+"\n"+`{"id":"p3","prompt":"c"}`+"\n")
	db2, _ := ingesttest.Index(t, root)
	for limit, want := range map[string]string{"2": "p1 p2", "0": "p1 p2 p3", "9": "p1 p2 p3"} {
		r := answer(t, db2, time.Now(), "missing", "p", "--limit", limit)
		var got []string
		for _, row := range r.Rows {
			got = append(got, fmt.Sprint(row[2]))
		}
		if strings.Join(got, " ") != want {
			t.Errorf("missing --limit %s: %v, want %s", limit, got, want)
		}
	}
	for _, bad := range [][]string{{"missing", "p", "--limit", "-1"}, {"list"}, {"list", "d", "--after", "a", "--before", "b"}, {"list", "d", "--limit", "-1"},
		{"list", "d", "--tool-stop", "any", "--stage", "errors"}, {"list", "d", "--tool-stop", "no_call", "--sample", "3"}} {
		if _, err := query.Parse(bad); err == nil {
			t.Errorf("%v: no usage error", bad)
		}
	}
}
