package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// gendexBinary builds the gendex binary once per test run. The sequential
// TestQueriesWhileGenRuns builds it before the parallel tests resume:
// building it while parallel tests were starting processes made the exec
// of the new file fail now and then with EACCES.
func gendexBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gendex-test-bin")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "gendex")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// TestQueriesWhileGenRuns runs gen against the simulator and, meanwhile,
// asks `gendex query progress` and `gendex query throughput --window 30s`
// from other processes 50 times each: every answer arrives, without an
// error, the counts never go down, and the last answer equals the final file.
func TestQueriesWhileGenRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := gendexBinary(t)
	prompts := filepath.Join(dir, "prompts", "live")
	os.MkdirAll(prompts, 0o755)
	var b strings.Builder
	const n = 3000
	for i := range n {
		fmt.Fprintf(&b, `{"id":"p%05d","text":"prompt %d"}`+"\n", i, i)
	}
	os.WriteFile(filepath.Join(prompts, "prompts.jsonl"), []byte(b.String()), 0o644)
	db, out := filepath.Join(dir, "g.db"), filepath.Join(dir, "out")
	gen := exec.Command(bin, "--db", db, "gen", "--server", "sim", "--sim-decode-tps", "400", "--concurrency", "32",
		"--max-new-tokens", "64", "--out", out, filepath.Join(dir, "prompts"))
	var genLog strings.Builder
	gen.Stderr = &genLog
	if err := gen.Start(); err != nil {
		t.Fatal(err)
	}
	genDone := make(chan error, 1)
	go func() { genDone <- gen.Wait() }()
	ask := func(args ...string) ([]map[string]any, error) {
		cmd := exec.Command(bin, append([]string{"--db", db, "query"}, append(args, "--format", "json")...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		o, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("query %v: %v: %s", args, err, stderr.String())
		}
		var rows []map[string]any
		if err := json.Unmarshal(o, &rows); err != nil {
			return nil, fmt.Errorf("query %v: %v in %q", args, err, o)
		}
		return rows, nil
	}
	last, answered := -1.0, 0
	running := 0
	for i := 0; i < 50; i++ {
		select {
		case err := <-genDone:
			genDone <- err
		default:
			running++
		}
		rows, err := ask("progress")
		if err != nil {
			// Before gen creates the database there is nothing to ask.
			if i == 0 && strings.Contains(err.Error(), "no such file") {
				time.Sleep(50 * time.Millisecond)
				continue
			}
			t.Fatal(err)
		}
		answered++
		if len(rows) == 1 {
			raw := rows[0]["raw"].(float64)
			if raw < last {
				t.Fatalf("answer %d: raw went down from %v to %v", i, last, raw)
			}
			last = raw
		}
		if _, err := ask("throughput", "--window", "30s"); err != nil {
			t.Fatal(err)
		}
	}
	if running < 40 {
		t.Errorf("gen finished too early: only %d of the 50 questions were asked while it ran", running)
	}
	if err := <-genDone; err != nil {
		t.Fatalf("gen: %v\n%s", err, genLog.String())
	}
	rows, err := ask("progress")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(out, "live", "raw_responses.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ids := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m struct{ ID string }
		json.Unmarshal(sc.Bytes(), &m)
		ids[m.ID] = true
	}
	if got := rows[0]["raw"].(float64); int(got) != len(ids) || len(ids) != n || rows[0]["missing_raw"].(float64) != 0 {
		t.Errorf("final answer %v; the file has %d distinct answers for %d prompts", rows[0], len(ids), n)
	}
	if answered < 45 {
		t.Errorf("only %d of 50 progress questions were answered", answered)
	}
}

// TestGenListen: gen --listen serves the same answers over TCP, and
// Prometheus metrics with gen's own gauges.
func TestGenListen(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts", "m")
	os.MkdirAll(prompts, 0o755)
	var b strings.Builder
	for i := range 400 {
		fmt.Fprintf(&b, `{"id":"p%04d","text":"prompt"}`+"\n", i)
	}
	os.WriteFile(filepath.Join(prompts, "prompts.jsonl"), []byte(b.String()), 0o644)
	gen := exec.Command(bin, "--db", filepath.Join(dir, "g.db"), "gen", "--server", "sim", "--sim-decode-tps", "50",
		"--concurrency", "8", "--listen", "127.0.0.1:0", "--out", filepath.Join(dir, "out"), filepath.Join(dir, "prompts"))
	stderr, err := gen.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := gen.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { gen.Process.Signal(os.Interrupt); gen.Wait() }()
	sc := bufio.NewScanner(stderr)
	addr := ""
	for sc.Scan() {
		if _, rest, ok := strings.Cut(sc.Text(), "Prometheus metrics on http://"); ok {
			addr = strings.TrimSuffix(rest, "/metrics")
			break
		}
	}
	if addr == "" {
		t.Fatal("gen never said where it listens")
	}
	go io.Copy(io.Discard, stderr)
	get := func(path string) string {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			resp, err := http.Get("http://" + addr + path)
			if err == nil {
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "gendex_in_flight") || !strings.Contains(path, "metrics") {
					return string(body)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s: %v", path, err)
			}
		}
	}
	metrics := get("/metrics")
	for _, want := range []string{`gendex_records{dataset="m",stage="prompts"} 400`, "gendex_server_up{server=", "gendex_in_flight{server="} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, metrics)
		}
	}
	if answer := get("/v1/query?arg=progress"); !strings.Contains(answer, `"columns"`) || !strings.Contains(answer, `"end":true`) {
		t.Errorf("/v1/query: %s", answer)
	}
}
