package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/store"
)

// limitIndex builds, through the store API, a 20-minute gen run ending at
// clockNow: one answer of dataset d every 2 s; http://gpu1:30000 sampled
// every 5 s by a gen that keeps its limit (128, raised to 512 and 1040 as
// the server had room, lowered to 780 on preemptions, each change an
// event with gen's reason), its preemption counter climbing from 6
// minutes before the end; http://gpu2:30000 sampled by a gen older than
// the limit (none kept), down for a minute.
func limitIndex(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "limit.db")
	db, err := store.Open(path, store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	end := clockNow.Truncate(time.Second)
	start := end.Add(-20 * time.Minute)
	changes := []struct {
		at     time.Duration // after start
		limit  int64
		detail string
	}{
		{0, 128, ""},
		{5 * time.Minute, 512, "128 -> 512: room (running 128 of 1024, no queue)"},
		{10 * time.Minute, 1040, "512 -> 1040: room (running 512 of 1024, 2 queued)"},
		{15 * time.Minute, 780, "1040 -> 780: preemptions (37 in 5s)"},
	}
	err = db.Update(func(tx *store.Tx) error {
		n := 0
		for at := start; at.Before(end); at = at.Add(2 * time.Second) {
			n++
			r := store.Record{ID: fmt.Sprint(n), Shape: store.ShapeFlat, PromptTokens: 50, CompletionTokens: 300, CachedTokens: store.Unknown,
				ReasoningTokens: store.Unknown, Finish: "stop", Time: at.UnixMilli() + 100, OwnTime: true, File: 1}
			if _, err := tx.Add("d", store.Raw, &r); err != nil {
				return err
			}
		}
		for at := start; at.Before(end); at = at.Add(5 * time.Second) {
			since := at.Sub(start)
			a := &store.ServerSample{Time: at.UnixMilli(), Up: true, Scraped: true, Run: start.UnixMilli(), LastSeen: at.UnixMilli()}
			for _, c := range changes {
				if since >= c.at {
					a.Limit = c.limit
				}
			}
			a.InFlight = a.Limit - 3
			a.Set(store.MetricRunning, float64(min(a.Limit, 1024)))
			a.Set(store.MetricQueued, float64(max(a.Limit-1024, 0)))
			a.Set(store.MetricPreemptions, float64(max(since-14*time.Minute, 0)/time.Second))
			if err := tx.PutServerSample("http://gpu1:30000", a); err != nil {
				return err
			}
			b := &store.ServerSample{Time: at.UnixMilli(), Up: since < 8*time.Minute || since >= 9*time.Minute, Run: start.UnixMilli()}
			b.Scraped = b.Up
			if b.Up {
				b.Set(store.MetricRunning, 16)
			}
			if err := tx.PutServerSample("http://gpu2:30000", b); err != nil {
				return err
			}
		}
		events := []store.Event{
			{Time: start.Add(8 * time.Minute).UnixMilli(), Server: "http://gpu2:30000", Name: "down", Detail: "16 requests in flight"},
			{Time: start.Add(9 * time.Minute).UnixMilli(), Server: "http://gpu2:30000", Name: "up", Detail: "back after 1m0s"},
		}
		for _, c := range changes[1:] {
			events = append(events, store.Event{Time: start.Add(c.at).UnixMilli(), Server: "http://gpu1:30000", Name: "limit", Detail: c.detail})
		}
		for _, e := range events {
			if err := tx.AddEvent(&e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestQueryAndPlotShowLimit: gendex query server gives gen's limit on
// each server, its requests in flight and the server's preemptions over
// the window, in JSON and in a table, unknown (null, "unknown"), never 0,
// for a server whose samples keep no limit; query events --kind limit
// lists each change with gen's reason; plot limit draws the limit per
// server with each change marked, and every chart (tokens/s) marks the
// changes beside the downs and ups.
func TestQueryAndPlotShowLimit(t *testing.T) {
	t.Parallel()
	db := limitIndex(t)
	env := testEnv(map[string]string{"TZ": "UTC"})
	r := mustGendex(t, env, "--db", db, "query", "server", "--window", "1m", "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("query server JSON: %v\n%s", err, r.stdout)
	}
	for i, want := range []map[string]any{
		{"server": "http://gpu1:30000", "limit": 780.0, "in_flight": 777.0, "preemptions": 55.0, "running": 780.0},
		{"server": "http://gpu2:30000", "limit": nil, "in_flight": nil, "preemptions": nil, "running": 16.0},
	} {
		for k, v := range want {
			if got, ok := rows[i][k]; !ok || got != v {
				t.Errorf("query server row %d %s = %v; want %v\n%s", i, k, got, v, r.stdout)
			}
		}
	}
	r = mustGendex(t, env, "--db", db, "query", "server", "--window", "1m", "--format", "table")
	head := strings.Fields(strings.SplitN(r.stdout, "\n", 2)[0])
	if !strings.Contains(r.stdout, "gpu2:30000") || strings.Join(head[:7], " ") != "server up running queued limit in_flight preemptions" {
		t.Fatalf("query server table:\n%s", r.stdout)
	}
	for _, l := range strings.Split(r.stdout, "\n")[1:3] {
		f := strings.Fields(l)
		want := []string{"780", "777", "55"} // 11 pairs of samples 5 s apart, 1 a second
		if strings.HasSuffix(f[0], "gpu2:30000") {
			want = []string{"unknown", "unknown", "unknown"}
		}
		if got := strings.Join(f[4:7], " "); got != strings.Join(want, " ") {
			t.Errorf("query server table, %s: limit, in_flight, preemptions %q; want %q\n%s", f[0], got, want, r.stdout)
		}
	}

	r = mustGendex(t, env, "--db", db, "query", "events", "--kind", "limit", "--no-header")
	want := "2026-11-28T09:45:00.000Z\thttp://gpu1:30000\tlimit\t128 -> 512: room (running 128 of 1024, no queue)\n" +
		"2026-11-28T09:50:00.000Z\thttp://gpu1:30000\tlimit\t512 -> 1040: room (running 512 of 1024, 2 queued)\n" +
		"2026-11-28T09:55:00.000Z\thttp://gpu1:30000\tlimit\t1040 -> 780: preemptions (37 in 5s)\n"
	if r.stdout != want {
		t.Errorf("query events --kind limit:\n%s\nwant:\n%s", r.stdout, want)
	}

	out := mustGendex(t, env, "--db", db, "plot", "limit", "--width", "80", "--height", "24").stdout
	plotGolden(t, "limit-80x24.golden", out)
	out = mustGendex(t, env, "--db", db, "plot", "--width", "120", "--height", "30").stdout
	for _, mark := range []string{"09:48:00 ↓ gpu2:30000 down", "09:45:00 ↕ gpu1:30000 limit 128→512", "09:55:00 ↕ gpu1:30000 limit 1040→780"} {
		if !strings.Contains(out, mark) {
			t.Errorf("plot (tokens/s) has no %q in its legend:\n%s", mark, out)
		}
	}
}
