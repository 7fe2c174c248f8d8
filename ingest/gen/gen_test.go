package gen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gendex/ingest"
	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store"
)

// syncBuffer is a log that several goroutines write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func simServer(t testing.TB, cfg sim.Config) (*sim.Server, string) {
	t.Helper()
	s := sim.New(cfg)
	hs := httptest.NewServer(s.Handler())
	t.Cleanup(hs.Close)
	return s, hs.URL
}

// writePrompts writes n prompts of the given shape to root/name/prompts.jsonl.
func writePrompts(t testing.TB, root, name, shape string, n int) {
	t.Helper()
	dir := filepath.Join(root, name)
	os.MkdirAll(dir, 0o755)
	var b strings.Builder
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("%s-%05d", name, i)
		var line any
		switch shape {
		case "ids":
			line = map[string]any{"id": id, "input_ids": sim.Encode(fmt.Sprintf("prompt number %d", i), true)}
		case "text":
			line = map[string]any{"id": id, "text": fmt.Sprintf("write about %d", i)}
		case "messages":
			line = map[string]any{"id": id, "messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("explain %d", i)}}, "max_new_tokens": 40}
		case "sharegpt":
			line = map[string]any{"id": id, "conversations": []map[string]string{{"from": "human", "value": fmt.Sprintf("why %d", i)}, {"from": "gpt", "value": "old"}}}
		}
		j, _ := json.Marshal(line)
		b.Write(j)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func openDB(t testing.TB, path string) *store.DB {
	t.Helper()
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func runGen(t testing.TB, ctx context.Context, dbPath string, cfg Config, roots ...string) (*Summary, string, error) {
	t.Helper()
	var log syncBuffer
	cfg.Log = &log
	if cfg.LogEvery == 0 {
		cfg.LogEvery = time.Hour
	}
	sets, err := FindDatasets(roots, cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	db := openDB(t, dbPath)
	defer db.Close()
	sum, err := Run(ctx, db, cfg, sets)
	return sum, log.String(), err
}

// outputLines reads a raw_responses file: id -> decoded lines.
func outputLines(t testing.TB, path string) map[string][]map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]map[string]any{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: bad line %q: %v", path, sc.Text(), err)
		}
		id := m["id"].(string)
		out[id] = append(out[id], m)
	}
	return out
}

// checkExactlyOnce checks that every prompt of dataset under root has exactly
// one answer line in its output, that the index agrees with the file, and
// (when url is set) that each answer is the simulator's answer to that very
// prompt.
func checkExactlyOnce(t *testing.T, dbPath, root, name, out, url string, maxNew int) {
	t.Helper()
	rawPath := filepath.Join(out, name, "raw_responses.jsonl")
	lines := outputLines(t, rawPath)
	var prompts []map[string]any
	pf, _ := os.ReadFile(filepath.Join(root, name, "prompts.jsonl"))
	for _, l := range strings.Split(strings.TrimSpace(string(pf)), "\n") {
		var m map[string]any
		json.Unmarshal([]byte(l), &m)
		prompts = append(prompts, m)
	}
	for _, p := range prompts {
		id := p["id"].(string)
		if n := len(lines[id]); n != 1 {
			t.Errorf("%s: %d answer lines; want exactly 1", id, n)
		}
	}
	if len(lines) != len(prompts) {
		t.Errorf("%d distinct answers for %d prompts", len(lines), len(prompts))
	}
	// The index agrees with the file: a fresh index of the file counts the same.
	db := openDB(t, dbPath)
	var s store.Summary
	db.View(func(v *store.View) (err error) { s, err = v.Summary(name); return err })
	db.Close()
	fresh, err := store.Open(filepath.Join(t.TempDir(), "fresh.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	ix := &ingest.Indexer{DB: fresh}
	if _, err := ix.IndexFile(context.Background(), ingest.Source{Path: rawPath, Dataset: name, Stage: store.Raw}); err != nil {
		t.Fatal(err)
	}
	var fs store.Summary
	fresh.View(func(v *store.View) (err error) { fs, err = v.Summary(name); return err })
	got, want := s.Stage(store.Raw), fs.Stage(store.Raw)
	if got.Records != want.Records || got.CompletionTokens != want.CompletionTokens || got.Duplicates != 0 || s.MissingRaw() != 0 {
		t.Errorf("index: raw %+v missing %d; the file says %+v", got, s.MissingRaw(), want)
	}
	if url == "" {
		return
	}
	// Each answer is the simulator's answer to its own prompt.
	c := client.New(url, client.Options{})
	for _, p := range prompts {
		id := p["id"].(string)
		if len(lines[id]) == 0 {
			continue
		}
		ids, ok := p["input_ids"].([]any)
		if !ok {
			continue
		}
		in := make([]int, len(ids))
		for i, v := range ids {
			in[i] = int(v.(float64))
		}
		res, err := c.Generate(context.Background(), client.GenerateRequest{InputIDs: in, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(res.OutputIDs)
		got, _ := json.Marshal(lines[id][0]["output_ids"])
		if string(got) != string(want) {
			t.Errorf("%s: answer %s is not the answer to its prompt (%s)", id, got, want)
		}
	}
}

func TestGenShapes(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 1})
	root, out := t.TempDir(), t.TempDir()
	for _, shape := range []string{"ids", "text", "messages", "sharegpt"} {
		writePrompts(t, root, "D_"+shape, shape, 30)
	}
	dbPath := filepath.Join(t.TempDir(), "g.db")
	maxNew := 50
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 8,
		Sampling: client.SamplingParams{MaxNewTokens: &maxNew}}, root)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if sum.Responses != 120 || sum.Errors != 0 {
		t.Fatalf("summary %+v\n%s", sum, log)
	}
	for _, shape := range []string{"ids", "text", "messages", "sharegpt"} {
		checkExactlyOnce(t, dbPath, root, "D_"+shape, out, url, maxNew)
	}
	// A flat, self-describing line.
	lines := outputLines(t, filepath.Join(out, "D_ids", "raw_responses.jsonl"))
	l := lines["D_ids-00001"][0]
	for _, k := range []string{"output_ids", "text", "prompt_tokens", "completion_tokens", "cached_tokens", "finish_reason", "e2e_latency", "finished_at", "server"} {
		if _, ok := l[k]; !ok {
			t.Errorf("answer line lacks %q: %v", k, l)
		}
	}
	// The messages prompts' max_new_tokens of 40 wins over the run's 50.
	for id, ls := range outputLines(t, filepath.Join(out, "D_messages", "raw_responses.jsonl")) {
		if n := ls[0]["completion_tokens"].(float64); n > 40 {
			t.Errorf("%s: %v completion tokens; the prompt asked for at most 40", id, n)
		}
	}
	// A second run has nothing to do.
	sum, log, err = runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out}, root)
	if err != nil || sum.Responses != 0 || !strings.Contains(log, "nothing to do") {
		t.Fatalf("second run: %+v %v\n%s", sum, err, log)
	}
}

func TestGenChatAndCompletions(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 2, ReasoningParser: true})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "M", "messages", 10)
	writePrompts(t, root, "T", "text", 10)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	_, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, API: client.APIChat}, filepath.Join(root, "M"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	for id, ls := range outputLines(t, filepath.Join(out, "M", "raw_responses.jsonl")) {
		rc, _ := ls[0]["reasoning_content"].(string)
		text, _ := ls[0]["text"].(string)
		if rc == "" || strings.Contains(text, "<think>") || ls[0]["reasoning_tokens"].(float64) <= 0 {
			t.Errorf("%s: reasoning not kept apart: %v", id, ls[0])
		}
	}
	_, log, err = runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, API: client.APICompletions}, filepath.Join(root, "T"))
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	checkExactlyOnce(t, dbPath, root, "M", out, "", 0)
	checkExactlyOnce(t, dbPath, root, "T", out, "", 0)
}

// TestGenFaults: error answers, resets and aborts are retried until every
// prompt has its one answer; none becomes an error record.
func TestGenFaults(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 3, ErrorRate: 0.2, ResetRate: 0.1, AbortRate: 0.1})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "F", "ids", 150)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	maxNew := 128
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 16,
		Backoff: client.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}}, root)
	if err != nil || sum.Responses != 150 || sum.Errors != 0 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	_, clean := simServer(t, sim.Config{Seed: 3}) // same answers, no faults
	checkExactlyOnce(t, dbPath, root, "F", out, clean, maxNew)
}

// TestGenPermanentErrors: a prompt longer than the context (refused
// before it is sent, with its file:line) and one with a sampling key gen
// does not send are recorded in errors.jsonl, counted, and tried again
// with RetryErrors. (A line with no prompt is not sent and records
// no error: TestGenUnreadablePrompts, root package.)
func TestGenPermanentErrors(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 4, ContextLength: 64})
	root, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "E")
	os.MkdirAll(dir, 0o755)
	long, _ := json.Marshal(map[string]any{"id": "long", "input_ids": make([]int, 100)})
	short, _ := json.Marshal(map[string]any{"id": "short", "input_ids": sim.Encode("hi", true)})
	bad := `{"id":"bad","text":"x","sampling_params":{"max_tokens":5}}`
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(string(long)+"\n"+string(short)+"\n"+bad+"\n"), 0o644)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	maxNew := 1000 // clipped to the context for "short"
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}}, root)
	if err != nil || sum.Responses != 1 || sum.Errors != 2 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	errs := outputLines(t, filepath.Join(out, "E", "errors.jsonl"))
	if e := errs["long"]; len(e) != 1 || e[0]["status"] != nil || !strings.Contains(e[0]["error"].(string), "prompts.jsonl:1: the prompt is 100 token ids; the server's context is 64 tokens") {
		t.Errorf("long: %v", e)
	}
	if e := errs["bad"]; len(e) != 1 || !strings.Contains(e[0]["error"].(string), "max_new_tokens") {
		t.Errorf("bad sampling key: %v", e)
	}
	db := openDB(t, dbPath)
	var s store.Summary
	db.View(func(v *store.View) (err error) { s, err = v.Summary("E"); return err })
	db.Close()
	if s.Overlap.ErrorsOpen != 2 || s.MissingRaw() != 0 || s.Stage(store.Raw).Records != 1 {
		t.Errorf("summary: %+v", s)
	}
	// Without --retry-errors a second run has nothing to do, and says why.
	if _, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out}, root); err != nil || !strings.Contains(log, "2 failed for good") {
		t.Fatalf("second run: %v\n%s", err, log)
	}
	// Retried, they fail again (same answer from the server): still 2 open errors, nothing lost.
	sum, log, err = runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, RetryErrors: true}, root)
	if err != nil || sum.Errors != 2 {
		t.Fatalf("retry: %+v %v\n%s", sum, err, log)
	}
	// A new prompt, without --retry-errors: it alone is sent, not the
	// failed ones (.ci/mutants.txt, feed-skips-failed).
	more, _ := json.Marshal(map[string]any{"id": "more", "input_ids": sim.Encode("hello", true)})
	f, _ := os.OpenFile(filepath.Join(dir, "prompts.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write(append(more, '\n'))
	f.Close()
	sum, log, err = runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out}, root)
	if err != nil || sum.Responses != 1 || sum.Errors != 0 {
		t.Fatalf("a new prompt: %+v %v; want it answered and no failed prompt sent again\n%s", sum, err, log)
	}
}

// TestGenWaitsForServer: a server that refuses connections while it
// loads, then answers 503 while it warms up, is waited for.
// Not parallel: the warmup is 700 ms of a real clock, which a loaded
// CI can let pass between two probes.
func TestGenWaitsForServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := sim.New(sim.Config{Seed: 5, StartupDelay: 700 * time.Millisecond, Warmup: 700 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go s.ListenAndServe(ctx, addr)
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "W", "ids", 20)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{"http://" + addr}, Out: out, LogEvery: 100 * time.Millisecond}, root)
	if err != nil || sum.Responses != 20 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	if !strings.Contains(log, "connection refused") || !strings.Contains(log, "warming up") {
		t.Errorf("the wait was not shown:\n%s", log)
	}
}

// TestGenServerRestart: the server dies mid-run and comes back on the same
// address; gen waits for it and finishes by itself.
func TestGenServerRestart(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	first := sim.New(sim.Config{Seed: 6, CrashAfter: 40, DecodeTokensPerSec: 2000})
	crashed := make(chan error, 1)
	go func() { crashed <- first.Serve(t.Context(), ln) }()
	var log syncBuffer
	go func() {
		// Restart once the first one has crashed (Serve returned) and gen
		// has seen it go (it said so).
		if err := <-crashed; err == nil {
			return
		}
		for !strings.Contains(log.String(), "stopped answering") {
			select {
			case <-time.After(5 * time.Millisecond):
			case <-t.Context().Done():
				return
			}
		}
		second := sim.New(sim.Config{Seed: 6, DecodeTokensPerSec: 2000})
		second.ListenAndServe(t.Context(), addr) // Serve closed the old listener before returning
	}()
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "R", "ids", 120)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sets, _ := FindDatasets([]string{root}, out)
	db := openDB(t, dbPath)
	sum, err := Run(t.Context(), db, Config{Servers: []string{"http://" + addr}, Out: out, Concurrency: 8, Log: &log, LogEvery: time.Hour,
		Backoff: client.Backoff{Base: time.Millisecond, Max: 20 * time.Millisecond}}, sets)
	db.Close()
	if err != nil || sum.Responses != 120 {
		t.Fatalf("%+v %v\n%s", sum, err, log.String())
	}
	if !strings.Contains(log.String(), "stopped answering") || !strings.Contains(log.String(), "is back") {
		t.Errorf("the outage was not reported:\n%s", log.String())
	}
	checkExactlyOnce(t, dbPath, root, "R", out, "http://"+addr, 128)
}

// TestGenInterruptAndResume: an interrupt stops the run; the next run
// answers the rest, each prompt once.
func TestGenInterruptAndResume(t *testing.T) {
	t.Parallel()
	s, url := simServer(t, sim.Config{Seed: 7, Slots: 4, DecodeTokensPerSec: 1000})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "I", "ids", 80)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	// Interrupt once the server has answered 10 (the other 70 take seconds
	// more), whatever the machine's speed.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for s.Stats().Completed < 10 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	sum, log, err := runGen(t, ctx, dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 4, Grace: 50 * time.Millisecond}, root)
	if err == nil || sum == nil || sum.Responses == 0 || sum.Responses >= 80 {
		t.Fatalf("interrupted run: %+v %v\n%s", sum, err, log)
	}
	sum2, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 4}, root)
	if err != nil || sum.Responses+sum2.Responses != 80 {
		t.Fatalf("resumed: %+v + %+v %v\n%s", sum, sum2, err, log)
	}
	checkExactlyOnce(t, dbPath, root, "I", out, url, 128)
}

// TestGenCutsTornLine: a torn last line left in the output is cut, and
// its prompt answered (once).
func TestGenCutsTornLine(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 8})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "C", "ids", 10)
	os.MkdirAll(filepath.Join(out, "C"), 0o755)
	os.WriteFile(filepath.Join(out, "C", "raw_responses.jsonl"), []byte(`{"id":"C-00001","output_ids":[1,2],"completion_tokens":2}`+"\n"+`{"id":"C-00002","outp`), 0o644)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out}, root)
	if err != nil || sum.Responses != 9 || !strings.Contains(log, "cut an unfinished last line") {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	checkExactlyOnce(t, dbPath, root, "C", out, "", 0)
}

// TestGenSeveralServers: the load is shared.
func TestGenSeveralServers(t *testing.T) {
	t.Parallel()
	a, urlA := simServer(t, sim.Config{Seed: 9, DecodeTokensPerSec: 5000})
	b, urlB := simServer(t, sim.Config{Seed: 9, DecodeTokensPerSec: 5000})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "S", "ids", 100)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{urlA, urlB}, Out: out, Concurrency: 16}, root)
	if err != nil || sum.Responses != 100 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	na, nb := a.Stats().Completed, b.Stats().Completed
	if na+nb != 100 || na < 20 || nb < 20 {
		t.Errorf("servers answered %d and %d; want the 100 shared", na, nb)
	}
}

func TestGenAuth(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{APIKey: "sekret"})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "A", "ids", 3)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	_, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, APIKey: "wrong"}, root)
	if err == nil || !strings.Contains(err.Error(), "api-key") || strings.Contains(err.Error()+log, "wrong") {
		t.Fatalf("wrong key: %v\n%s", err, log)
	}
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, APIKey: "sekret"}, root)
	if err != nil || sum.Responses != 3 || strings.Contains(log, "sekret") {
		t.Fatalf("right key: %+v %v\n%s", sum, err, log)
	}
}

// TestGenPromptWithoutID: a prompt line without an id gets a stable one from
// its line number, with a warning, and is answered once under it.
func TestGenPromptWithoutID(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 12})
	root, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "N")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(`{"text":"first"}`+"\n"+`{"id":"named","text":"second"}`+"\n"+`{"text":"third"}`+"\n"), 0o644)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	for run := 0; run < 2; run++ {
		sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out}, root)
		if err != nil {
			t.Fatalf("%v\n%s", err, log)
		}
		if run == 0 && (sum.Responses != 3 || !strings.Contains(log, `known as "prompts.jsonl:1"`)) {
			t.Fatalf("first run: %+v\n%s", sum, log)
		}
		if run == 1 && sum.Responses != 0 {
			t.Fatalf("second run answered %d again", sum.Responses)
		}
	}
	lines := outputLines(t, filepath.Join(out, "N", "raw_responses.jsonl"))
	for _, id := range []string{"prompts.jsonl:1", "named", "prompts.jsonl:3"} {
		if len(lines[id]) != 1 {
			t.Errorf("%s: %d answers", id, len(lines[id]))
		}
	}
}

// TestGenRequestTimeout: a server that takes too long is not waited for
// forever: each attempt runs out, counts as an error, and after
// MaxAttempts the prompt is recorded as one.
func TestGenRequestTimeout(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 13, DecodeTokensPerSec: 20})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "T", "ids", 3)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	maxNew := 100 // 5 s at 20 tokens/s, unless EOS comes first
	minNew := 100
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, RequestTimeout: 100 * time.Millisecond,
		MaxAttempts: 2, Backoff: client.Backoff{Base: time.Millisecond, Max: time.Millisecond},
		Sampling: client.SamplingParams{MaxNewTokens: &maxNew, MinNewTokens: &minNew}}, root)
	if err != nil || sum.Errors != 3 || sum.Responses != 0 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	for id, e := range outputLines(t, filepath.Join(out, "T", "errors.jsonl")) {
		if msg := e[0]["error"].(string); !strings.Contains(msg, "request-timeout") || e[0]["attempts"].(float64) != 2 {
			t.Errorf("%s: %v", id, e[0])
		}
	}
	if strings.Contains(log, "stopped answering") {
		t.Errorf("a slow server was taken for a dead one:\n%s", log)
	}
}

// TestGenTokenizeFallback: a server without /v1/tokenize for messages (older
// SGLang, or vLLM) gets chat prompts on its chat endpoint instead, said once.
func TestGenTokenizeFallback(t *testing.T) {
	t.Parallel()
	s := sim.New(sim.Config{Seed: 14})
	h := s.Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/tokenize" {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "F", "messages", 12)
	writePrompts(t, root, "G", "ids", 5)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{hs.URL}, Out: out, Concurrency: 4}, root)
	if err != nil || sum.Responses != 17 || sum.Errors != 0 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	if n := strings.Count(log, "cannot turn messages into token ids"); n != 1 {
		t.Errorf("the fallback was said %d times:\n%s", n, log)
	}
	for id, ls := range outputLines(t, filepath.Join(out, "F", "raw_responses.jsonl")) {
		if _, hasIDs := ls[0]["output_ids"]; hasIDs || ls[0]["text"] == nil {
			t.Errorf("%s: not a chat answer: %v", id, ls[0])
		}
	}
	for id, ls := range outputLines(t, filepath.Join(out, "G", "raw_responses.jsonl")) {
		if _, hasIDs := ls[0]["output_ids"]; !hasIDs {
			t.Errorf("%s: token-id prompts should still use /generate: %v", id, ls[0])
		}
	}
}
