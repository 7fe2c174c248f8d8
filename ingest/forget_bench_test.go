package ingest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"gendex/store"
)

// BenchmarkForget times forgetting a 1M-record response file (truncated to
// nothing) in a dataset whose other shard keeps 1M records, fsync on.
// Setup (indexing both shards) is not timed. Run it with -benchtime=1x.
func BenchmarkForget(b *testing.B) {
	const n = 1_000_000
	dir := b.TempDir()
	gone := filepath.Join(dir, "raw_responses.jsonl")
	kept := filepath.Join(dir, "raw_responses.2.jsonl")
	writeResponses(b, kept, n, 200)
	// Other ids than the forgotten shard's: not a sibling, left alone.
	data, err := os.ReadFile(kept)
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(kept, bytes.ReplaceAll(data, []byte(`"id":"ds-`), []byte(`"id":"kp-`)), 0o644); err != nil {
		b.Fatal(err)
	}
	var alloc, peak uint64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		writeResponses(b, gone, n, 200)
		os.Remove(filepath.Join(dir, "gendex.db"))
		db, err := store.Open(filepath.Join(dir, "gendex.db"), store.Options{NoSync: os.Getenv("NOSYNC") != ""})
		if err != nil {
			b.Fatal(err)
		}
		ix := &Indexer{DB: db}
		for _, p := range []string{gone, kept} {
			if _, err := ix.IndexFile(context.Background(), Source{Path: p, Dataset: "ds", Stage: store.Raw}); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.Truncate(gone, 0); err != nil {
			b.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		// Sample the live heap while the forget runs (a measurement, not
		// a synchronisation: the result is read after wg.Wait).
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var top uint64
		wg.Go(func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				top = max(top, m.HeapInuse)
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
		b.StartTimer()
		res, err := ix.IndexFile(context.Background(), Source{Path: gone, Dataset: "ds", Stage: store.Raw})
		b.StopTimer()
		close(stop)
		wg.Wait()
		peak = max(peak, top-min(top, m0.HeapInuse))
		runtime.ReadMemStats(&m1)
		alloc += m1.TotalAlloc - m0.TotalAlloc
		if err != nil || res.Reindexed == "" || res.Added != 0 {
			b.Fatal(res, err)
		}
		db.Close()
	}
	b.ReportMetric(float64(alloc)/float64(b.N)/(1<<20), "MB-alloc/op")
	b.ReportMetric(float64(peak)/(1<<20), "MB-peak-heap-growth")
}
