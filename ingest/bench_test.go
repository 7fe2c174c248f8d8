package ingest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/store"
)

// writeResponses writes n flat response lines of about lineBytes each.
func writeResponses(tb testing.TB, path string, n, lineBytes int) int64 {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	ids := strings.Repeat("163606,2675,374,264,", max(0, (lineBytes-300)/20))
	for i := range n {
		tokens := 1 + i%4000
		if lineBytes > 1000 {
			fmt.Fprintf(w, `{"id":"ds-%08d","output_ids":[%s2],"text":"some text","prompt_tokens":812,"completion_tokens":%d,"cached_tokens":256,"reasoning_tokens":0,"finish_reason":"stop","matched_stop":2,"e2e_latency":41.207,"finished_at":"2026-11-28T09:14:03.512Z","server":"http://127.0.0.1:30000"}`+"\n", i, ids, tokens)
		} else {
			fmt.Fprintf(w, `{"id":"ds-%08d","text":"The answer is forty-two.","prompt_tokens":812,"completion_tokens":%d,"cached_tokens":0,"finish_reason":"stop","e2e_latency":4.2,"finished_at":"2026-11-28T09:14:03.512Z"}`+"\n", i, tokens)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	fi, _ := f.Stat()
	f.Close()
	return fi.Size()
}

// BenchmarkIndexFile indexes a whole file into a new index, fsync on.
func BenchmarkIndexFile(b *testing.B) {
	for _, c := range []struct {
		name     string
		n, bytes int
	}{{"10KB", 20_000, 10_000}, {"200B", 500_000, 200}} {
		b.Run(c.name, func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "raw_responses.jsonl")
			size := writeResponses(b, path, c.n, c.bytes)
			b.SetBytes(size)
			i := 0
			for b.Loop() {
				i++
				db, err := store.Open(filepath.Join(dir, fmt.Sprintf("%d.db", i)), store.Options{NoSync: os.Getenv("NOSYNC") != ""})
				if err != nil {
					b.Fatal(err)
				}
				ix := &Indexer{DB: db}
				res, err := ix.IndexFile(context.Background(), Source{Path: path, Dataset: "ds", Stage: store.Raw})
				if err != nil || res.Added != c.n {
					b.Fatal(res, err)
				}
				db.Close()
				os.Remove(filepath.Join(dir, fmt.Sprintf("%d.db", i)))
			}
			b.ReportMetric(float64(c.n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
