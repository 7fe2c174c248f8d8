package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestGenRestartGoesOnAtFullSpeed: a `gendex sim` process (taken for a
// real server) is SIGKILLed while every one of gen's prompts is in flight
// on it, and started again on the same port. The prompts that were in
// flight go back to the restarted server together, at gen's concurrency:
// the server sees most of them running at once (before, they were crash
// suspects sent one at a time for the rest of the run: it saw 1). Nothing
// is isolated (no "isolated" event, nothing said), the down and the up are
// recorded, and every prompt is answered exactly once, none failed.
func TestGenRestartGoesOnAtFullSpeed(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and kills a real simulator process")
	}
	bin := gendexBinary(t)
	t.Parallel()
	addr := freeAddr(t)
	url := "http://" + addr
	startSim := func() *gendexProc {
		return startSimAt(t, bin, addr, "--unmarked", "--metrics", "--seed", "39", "--decode-tps", "20", "--slots", "64")
	}
	server := startSim()

	const n = 20
	root := t.TempDir()
	dir := filepath.Join(root, "R")
	writeTopicPrompts(t, dir, "R", n)
	db := filepath.Join(t.TempDir(), "g.db")
	// 40 tokens at 20 tokens/s: each answer takes 2 s, so all are in
	// flight together at the kill, and one at a time would take 40 s.
	gen := startGendex(t, bin, "", "--db", db, "gen", "--server", url, "--concurrency", "64", "--max-new-tokens", "40", "--ignore-eos", root)
	waitFor(t, 30*time.Second, fmt.Sprintf("all %d prompts running at the server", n), func() bool {
		running, ok := simRunning(url)
		return ok && running == n
	})
	server.Kill()
	time.Sleep(500 * time.Millisecond)
	startSim()

	// The most requests the restarted server ran at once, until gen ends.
	var peak atomic.Int64
	stopWatch, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for {
			if running, ok := simRunning(url); ok && running > peak.Load() {
				peak.Store(running)
			}
			select {
			case <-stopWatch:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	select {
	case <-gen.Done():
	case <-time.After(2 * time.Minute):
		gen.Kill()
		t.Fatalf("gen still runs 2 minutes after the restart:\n%s", gen.Stderr())
	}
	close(stopWatch)
	<-watched
	if code := gen.Wait(); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, gen.Stderr())
	}
	t.Logf("the restarted server ran at most %d of the %d prompts at once", peak.Load(), n)
	if p := peak.Load(); p < n/2 {
		t.Errorf("the restarted server ran at most %d requests at once; want the %d prompts in flight at the kill sent again together (at least %d)\n%s",
			p, n, n/2, gen.Stderr())
	}

	answers := map[string]int{}
	f, ferr := os.Open(filepath.Join(dir, "raw_responses.jsonl"))
	if ferr != nil {
		t.Fatal(ferr)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var l struct{ ID string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("bad answer line %q: %v", sc.Text(), err)
		}
		answers[l.ID]++
	}
	for i := 1; i <= n; i++ {
		if id := fmt.Sprintf("R-%02d", i); answers[id] != 1 {
			t.Errorf("%s: %d answers; want exactly 1", id, answers[id])
		}
	}
	if len(answers) != n {
		t.Errorf("%d prompts answered; want %d", len(answers), n)
	}
	if _, err := os.Stat(filepath.Join(dir, "errors.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a prompt failed (errors.jsonl: %v)", err)
	}

	evs, qerr := queryJSON[eventRow](t, bin, db, "events")
	if qerr != nil {
		t.Fatal(qerr)
	}
	var names []string
	for _, e := range evs {
		names = append(names, e.Event)
		if e.Event == "isolated" {
			t.Errorf("isolated after one down: %v", *e.Detail)
		}
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "down") || !strings.Contains(got, ",up") {
		t.Errorf("events %s; want the down and the up", got)
	}
	if strings.Contains(gen.Stderr(), "isolated") {
		t.Errorf("gen says a prompt is isolated after one down:\n%s", gen.Stderr())
	}
}

// simRunning reads the simulator's sglang:num_running_reqs at url.
func simRunning(url string) (int64, bool) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(line, "sglang:num_running_reqs{") || strings.HasPrefix(line, "sglang:num_running_reqs ") {
			var x float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &x); err == nil {
				return int64(x), true
			}
		}
	}
	return 0, false
}

// writeTopicPrompts writes n one-turn chat prompts, ids PREFIX-01..., to
// dir/prompts.jsonl.
func writeTopicPrompts(t *testing.T, dir, prefix string, n int) {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `{"id":"%s-%02d","messages":[{"role":"user","content":"Tell me about topic number %d."}]}`+"\n", prefix, i, i)
	}
	writePrompts(t, dir, b.String())
}
