package gen

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"gendex/query"
	"gendex/query/live"

	"gendex/ingest/export"
	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

var (
	benchPrompts = flag.Int("prompts", 20000, "prompts in BenchmarkGenOverhead and BenchmarkLiveQuery")
	benchExport  = flag.String("export", "", "BenchmarkGenOverhead: conversations or ids, to measure gen --export")
	liveDecode   = flag.Float64("live-decode-tps", 1600, "BenchmarkLiveQuery: the simulator's decode speed, which sets gen's rate (about 5,000 answers/s at 1600)")
)

// BenchmarkGenOverhead measures the client's own cost: gen against a
// zero-latency simulator in the same process, every answer written,
// fsynced and indexed (and, with -export FORMAT, its training record
// decided, written, fsynced and indexed too). Reports answers/s.
func BenchmarkGenOverhead(b *testing.B) {
	_, url := simServer(b, sim.Config{Seed: 1})
	root := b.TempDir()
	writePrompts(b, root, "O", "ids", *benchPrompts)
	var x *export.Config
	if *benchExport != "" {
		f, err := export.ParseFormat(*benchExport)
		if err != nil {
			b.Fatal(err)
		}
		x = &export.Config{Format: f}
	}
	maxNew := 16
	i := 0
	for b.Loop() {
		i++
		out := filepath.Join(b.TempDir(), fmt.Sprint(i))
		sum, log, err := runGen(b, b.Context(), filepath.Join(out, "g.db"), Config{Servers: []string{url}, Out: out,
			Sampling: client.SamplingParams{MaxNewTokens: &maxNew}, Export: x}, root)
		if err != nil || sum.Responses != int64(*benchPrompts) || (x != nil && sum.Records+sum.Excluded != sum.Responses) {
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
			Sampling: client.SamplingParams{MaxNewTokens: &maxNew}}, root)
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

// BenchmarkLiveQuery: questions asked through the writer's socket while gen
// writes thousands of answers a second. It runs gen twice over the same
// prompts, without and with a client asking `progress` and
// `throughput --window 30s` back to back (with a 10 ms pause), and reports
// the questions' p50 and p99 latency and how much the writing rate dropped.
func BenchmarkLiveQuery(b *testing.B) {
	_, url := simServer(b, sim.Config{Seed: 1, DecodeTokensPerSec: *liveDecode})
	root := b.TempDir()
	n := *benchPrompts
	writePrompts(b, root, "L", "ids", n)
	maxNew := 50
	run := func(withQueries bool) (rate float64, lat []time.Duration) {
		out := b.TempDir()
		dbPath := filepath.Join(out, "g.db")
		db := openDB(b, dbPath)
		defer db.Close()
		sets, _ := FindDatasets([]string{root}, out)
		ln, err := live.Listen(live.SocketPath(dbPath))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(b.Context())
		defer cancel()
		go (&live.Server{Src: db}).Serve(ctx, ln)
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			if !withQueries {
				return
			}
			remote, err := live.Dial(ctx, live.SocketPath(dbPath))
			if err != nil {
				b.Error(err)
				return
			}
			qs := []query.Query{}
			for _, args := range [][]string{{"progress"}, {"throughput", "--window", "30s"}} {
				q, _ := query.Parse(args)
				qs = append(qs, q)
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Millisecond):
				}
				start := time.Now()
				if err := remote.Ask(ctx, qs[i%2], time.Now(), &query.Collect{}); err != nil {
					b.Error(err)
					return
				}
				lat = append(lat, time.Since(start))
			}
		}()
		sum, err := Run(b.Context(), db, Config{Servers: []string{url}, Out: out, Log: io.Discard, LogEvery: time.Hour,
			Sampling: client.SamplingParams{MaxNewTokens: &maxNew}}, sets)
		close(stop)
		<-done
		if err != nil || sum.Responses != int64(n) {
			b.Fatalf("%+v %v", sum, err)
		}
		return float64(sum.Responses) / sum.Elapsed.Seconds(), lat
	}
	for b.Loop() {
		quiet, _ := run(false)
		busy, lat := run(true)
		slices.Sort(lat)
		if len(lat) == 0 {
			b.Fatal("no question was answered")
		}
		b.ReportMetric(quiet, "answers/s_alone")
		b.ReportMetric(busy, "answers/s_with_queries")
		b.ReportMetric(100*(quiet-busy)/quiet, "drop_%")
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
		b.ReportMetric(float64(len(lat)), "questions")
	}
}
