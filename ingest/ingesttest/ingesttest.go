// Package ingesttest builds indexes for the tests of the packages that read
// them (query, query/live, shell, gen's progress lines), with the ingest code gendex itself uses.
package ingesttest

import (
	"path/filepath"
	"testing"

	"gendex/ingest"
	"gendex/store"
)

// Index builds a fresh store from the files under root, in a temporary
// directory closed when the test ends, and returns it with the problems
// ingest reported. It fails t if root holds no file to index.
func Index(t testing.TB, root string) (*store.DB, []ingest.Problem) {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "index.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db, IndexInto(t, db, root)
}

// IndexInto indexes the files under root into db, as `gendex ingest root`
// does, and returns the problems ingest reported. It fails t if root holds
// no file to index or a file cannot be indexed. Call it from the test's
// goroutine.
func IndexInto(t testing.TB, db *store.DB, root string) []ingest.Problem {
	t.Helper()
	srcs, err := ingest.Discover(root, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) == 0 {
		t.Fatalf("no files under %s", root)
	}
	var problems []ingest.Problem
	ix := &ingest.Indexer{DB: db, Report: func(p ingest.Problem) { problems = append(problems, p) }}
	for _, src := range srcs {
		if _, err := ix.IndexFile(t.Context(), src); err != nil {
			t.Fatalf("indexing %s: %v", src.Path, err)
		}
	}
	return problems
}
