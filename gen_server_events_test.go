package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// serverRow is a row of `query server --format json`.
type serverRow struct {
	Server           string   `json:"server"`
	Up               *bool    `json:"up"`
	Running          *int     `json:"running"`
	Queued           *int     `json:"queued"`
	TokenUsage       *float64 `json:"token_usage"`
	CacheHitRate     *float64 `json:"cache_hit_rate"`
	AcceptLength     *float64 `json:"accept_length"`
	LastSeen         *string  `json:"last_seen"`
	ServerTokensPerS *float64 `json:"server_tokens_per_s"`
	ClientTokensPerS *float64 `json:"client_tokens_per_s"`
	Agreement        *float64 `json:"agreement"`
	Note             *string  `json:"note"`
}

type eventRow struct {
	Time   string  `json:"time"`
	Server *string `json:"server"`
	Event  string  `json:"event"`
	Detail *string `json:"detail"`
}

// TestServerRestartEvents: a separate `gendex sim --metrics` process is
// SIGKILLed mid-run, once gen has read its counters twice, and started
// again on the same address 2 s later. The index's events for that server
// are then down, up (with how long it was down) and restarted (its token
// counter went back), in that order; gen finishes by itself, every prompt
// answered exactly once; and the server's tokens/s over the run is known
// (the counter's reset is counted from 0, not as a negative increase).
func TestServerRestartEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	addr := freeAddr(t)
	url := "http://" + addr
	startSim := func() *gendexProc {
		return startSimAt(t, bin, addr, "--metrics", "--seed", "21", "--slots", "16", "--decode-tps", "400", "--spec-draft-tokens", "4")
	}
	first := startSim()

	root, out := t.TempDir(), t.TempDir()
	// gen reads the server's counters every half second, not every 5 s:
	// the kill comes after two readings, the restart is seen at the first
	// reading after it. 300 prompts are 6 s of work, most of it left
	// when the server comes back.
	writeIDPrompts(t, filepath.Join(root, "R"), "R", 300)
	db := filepath.Join(t.TempDir(), "g.db")
	gen := startGendex(t, bin, "", "--db", db, "gen", "--server", url, "--out", out, "--concurrency", "16", "--scrape-every", "500ms", root)

	// Kill once the server's tokens/s is known: two readings with its
	// counter, the second one past 0.
	waitFor(t, 60*time.Second, "gen to read the server's counter twice", func() bool {
		rows, err := queryJSON[serverRow](t, bin, db, "server", "--window", "1m")
		return err == nil && len(rows) == 1 && rows[0].ServerTokensPerS != nil && *rows[0].ServerTokensPerS > 0
	})
	first.Kill()
	time.Sleep(2 * time.Second)
	startSim()

	select {
	case <-gen.Done():
		if code := gen.Wait(); code != 0 {
			t.Fatalf("gen: exit %d\n%s", code, gen.Stderr())
		}
	case <-time.After(120 * time.Second):
		t.Fatalf("gen did not finish\n%s", gen.Stderr())
	}
	events, err := queryJSON[eventRow](t, bin, db, "events")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range events {
		if e.Server != nil && *e.Server == url {
			names = append(names, e.Event)
		}
	}
	down := slices.Index(names, "down")
	up := -1
	if down >= 0 {
		up = slices.Index(names[down:], "up") + down
	}
	restarted := -1
	if up >= down && down >= 0 {
		restarted = slices.Index(names[up:], "restarted") + up
	}
	if down < 0 || up <= down || restarted <= up {
		t.Errorf("the server's events are %v; want down, then up, then restarted", names)
	}
	if len(events) < 2 || events[0].Event != "start" || events[len(events)-1].Event != "stop" {
		t.Errorf("events %+v; want start first and stop last", events)
	}
	for _, e := range events {
		if e.Event == "up" && e.Detail != nil && strings.HasPrefix(*e.Detail, "back after") {
			break
		}
		if e == events[len(events)-1] {
			t.Errorf("no up event says how long the server was down: %+v", events)
		}
	}
	rows, err := queryJSON[serverRow](t, bin, db, "server", "--window", "1h")
	if err != nil || len(rows) != 1 || rows[0].ServerTokensPerS == nil || *rows[0].ServerTokensPerS <= 0 ||
		rows[0].Agreement == nil || *rows[0].Agreement < 0.9 || *rows[0].Agreement > 1.1 {
		t.Errorf("server over the run: %+v %v", rows, err)
	}
	if err == nil && len(rows) == 1 && (rows[0].AcceptLength == nil || *rows[0].AcceptLength <= 1 || rows[0].TokenUsage == nil) {
		t.Errorf("a server with a drafter: accept_length %v, token_usage %v; want both known", rows[0].AcceptLength, rows[0].TokenUsage)
	}
	clean := client.New(simURL(t, sim.Config{Seed: 21}), client.Options{})
	checkAnsweredOnce(t, db, filepath.Join(root, "R", "prompts.jsonl"), filepath.Join(out, "R", "raw_responses.jsonl"), "R", clean)
}

// TestServerWithoutMetrics: a server run without --enable-metrics (the
// simulator without --metrics answers /metrics 404). gen says once how to
// turn them on, answers every prompt, and `query server` shows the
// server's own columns unknown, never 0, with the same hint.
func TestServerWithoutMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeIDPrompts(t, filepath.Join(dir, "N"), "N", 40)
	env := testEnv(nil)
	env.Now = time.Now
	db := filepath.Join(dir, "g.db")
	r := gendex(t, env, "--db", db, "gen", "--server", "sim", "--sim-metrics=false", "--out", filepath.Join(dir, "out"), dir)
	if r.code != 0 {
		t.Fatal(r)
	}
	if n := strings.Count(r.stderr, "--enable-metrics"); n != 1 {
		t.Errorf("the hint is said %d times; want once:\n%s", n, r.stderr)
	}
	q := gendex(t, env, "--db", db, "query", "server", "--format", "json")
	var rows []serverRow
	if err := json.Unmarshal([]byte(q.stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("%v\n%s", err, q)
	}
	row := rows[0]
	if row.Up == nil || !*row.Up {
		t.Errorf("up %v; want true (gen's own view)", row.Up)
	}
	if row.Running != nil || row.Queued != nil || row.TokenUsage != nil || row.CacheHitRate != nil || row.AcceptLength != nil ||
		row.LastSeen != nil || row.ServerTokensPerS != nil || row.Agreement != nil {
		t.Errorf("a server without /metrics has known metrics: %s", q.stdout)
	}
	if row.Note == nil || !strings.Contains(*row.Note, "--enable-metrics") {
		t.Errorf("note %v; want the hint", row.Note)
	}
	tsv := gendex(t, env, "--db", db, "query", "server")
	if !strings.Contains(tsv.stdout, "start the server with --enable-metrics") {
		t.Errorf("TSV lacks the hint:\n%s", tsv.stdout)
	}
	ev := gendex(t, env, "--db", db, "query", "events", "--format", "json")
	var events []eventRow
	if err := json.Unmarshal([]byte(ev.stdout), &events); err != nil || len(events) < 3 {
		t.Fatalf("%v\n%s", err, ev)
	}
	if events[0].Event != "start" || events[1].Event != "up" || events[len(events)-1].Event != "stop" {
		t.Errorf("events %s", ev.stdout)
	}
}

// TestGenScrapeEvery: --scrape-every 0 reads no /metrics (query server
// has no server rows, though the server serves them); the default reads
// them; a negative value is a usage error.
func TestGenScrapeEvery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeIDPrompts(t, filepath.Join(dir, "in", "S"), "S", 20)
	env := testEnv(nil)
	env.Now = time.Now
	for _, tc := range []struct {
		flag []string
		rows int
	}{{[]string{"--scrape-every", "0"}, 0}, {nil, 1}} {
		db := filepath.Join(t.TempDir(), "g.db")
		args := append([]string{"--db", db, "gen", "--server", "sim", "--sim-metrics", "--out", t.TempDir()}, tc.flag...)
		mustGendex(t, env, append(args, filepath.Join(dir, "in"))...)
		q := mustGendex(t, env, "--db", db, "query", "server", "--format", "json")
		var rows []serverRow
		if err := json.Unmarshal([]byte(q.stdout), &rows); err != nil || len(rows) != tc.rows {
			t.Errorf("gen %v: query server %s (%v); want %d rows", tc.flag, q.stdout, err, tc.rows)
		}
	}
	if r := gendex(t, env, "--db", filepath.Join(t.TempDir(), "g.db"), "gen", "--server", "sim", "--scrape-every", "-1s", dir); r.code != 2 {
		t.Errorf("--scrape-every -1s: %s", r)
	}
}
