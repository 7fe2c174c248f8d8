package ingest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"gendex/store"
)

// TestGenOwnedFiles: gen's own answer and error lines are told from other
// tools' (GenOwned), and a file of gen's indexed under an --id path (as
// an older ingest --id on its folder did) is read again by its "id" when
// indexed as gen's (Source.BuiltinIDs), the stored path dropped.
func TestGenOwnedFiles(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "d")
	os.MkdirAll(dir, 0o755)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o644)
		return p
	}
	for _, tc := range []struct {
		content string
		own     bool
	}{
		{`{"id":"u1","output_ids":[1],"text":"a","completion_tokens":1,"finish_reason":"stop","matched_stop":2,"e2e_latency":0.1,"finished_at":"2026-12-05T10:00:00.000Z","server":"http://x"}` + "\n", true},
		{`{"id":"u2","error":"bad","failed_at":"2026-12-05T10:00:00.000Z"}` + "\n", true},
		{"", true},
		{`{"id":"u2","error":"bad"}` + "\n", false},
		{`{"question_id":81,"answer_id":"a","choices":[],"tstamp":1.7e9}` + "\n", false},
		{`{"meta":{"uid":"u1"},"id":"x","finished_at":"2026-12-05T10:00:00.000Z"}` + "\n", false},
	} {
		if got := GenOwned(write("raw_responses.jsonl", tc.content)); got != tc.own {
			t.Errorf("GenOwned(%q) = %v; want %v", tc.content, got, tc.own)
		}
	}

	db := openDB(t)
	ix := &Indexer{DB: db}
	errs := write("errors.jsonl", `{"id":"u2","error":"bad","failed_at":"2026-12-05T10:00:00.000Z"}`+"\n")
	index(t, ix, Source{Path: errs, Dataset: "d", Stage: store.Errors, IDPath: "meta.uid"})
	ids := func() []string {
		var ids []string
		db.View(func(v *store.View) error {
			return v.Each("d", store.Errors, func(r *store.Record) error { ids = append(ids, r.ID); return nil })
		})
		return ids
	}
	if got := ids(); len(got) != 0 {
		t.Fatalf("under meta.uid: %v; want none (the line has no meta.uid)", got)
	}
	res := index(t, ix, Source{Path: errs, Dataset: "d", Stage: store.Errors, BuiltinIDs: true})
	if got := ids(); !slices.Equal(got, []string{"u2"}) || res.Reindexed == "" {
		t.Errorf("as gen's own: ids %v, reindexed %q; want [u2], said", got, res.Reindexed)
	}
	if fs := fileState(t, db, errs); fs.IDPath != "" {
		t.Errorf("stored id path %q; want none", fs.IDPath)
	}
	if res := index(t, ix, Source{Path: errs, Dataset: "d", Stage: store.Errors, BuiltinIDs: true}); !res.Unchanged {
		t.Errorf("read again: %+v", res)
	}
}
