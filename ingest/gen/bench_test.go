package gen

import (
	"flag"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gendex/ingest/sglang"
	"gendex/ingest/sim"
)

var benchPrompts = flag.Int("prompts", 20000, "prompts in BenchmarkGenOverhead")

// BenchmarkGenOverhead measures the client's own cost: gen against a
// zero-latency simulator in the same process, every answer written,
// fsynced and indexed. Reports answers/s.
func BenchmarkGenOverhead(b *testing.B) {
	_, url := simServer(b, sim.Config{Seed: 1})
	root := b.TempDir()
	writePrompts(b, root, "O", "ids", *benchPrompts)
	maxNew := 16
	i := 0
	for b.Loop() {
		i++
		out := filepath.Join(b.TempDir(), fmt.Sprint(i))
		sum, log, err := runGen(b, b.Context(), filepath.Join(out, "g.db"), Config{Servers: []string{url}, Out: out,
			Sampling: sglang.SamplingParams{MaxNewTokens: &maxNew}}, root)
		if err != nil || sum.Responses != int64(*benchPrompts) {
			b.Fatalf("%+v %v\n%s", sum, err, log)
		}
	}
	b.ReportMetric(float64(*benchPrompts)*float64(b.N)/b.Elapsed().Seconds(), "answers/s")
}

// BenchmarkGenOccupancy keeps a busy server full: a simulator with 128
// slots decoding at 100 tokens/s per request, three datasets of 400
// prompts, gen at its default concurrency (128). It reports the lowest and
// the mean share of slots busy per second, from the first second until the
// last prompt is sent (after that fewer prompts are left than slots), so
// that a pause at a dataset boundary would show.
func BenchmarkGenOccupancy(b *testing.B) {
	for b.Loop() {
		s, url := simServer(b, sim.Config{Seed: 2, Slots: 128, DecodeTokensPerSec: 100})
		root := b.TempDir()
		for _, name := range []string{"A", "B", "C"} {
			writePrompts(b, root, name, "ids", 400)
		}
		out := b.TempDir()
		maxNew := 200
		done := make(chan struct{})
		var lastSent float64
		go func() {
			start := time.Now()
			for {
				select {
				case <-done:
					return
				case <-time.After(20 * time.Millisecond):
				}
				if s.Stats().Requests < 1200 {
					lastSent = time.Since(start).Seconds()
				}
			}
		}()
		sum, log, err := runGen(b, b.Context(), filepath.Join(out, "g.db"), Config{Servers: []string{url}, Out: out,
			Sampling: sglang.SamplingParams{MaxNewTokens: &maxNew}}, root)
		close(done)
		if err != nil || sum.Responses != 1200 {
			b.Fatalf("%+v %v\n%s", sum, err, log)
		}
		series := s.OccupancySeries()
		full := int(lastSent) // whole seconds before the last prompt was sent
		if full < 2 || full > len(series) {
			b.Fatalf("last prompt sent at %.1fs of %d", lastSent, len(series))
		}
		lowest, mean := 1.0, 0.0
		for _, o := range series[:full] {
			lowest = min(lowest, o)
			mean += o / float64(full)
		}
		b.Logf("busy per second: %.4f", series)
		b.ReportMetric(100*lowest, "min_busy_%")
		b.ReportMetric(100*mean, "mean_busy_%")
		b.ReportMetric(float64(full), "full_seconds")
	}
}
