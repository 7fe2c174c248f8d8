package ingest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/store"
)

// TestFirstBytesChangedPastTheTail: a file whose first line is rewritten
// in place (same length), in a file long enough that the bytes hashed
// before its offset (the last 4 KiB) are untouched, is read again from
// its start: only the hash of its first bytes sees the change
// (.ci/mutants.txt, index-first-bytes). The old first line's record is
// gone, the new one's counted.
func TestFirstBytesChangedPastTheTail(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	ix := &Indexer{DB: db}
	path := filepath.Join(t.TempDir(), "d", "raw_responses.jsonl")
	os.MkdirAll(filepath.Dir(path), 0o755)
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, `{"id":"a%02d","text":"%s","completion_tokens":3}`+"\n", i, strings.Repeat("x", 200))
	}
	os.WriteFile(path, []byte(b.String()), 0o644)
	src := Source{Path: path, Dataset: "d", Stage: store.Raw}
	if res := index(t, ix, src); res.Added != 60 {
		t.Fatalf("first: %+v", res)
	}
	if st := fileState(t, db, path); st.Offset < headBytes+tailBytes {
		t.Fatalf("the file is %d bytes; the test wants its first and last 4 KiB apart", st.Offset)
	}
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.WriteAt([]byte(`{"id":"z00"`), 0) // as long as {"id":"a00"
	f.Close()
	res := index(t, ix, src)
	if !strings.Contains(res.Reindexed, "first bytes") || res.Added != 60 {
		t.Fatalf("after the first line changed: %+v; want it read again", res)
	}
	db.View(func(v *store.View) error {
		_, old, _ := v.Get("d", store.Raw, "a00")
		_, now, _ := v.Get("d", store.Raw, "z00")
		if old || !now {
			t.Errorf("a00 indexed %v, z00 %v; want the new first line's id only", old, now)
		}
		return nil
	})
}
