package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// TestShortRunAcceptLength: a run shorter than one scrape interval against
// the simulator speaking vLLM with a drafter, then a tiny one: query
// server's accept length over the hour is the server's counters' figure
// (1 + accepted/drafts, all of them: the server started in the window),
// which its /metrics gives with process_start_time_seconds, as vLLM's
// does with one API server. Before, the counts before the first sample of
// each run were lost: the figure was the tiny run's, or unknown.
func TestShortRunAcceptLength(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary and a simulator process")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin, "--flavor", "vllm", "--unmarked", "--spec-draft-tokens", "4")
	root, db := t.TempDir(), filepath.Join(t.TempDir(), "g.db")
	writeIDPrompts(t, filepath.Join(root, "short", "S"), "S", 30)
	writeIDPrompts(t, filepath.Join(root, "tiny", "T"), "T", 1)
	for _, run := range []string{"short", "tiny"} {
		start := time.Now()
		code, out := runGendexCombined(t, bin, "--db", db, "gen", "--server", url, "--max-new-tokens", "40", "--out", filepath.Join(root, "out-"+run),
			filepath.Join(root, run))
		if code != 0 {
			t.Fatalf("gen %s: exit %d\n%s", run, code, out)
		}
		if d := time.Since(start); d >= 5*time.Second {
			t.Logf("the %s run took %s, not shorter than the scrape interval (5 s): this run does not test the fault", run, d)
		}
	}
	acc, drafts := simSpecCounters(t, url)
	want := fmt.Sprintf("%.2f", 1+acc/drafts)
	rows, err := queryJSON[serverRow](t, bin, db, "server", "--window", "1h")
	if err != nil || len(rows) != 1 {
		t.Fatalf("query server: %v, %d rows", err, len(rows))
	}
	got := "unknown"
	if rows[0].AcceptLength != nil {
		got = fmt.Sprintf("%.2f", *rows[0].AcceptLength)
	}
	if got != want {
		t.Errorf("query server --window 1h: accept_length %s; the server's counters give 1 + %.0f/%.0f = %s", got, acc, drafts, want)
	}
}
