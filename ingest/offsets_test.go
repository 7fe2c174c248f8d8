package ingest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/store"
)

// TestRewrittenInPlaceUnderTheOffset: a file rewritten in place with the
// same first 4 KiB and more bytes (a tool annotating lines where they are)
// is read again from its start, not taken as appended: by the hash of the
// bytes that end at its offset, and, in an index written before that hash
// was kept (tail_len 0), by the newline that ends its last indexed line
// when that is all there is to check. A file only appended to is not.
func TestRewrittenInPlaceUnderTheOffset(t *testing.T) {
	t.Parallel()
	for _, old := range []bool{false, true} {
		t.Run(fmt.Sprintf("old=%v", old), func(t *testing.T) {
			db := openDB(t)
			var c collector
			ix := &Indexer{DB: db, Report: c.report}
			path := filepath.Join(t.TempDir(), "d", "raw_responses.jsonl")
			os.MkdirAll(filepath.Dir(path), 0o755)
			var lines []string
			for i := range 40 {
				lines = append(lines, fmt.Sprintf(`{"id":"a%02d","text":"%s","completion_tokens":3}`+"\n", i, strings.Repeat("x", 200)))
			}
			os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644)
			src := Source{Path: path, Dataset: "d", Stage: store.Raw}
			if res := index(t, ix, src); res.Added != 40 {
				t.Fatalf("first: %+v", res)
			}
			if st := fileState(t, db, path); st.TailLen != min(tailBytes, st.Offset) || st.HeadLen != headBytes {
				t.Fatalf("state: head %d, tail %d of offset %d", st.HeadLen, st.TailLen, st.Offset)
			}
			// Appended: read from where it stopped.
			appendFile(t, path, `{"id":"b","text":"y","completion_tokens":1}`+"\n")
			if res := index(t, ix, src); res.Added != 1 || res.Reindexed != "" {
				t.Fatalf("append: %+v", res)
			}
			if old { // as an index written before the tail hash was kept
				err := db.Update(func(tx *store.Tx) error {
					st, _, err := tx.File(path)
					st.TailLen, st.TailSum = 0, 0
					if err == nil {
						err = tx.PutFile(&st)
					}
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			// Annotated in place past the first 4 KiB: read again.
			data, _ := os.ReadFile(path)
			at := strings.Index(string(data[headBytes:]), "\n") + headBytes + 1
			annotated := string(data[:at]) + strings.ReplaceAll(string(data[at:]), `{"id"`, `{"note":1,"id"`)
			f, _ := os.OpenFile(path, os.O_WRONLY, 0)
			f.WriteAt([]byte(annotated), 0)
			f.Close()
			res := index(t, ix, src)
			if !strings.Contains(res.Reindexed, "rewritten in place") || res.Added != 41 {
				t.Fatalf("rewrite: %+v", res)
			}
			if s := summary(t, db, "d").Stage(store.Raw); s.Records != 41 || s.Skipped != 0 {
				t.Errorf("after the rewrite: %d records, %d skipped; want 41, 0", s.Records, s.Skipped)
			}
		})
	}
}
