package live_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/query/live"
	"gendex/store"
	"gendex/store/prom/promtest"
)

// TestMetricsServerLimit: /metrics has gen's limit on each server of its
// run, from the server's last sample, with HELP saying what it is; no
// sample for a server whose sample keeps no limit (an older gen: not
// known, not 0), for a server of an earlier run, or for one whose last
// sample is older than a run that still samples it would leave; promtool
// reads it.
func TestMetricsServerLimit(t *testing.T) {
	db, err := store.Open(filepath.Join(t.TempDir(), "m.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	now := time.Now()
	run := now.Add(-time.Minute).UnixMilli()
	err = db.Update(func(tx *store.Tx) error {
		for _, s := range []struct {
			server string
			ago    time.Duration
			run    int64
			limit  int64
		}{
			{"http://gpu1:30000", 10 * time.Second, run, 128}, // raised since: the last sample wins
			{"http://gpu1:30000", 5 * time.Second, run, 1040},
			{"http://gpu2:30000", 5 * time.Second, run, 0},        // a sample without a limit
			{"http://old:30000", 5 * time.Second, run - 1000, 64}, // an earlier run's
			{"http://gone:30000", 10 * time.Minute, run, 256},     // sampled no more
			{"http://gpu3:30000", 4 * time.Second, run, 512},      //
		} {
			at := now.Add(-s.ago).UnixMilli()
			x := &store.ServerSample{Time: at, Up: true, Run: s.run, Limit: s.limit, InFlight: s.limit / 2}
			if err := tx.PutServerSample(s.server, x); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	body := scrape(t, &live.Server{Src: db})
	var got []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, "gendex_server_limit") {
			got = append(got, l)
		}
	}
	want := []string{`gendex_server_limit{server="http://gpu1:30000"} 1040`, `gendex_server_limit{server="http://gpu3:30000"} 512`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("/metrics limits:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if !strings.Contains(body, "# HELP gendex_server_limit gen's limit on its requests in flight on a server") ||
		!strings.Contains(body, "# TYPE gendex_server_limit gauge\n") {
		t.Errorf("no HELP or TYPE for gendex_server_limit:\n%s", body)
	}
	promtest.Check(t, []byte(body))
}
