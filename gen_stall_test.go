package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store/terminal"
)

// TestGenStallFrozenServer: a `gendex sim` process frozen whole with
// SIGSTOP mid-run (its connections open, nothing answered: no request,
// no /health, no /metrics) is stalled under the default --stall-after
// (10m), by its probes alone. GENDEX_PROBE_EVERY probes every 1.5 s
// instead of every 15 s, the same rule (TestStallProbeRuleDefaults holds
// the default's minute). While it is frozen the run is stalled in query
// runs, gen's message fits three lines at 80 columns, and its lines say
// the server is stalled, never up; the stalled event keeps the flight
// record. After SIGCONT gen says it replies again and its line says up;
// the summary names the stall and how long it lasted, and every prompt is
// answered exactly once.
func TestGenStallFrozenServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	addr := freeAddr(t)
	url := "http://" + addr
	server := startSimAt(t, bin, addr, "--metrics", "--seed", "12", "--decode-tps", "300", "--slots", "4")
	root, out := t.TempDir(), t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "S"), "S", 60)
	raw := filepath.Join(out, "S", "raw_responses.jsonl")
	db := filepath.Join(t.TempDir(), "g.db")
	gen := startGendexWith(t, gendexOpts{env: []string{"GENDEX_PROBE_EVERY=1500ms", "GENDEX_LOG_EVERY=250ms"}}, bin,
		"--db", db, "gen", "--server", url, "--out", out, "--concurrency", "4", "--scrape-every", "1s", root)
	waitFor(t, 60*time.Second, "gen's first answers", func() bool {
		b, _ := os.ReadFile(raw)
		return bytes.Count(b, []byte("\n")) >= 5
	})
	server.Signal(syscall.SIGSTOP)
	frozen := time.Now()
	stopped := true
	defer func() {
		if stopped {
			server.Signal(syscall.SIGCONT)
		}
	}()
	waitFor(t, 30*time.Second, "the run to be stalled in query runs", func() bool {
		return lastRun(runsOf(t, bin, db)).State == "stalled"
	})
	waitFor(t, 10*time.Second, "gen's lines to say the server is stalled", func() bool {
		return strings.Contains(gen.Stderr(), "  server "+url+": stalled ")
	})
	// query server (and so watch's server lines) says it too: not up, and why.
	type serverRow struct {
		Server string
		Up     *bool
		Note   string
	}
	waitFor(t, 10*time.Second, "query server to say the server is stalled", func() bool {
		rows, err := queryJSON[serverRow](t, bin, db, "server")
		return err == nil && len(rows) == 1 && rows[0].Up != nil && !*rows[0].Up && strings.HasPrefix(rows[0].Note, "stalled")
	})
	time.Sleep(time.Second) // a few more lines while it is stalled
	server.Signal(syscall.SIGCONT)
	stopped = false
	thawed := time.Now()
	if code := gen.WaitWithin(t, 2*time.Minute); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, gen.Stderr())
	}
	log := gen.Stderr()

	// The message: at most three lines at 80 columns, the details left to
	// query events.
	found := regexp.MustCompile(`(?m)^gen: ` + regexp.QuoteMeta(url) + ` stalled since .*$`).FindString(log)
	wrapped := strings.Split(terminal.WrapLines(found, 79), "\n")
	if found == "" || len(wrapped) > 3 || !strings.Contains(found, "/health and /metrics silent") || strings.Contains(found, "in flight, ages") {
		t.Errorf("gen's stall message, at 80 columns:\n%s\nwant at most 3 lines: the server, the requests held, its probes silent (the record in query events)\n%s", strings.Join(wrapped, "\n"), log)
	}
	// Its lines while it is stalled say so, never up; up again after.
	stalledAt, backAt := strings.Index(log, found), strings.Index(log, "gen: "+url+" replies again after ")
	if found == "" || backAt < stalledAt {
		t.Fatalf("gen did not say the server replies again after its stall:\n%s", log)
	}
	during := log[stalledAt:backAt]
	if strings.Contains(during, "server "+url+": up") || !strings.Contains(during, "server "+url+": stalled ") ||
		!strings.Contains(during, " gen: 0/1 servers up, stalled since ") {
		t.Errorf("gen's lines during the stall:\n%s\nwant its server stalled, not up, and 0/1 servers up", during)
	}
	if !strings.Contains(log[backAt:], "server "+url+": up") {
		t.Errorf("no line says the server is up again after the stall:\n%s", log[backAt:])
	}
	// The summary names the stall and how long it lasted: from the last
	// reply before SIGSTOP to the first after SIGCONT.
	m := regexp.MustCompile(`gen: ` + regexp.QuoteMeta(url) + ` was stalled from \d\d:\d\d:\d\d for (\S+) \(4 requests held; it answered no probe\)`).FindStringSubmatch(log)
	if m == nil {
		t.Fatalf("the summary does not name the stall:\n%s", log)
	}
	if d, err := time.ParseDuration(m[1]); err != nil || d < thawed.Sub(frozen)-time.Second || d > time.Since(frozen) {
		t.Errorf("the stall lasted %s by the summary; frozen for %s", m[1], thawed.Sub(frozen).Round(time.Millisecond))
	}

	// The event keeps the flight record; recovered after it.
	var names []string
	var record string
	for _, e := range mustQueryJSON[eventRow](t, bin, db, "events") {
		names = append(names, e.Event)
		if e.Event == "stalled" && e.Detail != nil {
			record = *e.Detail
		}
	}
	if !strings.Contains(strings.Join(names, " "), "stalled recovered") {
		t.Errorf("events %v; want stalled, then recovered", names)
	}
	for _, want := range []string{"4 requests in flight, ages ", " S/S-0", "; last answer ", "probes: 3 probes in a row from ",
		"/health does not answer (nothing within 500ms)", "/metrics does not answer (nothing within 500ms)"} {
		if !strings.Contains(record, want) {
			t.Errorf("the stalled event's record does not say %q:\n%s", want, record)
		}
	}
	if r := lastRun(runsOf(t, bin, db)); r.State != "finished" || r.ToGo == nil || *r.ToGo != 0 {
		t.Errorf("after the stall: %+v; want finished, 0 to go", r)
	}
	clean := client.New(simURL(t, sim.Config{Seed: 12}), client.Options{})
	checkAnsweredOnce(t, db, filepath.Join(root, "S", "prompts.jsonl"), raw, "S", clean)
}
