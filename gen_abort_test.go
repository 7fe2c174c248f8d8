package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slowPrompts writes n prompts whose answers take 50 s on a simulator at
// --decode-tps 2 with --max-new-tokens 100, and returns their root.
func slowPrompts(t *testing.T, n int) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "prompts")
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":"p%d","text":"say something long"}`+"\n", i)
	}
	writePrompts(t, filepath.Join(root, "slow"), b.String())
	return root
}

// simMetric sums the values of the series named name on the /metrics page
// of the simulator at url; ok is false when the page cannot be read.
func simMetric(url, name string) (sum float64, ok bool) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, false
	}
	for line := range strings.Lines(string(page)) {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			sum += v
		}
	}
	return sum, true
}

// checkStoppedOnServer waits (far less than an answer takes) for the
// simulator at url to run nothing, and checks that it aborted aborted
// requests (-1: the flavor does not count them), and that out holds no
// answer.
func checkStoppedOnServer(t *testing.T, url, running string, aborted float64, out string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the server's "+running+" to drop to 0 (the answers would take 50 s)", func() bool {
		n, ok := simMetric(url, running)
		return ok && n == 0
	})
	if aborted >= 0 {
		if n, _ := simMetric(url, "sglang:num_aborted_requests_total"); n != aborted {
			t.Errorf("the server counts %v aborted requests; want %v", n, aborted)
		}
	}
	if data, err := os.ReadFile(filepath.Join(out, "slow", "raw_responses.jsonl")); len(data) > 0 {
		t.Errorf("answers written (%v):\n%s", err, data)
	}
}

// TestGivenUpRequestsStopOnTheServer: a request gen gives up at
// --request-timeout stops on the server at once, not when its answer
// would have been done: SGLang is asked to abort it (/abort_request; the
// simulator, as SGLang, would notice the closed connection only at its
// next look), vLLM sees its connection closed; the summary counts them,
// so does one given-up event (`query events --kind given-up`: one a
// burst, not one a request), and no aborted answer is written.
func TestGivenUpRequestsStopOnTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gen")
	}
	bin := gendexBinary(t)
	t.Parallel()
	for _, tc := range []struct {
		flavor, running, said, event string
		aborted                      float64
	}{
		{"sglang", "sglang:num_running_reqs", "gen: 4 requests given up and aborted on the server",
			"4 requests given up within 10s: 4 at --request-timeout; aborted on the server", 4},
		{"vllm", "vllm:num_requests_running", "gen: 4 requests given up by closing the connection",
			"4 requests given up within 10s: 4 at --request-timeout; stopped by closing the connection", -1},
	} {
		t.Run(tc.flavor, func(t *testing.T) {
			t.Parallel()
			url := startSimProcess(t, bin, "--flavor", tc.flavor, "--decode-tps", "2", "--metrics", "--disconnect-check", "1h")
			out, db := filepath.Join(t.TempDir(), "out"), filepath.Join(t.TempDir(), "g.db")
			r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url,
				"--request-timeout", "2s", "--max-attempts", "1", "--concurrency", "4", "--max-new-tokens", "100",
				"--out", out, slowPrompts(t, 4))
			if !strings.Contains(r.stderr, tc.said) || !strings.Contains(r.stderr, "0 answers") {
				t.Errorf("the summary does not say %q:\n%s", tc.said, r)
			}
			checkStoppedOnServer(t, url, tc.running, tc.aborted, out)
			if n := lines(t, filepath.Join(out, "slow", "errors.jsonl")); n != 4 {
				t.Errorf("%d errors recorded; want the 4 timeouts", n)
			}
			events, err := queryJSON[map[string]any](t, bin, db, "events", "--kind", "given-up")
			if err != nil || len(events) != 1 || events[0]["server"] != url || events[0]["detail"] != tc.event {
				t.Errorf("given-up events %v (%v); want one on %s: %q", events, err, url, tc.event)
			}
		})
	}
}

// TestInterruptPastGraceAbortsOnTheServer: the requests in flight when an
// interrupt's grace ends are aborted on the server (SGLang) before gen
// exits, and the summary counts them.
func TestInterruptPastGraceAbortsOnTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs gen")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin, "--decode-tps", "2", "--metrics", "--disconnect-check", "1h")
	dir := t.TempDir()
	out, listen := filepath.Join(dir, "out"), freeAddr(t)
	gen := startGendex(t, bin, "", "--db", filepath.Join(dir, "g.db"), "gen", "--server", url, "--concurrency", "4",
		"--grace", "1s", "--max-new-tokens", "100", "--listen", listen, "--out", out, slowPrompts(t, 6))
	waitFor(t, 60*time.Second, "gen's 4 requests in flight (gendex_in_flight)", func() bool {
		n, ok := inFlightMetric("http://" + listen + "/metrics")
		return ok && n == 4
	})
	gen.Interrupt()
	gen.WaitWithin(t, 30*time.Second)
	const said = "gen: 4 requests given up and aborted on the server"
	if !strings.Contains(gen.Stderr(), said) || !strings.Contains(gen.Stderr(), "4 answers in flight were given up after --grace 1s") {
		t.Errorf("the summary does not say %q:\n%s", said, gen.Stderr())
	}
	checkStoppedOnServer(t, url, "sglang:num_running_reqs", 4, out)
}
