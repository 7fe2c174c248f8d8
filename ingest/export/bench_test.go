package export

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"gendex/ingest"
	"gendex/store"
)

var benchAnswers = flag.Int("answers", 100_000, "BenchmarkExportIDs: single-turn answers to export")

// writeBenchData writes dir/B: n token-id prompts of 64 ids and their
// answers as gen writes them (~1 KB: 128 output_ids, a text), and returns
// the answers' size in bytes.
func writeBenchData(b *testing.B, dir string, n int) int64 {
	b.Helper()
	os.MkdirAll(dir, 0o755)
	pf, _ := os.Create(filepath.Join(dir, "prompts.jsonl"))
	rf, _ := os.Create(filepath.Join(dir, "raw_responses.jsonl"))
	pw, rw := bufio.NewWriter(pf), bufio.NewWriter(rf)
	var line []byte
	for i := range n {
		line = fmt.Appendf(line[:0], `{"id":"b%07d","input_ids":[1`, i)
		for j := range 63 {
			line = append(line, ',')
			line = strconv.AppendInt(line, int64(300+(i+j)%1000), 10)
		}
		pw.Write(append(line, "]}\n"...))
		line = fmt.Appendf(line[:0], `{"id":"b%07d","output_ids":[`, i)
		for j := range 128 {
			if j > 0 {
				line = append(line, ',')
			}
			line = strconv.AppendInt(line, int64(1000+(i*7+j*13)%30000), 10)
		}
		line = fmt.Appendf(line, `],"text":"%s","prompt_tokens":64,"completion_tokens":128,"cached_tokens":0,"reasoning_tokens":0,"finish_reason":"stop","matched_stop":2,"e2e_latency":1.5,"finished_at":"2026-12-01T10:00:00.000Z","server":"http://127.0.0.1:30000"}`+"\n",
			"The answer to this prompt is a few words long, as a short answer would be.")
		rw.Write(line)
	}
	pw.Flush()
	rw.Flush()
	pf.Close()
	rf.Close()
	fi, _ := os.Stat(filepath.Join(dir, "raw_responses.jsonl"))
	return fi.Size()
}

// BenchmarkExportIDs exports -answers single-turn answers in the ids
// format (their prompts' ids read from the prompt lines), the files
// already indexed, as a second `gendex export` after `gendex ingest` does:
// MB/s is of answer bytes read.
//
//	go test ./ingest/export -run '^$' -bench ExportIDs -benchtime 3x -answers 1000000
func BenchmarkExportIDs(b *testing.B) {
	root := b.TempDir()
	size := writeBenchData(b, filepath.Join(root, "B"), *benchAnswers)
	sets, err := Find([]string{root}, "")
	if err != nil || len(sets) != 1 {
		b.Fatal(sets, err)
	}
	d := sets[0]
	b.SetBytes(size)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		os.Remove(d.Tokenized())
		os.Remove(d.Excluded())
		db, err := store.Open(filepath.Join(b.TempDir(), fmt.Sprintf("g%d.db", i)), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ix := &ingest.Indexer{DB: db}
		for _, src := range d.Sources {
			if _, err := ix.IndexFile(b.Context(), src); err != nil {
				b.Fatal(err)
			}
		}
		ix.ReleaseAbove = 32 << 20 // as gendex export
		x := &Exporter{Ix: ix, Config: Config{Format: IDs}}
		b.StartTimer()
		res, err := x.Export(b.Context(), d)
		b.StopTimer()
		if err != nil || res.Records != *benchAnswers {
			b.Fatalf("%+v %v", res, err)
		}
		db.Close()
		b.StartTimer()
	}
}
