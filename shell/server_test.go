package shell

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/query"
	"gendex/store"
)

// TestDashboardShowsServers: watch's dashboard ends with a line per
// server gen reads: up, running, queued, gen's limit and its requests in
// flight (unknown, not 0, in a sample that does not keep them), KV use
// (in percent, as gen shows it) and the tokens/s of the
// server's own counter and of gendex's count, gen's retries on it over the
// last 30 s and the last one's error; a server without /metrics
// shows them unknown, with the hint. An index without servers shows no
// such lines (the other dashboard tests).
func TestDashboardShowsServers(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC) // at a second's start: the spans are whole seconds
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	run := now.Add(-time.Minute).UnixMilli()
	err = db.Update(func(tx *store.Tx) error {
		for i := range 3 { // 10 s apart: 1,000 tokens/s by the server, 990 by gendex
			at := now.Add(time.Duration(i-3) * 10 * time.Second).UnixMilli()
			s := &store.ServerSample{Time: at, Up: true, Scraped: true, Run: run, LastSeen: at,
				ClientTokens: int64(i) * 9900, ClientAnswers: int64(i) * 99, Retries: int64(i) * 6,
				Limit: 128 + int64(i)*64, InFlight: 120 + int64(i)}
			if i > 0 {
				s.LastError, s.LastErrorAt = "HTTP 500 'Failed to parse input'", at-500
			}
			s.Set(store.MetricRunning, 121)
			s.Set(store.MetricQueued, 3)
			s.Set(store.MetricTokenUsage, 0.7)
			s.Set(store.MetricGenTokens, float64(5000+i*10000))
			if err := tx.PutServerSample("http://a:30000", s); err != nil {
				return err
			}
			n := &store.ServerSample{Time: at, Up: true, NoMetrics: true, Run: run, ClientTokens: int64(i) * 5000}
			if err := tx.PutServerSample("http://b:30000", n); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.TSV}
	var b strings.Builder
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	want := "server\tup\trunning\tqueued\tlimit\tin flight\tkv_pct\ttokens/s server 30s\ttokens/s gendex 30s\tretries 30s\tlast error\tnote\n" +
		"http://a:30000\tyes\t121\t3\t256\t122\t70\t1000.0\t990.0\t12\tHTTP 500 'Failed to parse input'\t\n" +
		"http://b:30000\tyes\t\t\t\t\t\t\t500.0\t0\t\tno /metrics (HTTP 404): start the server with --enable-metrics (a router or gateway in front serves none)\n"
	if !strings.HasSuffix(b.String(), "\n"+want) {
		t.Errorf("dashboard:\n%s\nwant it to end with:\n%s", b.String(), want)
	}
}
