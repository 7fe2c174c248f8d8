package shell

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"gendex/query"
	"gendex/store"
	"gendex/store/terminal"
)

func TestScratchWorst(t *testing.T) {
	now := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	db := watchIndex(t, now, func(root string) {
		writeDataset(t, root, "C_a_dataset_with_a_really_very_long_name_for_sure_yes", 3, now.Add(-5*time.Second))
	})
	host := "http://gpu-node-17.some-very-long-cluster-domain.example.internal.company.com"
	err := db.Update(func(tx *store.Tx) error {
		for k, port := range []string{":30000", ":30001"} {
			for i := range 3 {
				at := now.Add(time.Duration(i-3) * 3 * time.Second).UnixMilli()
				s := &store.ServerSample{Time: at, Up: k == 0, Scraped: true, Run: now.Add(-10 * time.Second).UnixMilli(), LastSeen: at, ClientTokens: int64(i) * 300000000}
				s.Retries, s.LastError, s.LastErrorAt = int64(i)*100000, "HTTP 500 'Failed to parse input at pos 0: unexpected end'", at-200
				s.Set(store.MetricRunning, 6400000)
				if err := tx.PutServerSample(host+port, s); err != nil {
					return err
				}
			}
		}
		toGo := int64(123456789)
		return tx.PutRun(&store.Run{Start: now.Add(-time.Hour).UnixMilli(), Pid: 4194304, Host: "a-very-long-hostname-of-a-compute-node.cluster.example.org", Kind: "gen", State: store.RunStalled,
			Since: now.Add(-8 * time.Minute).UnixMilli(), ToGo: &toGo,
			Detail: "stalled since 03:12: 61 requests held by " + host + ":30000/v1/some/long/path/that/goes/on, which answers no probe"})
	})
	if err != nil {
		t.Fatal(err)
	}
	sh := &Shell{Ask: query.Local{Src: db}, Now: func() time.Time { return now }, format: query.Table, Width: func() int { return 80 }}
	var b strings.Builder
	if err := sh.dashboard(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(b.String(), "\n") {
		fmt.Printf("%3d %s\n", terminal.Width(l), l)
	}
}
