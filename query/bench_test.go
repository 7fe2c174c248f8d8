package query_test

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gendex/query"
	"gendex/query/format"
	"gendex/store"
)

var benchRecords = flag.Int("records", 10_000_000, "indexed records in the query benchmarks' index")

// benchNow is the end of the benchmark index's two hours of responses.
var benchNow = time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)

// benchDB opens (building it the first time, which takes a while) an index
// of *benchRecords records over 8 datasets: prompts, and responses for 99%
// of them with realistic token counts, finished over the two hours before
// benchNow. It is kept in the temp dir, keyed by size, for later runs.
func benchDB(b *testing.B) *store.DB {
	b.Helper()
	path := filepath.Join(os.TempDir(), fmt.Sprintf("gendex-query-bench-%d.db", *benchRecords))
	if _, err := os.Stat(path); err != nil {
		b.Logf("building %s (%d records) once", path, *benchRecords)
		if err := buildBenchDB(path, *benchRecords); err != nil {
			os.Remove(path)
			b.Fatal(err)
		}
	}
	db, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}

func buildBenchDB(path string, n int) error {
	db, err := store.Open(path+".tmp", store.Options{NoSync: true})
	if err != nil {
		return err
	}
	const datasets = 8
	perDataset := n / datasets / 2 // prompts and responses
	end := benchNow.UnixMilli()
	for d := range datasets {
		name := fmt.Sprintf("B%d_bench", d+1)
		for start := 0; start < perDataset; start += 100_000 {
			err := db.Update(func(tx *store.Tx) error {
				if start == 0 {
					for _, st := range []store.Stage{store.Prompts, store.Raw} {
						if err := tx.PutFile(&store.FileState{Path: fmt.Sprintf("/bench/%s/%s.jsonl", name, st), Dataset: name, Stage: st}); err != nil {
							return err
						}
					}
				}
				for i := start; i < min(start+100_000, perDataset); i++ {
					id := fmt.Sprintf("%s-%08d", name, i)
					p := store.Record{ID: id, Shape: store.ShapePrompt, PromptTokens: 800, CompletionTokens: store.Unknown,
						CachedTokens: store.Unknown, ReasoningTokens: store.Unknown, File: uint32(2*d + 1), Time: end}
					if _, err := tx.Add(name, store.Prompts, &p); err != nil {
						return err
					}
					if i%100 == 99 {
						continue // 1% missing
					}
					r := store.Record{ID: id, Shape: store.ShapeFlat, PromptTokens: 800, CompletionTokens: int64(1 + (i*7919)%16384),
						CachedTokens: 256, ReasoningTokens: 0, Finish: [...]string{"stop", "stop", "stop", "length"}[i%4],
						Time: end - int64((perDataset-i)*7_200_000/perDataset), OwnTime: true, File: uint32(2*d + 2)}
					if _, err := tx.Add(name, store.Raw, &r); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	if err := db.Close(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// BenchmarkQuery answers each question over the whole benchmark index,
// formatted as TSV (to io.Discard), as `gendex query` does.
func BenchmarkQuery(b *testing.B) {
	db := benchDB(b)
	for _, args := range [][]string{
		{"progress"}, {"tokens"}, {"finish"},
		{"throughput", "--window", "30s"}, {"throughput", "--window", "5m"}, {"throughput", "--window", "1h"},
		// One dataset's keys (an eighth of the index), with a row per id.
		{"missing", "B1_bench"}, {"missing", "B1_bench", "--stage", "tokenized"},
	} {
		q, err := query.Parse(args)
		if err != nil {
			b.Fatal(err)
		}
		q.Resolve(false)
		b.Run(fmt.Sprint(args), func(b *testing.B) {
			for b.Loop() {
				out := format.NewWriter(io.Discard, format.Options{Format: q.Format})
				if err := query.Run(db, q, benchNow, out); err != nil {
					b.Fatal(err)
				}
				out.Close()
			}
		})
	}
}
