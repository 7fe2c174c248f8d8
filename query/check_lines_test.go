package query_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest"
	"gendex/ingest/ingesttest"
	"gendex/query"
)

// TestCheckFindsLineEditedInPlace: an answer line edited in place, its
// length the same and both ends of the file as the index read them, is
// found by check's disk look (its line's CRC differs): files_changed,
// blocking, naming the line; the file as indexed is not.
func TestCheckFindsLineEditedInPlace(t *testing.T) {
	root := t.TempDir()
	var prompts, raw bytes.Buffer
	for i := 1; i <= 200; i++ { // past the first 4 KiB the index keeps a digest of, and the last
		fmt.Fprintf(&prompts, `{"id":"p%d","text":"q%d"}`+"\n", i, i)
		fmt.Fprintf(&raw, `{"id":"p%d","text":"answer number %d","completion_tokens":3,"finish_reason":"stop"}`+"\n", i, i)
	}
	writeFile(t, filepath.Join(root, "d", "prompts.jsonl"), prompts.String())
	answers := filepath.Join(root, "d", "raw_responses.jsonl")
	writeFile(t, answers, raw.String())
	db, _ := ingesttest.Index(t, root)
	changed := func() (map[string]any, bool) {
		t.Helper()
		q, err := query.Parse([]string{"check", "d"})
		if err != nil {
			t.Fatal(err)
		}
		q.Check.FileChanged = ingest.Changed
		chk, err := query.Answer(db, q, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range chk.Rows {
			if chk.Get(r, "reason") == query.ReasonChanged {
				return map[string]any{"blocks": chk.Get(r, "blocks"), "detail": chk.Get(r, "detail")}, true
			}
		}
		return nil, false
	}
	if r, found := changed(); found {
		t.Fatalf("the file as indexed: %v; want no %s", r, query.ReasonChanged)
	}
	edited := strings.Replace(raw.String(), "answer number 120", "answer NUMBER 120", 1) // the same length, the ends untouched
	os.WriteFile(answers, []byte(edited), 0o644)
	later := time.Now().Add(2 * time.Second) // a write the index did not see, whatever the clock's grain
	os.Chtimes(answers, later, later)
	r, found := changed()
	if !found || r["blocks"] != true || !strings.Contains(fmt.Sprint(r["detail"]), "line 120") {
		t.Errorf("line 120 edited in place: %v (found %v); want %s, blocking, naming line 120", r, found, query.ReasonChanged)
	}
}
