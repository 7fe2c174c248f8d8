package ingest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"gendex/store"
)

// TestIndexWrittenTakesNoReadBuffer: indexing the bytes a writer has just
// written reads them where they are; it takes no 1 MiB read buffer from
// the pool (one was taken and never given back, so every flush of gen and
// of its --export outputs allocated and cleared a fresh one). Not
// parallel: it counts the process's allocations.
func TestIndexWrittenTakesNoReadBuffer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raw_responses.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ix := &Indexer{DB: openDB(t)}
	src := Source{Path: path, Dataset: "d", Stage: store.Raw}
	var size int64
	write := func(i int) {
		data := fmt.Appendf(nil, `{"id":"a%d","completion_tokens":3,"finish_reason":"stop"}`+"\n", i)
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		if _, err := ix.IndexWritten(t.Context(), src, data, size, nil); err != nil {
			t.Fatal(err)
		}
		size += int64(len(data))
	}
	write(0) // the first opens what stays open
	const n = 40
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := 1; i <= n; i++ {
		write(i)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > readBuffer*3/4 {
		t.Fatalf("indexing one written line allocates %d bytes (a read buffer is %d; the index's commit takes some 300 KB)", per, readBuffer)
	}
}
