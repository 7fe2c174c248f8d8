package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store/prom"
)

// freeAddr returns a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// restarting serves a simulator on addr after startAfter is closed (nil:
// at once) and, like a supervisor restarting SGLang, starts a new one
// 200 ms after each crash, until the test ends. It returns the count of
// starts.
func restarting(t *testing.T, cfg sim.Config, addr string, startAfter <-chan struct{}) *atomic.Int64 {
	t.Helper()
	var starts atomic.Int64
	go func() {
		if startAfter != nil {
			select {
			case <-startAfter:
			case <-t.Context().Done():
				return
			}
		}
		for t.Context().Err() == nil {
			ln, err := net.Listen("tcp", addr)
			if err != nil { // the old listener is closing
				select {
				case <-time.After(10 * time.Millisecond):
				case <-t.Context().Done():
				}
				continue
			}
			starts.Add(1)
			if errors.Is(sim.New(cfg).Serve(t.Context(), ln), sim.ErrCrashed) {
				select { // a restart takes a while (SGLang: minutes)
				case <-time.After(200 * time.Millisecond):
				case <-t.Context().Done():
				}
			}
		}
	}()
	return &starts
}

// wrap serves h, except that the paths in override get their own answer.
func wrap(t *testing.T, h http.Handler, override map[string]http.HandlerFunc) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f := override[r.URL.Path]; f != nil {
			f(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

func answer(status int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// TestGenStopsOnSetupErrors: a server without the route, a wrong method or
// an unknown model stops the run at once with an error that names the
// server, the status, the server's message and what to check; no prompt is
// marked failed, so the next run tries them all again. A missing route or
// a model /v1/models does not list is found before any prompt is sent.
func TestGenStopsOnSetupErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		api      client.API
		model    string
		override map[string]http.HandlerFunc
		want     []string
		sends    bool // prompts reach the server: only a request finds the error
	}{
		{"no /generate (vLLM)", client.APIGenerate, "", map[string]http.HandlerFunc{"/generate": answer(404, `{"detail":"Not Found"}`)},
			[]string{"POST /generate", "HTTP 404", "Not Found", "check --api"}, false},
		{"wrong method", client.APICompletions, "", map[string]http.HandlerFunc{"/v1/completions": answer(405, `{"detail":"Method Not Allowed"}`)},
			[]string{"POST /v1/completions", "HTTP 405", "Method Not Allowed", "check --api"}, false},
		{"unknown model: not in /v1/models", client.APIChat, "nope", nil,
			[]string{"serves sim-model, not --model nope", "check --model"}, false},
		{"unknown model: the chat endpoint says so (vLLM)", client.APIChat, "", map[string]http.HandlerFunc{"/v1/chat/completions": func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength <= 3 { // the route's probe ({})
				answer(400, `{"object":"error","message":"invalid request","code":400}`)(w, r)
				return
			}
			answer(404, "{\"object\":\"error\",\"message\":\"The model `nope` does not exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}")(w, r)
		}},
			[]string{"POST /v1/chat/completions", "HTTP 404", "The model `nope` does not exist.", "check --model"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// sent counts the POSTs with a body beyond a route's probe ({}).
			var sent atomic.Int64
			counted := func(f http.HandlerFunc) http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					if r.Method == http.MethodPost && r.ContentLength > 3 {
						sent.Add(1)
					}
					f(w, r)
				}
			}
			override := map[string]http.HandlerFunc{}
			for path, f := range tc.override {
				override[path] = counted(f)
			}
			url := wrap(t, counted(sim.New(sim.Config{Seed: 30}).Handler().ServeHTTP), override)
			root, out := t.TempDir(), t.TempDir()
			writePrompts(t, root, "S", "text", 200)
			dbPath := filepath.Join(t.TempDir(), "g.db")
			cfg := Config{Servers: []string{url}, Out: out, API: tc.api, Model: tc.model, Concurrency: 16}
			for run := range 2 {
				sent.Store(0)
				sum, log, err := runGen(t, t.Context(), dbPath, cfg, root)
				var se *stopError
				if !errors.As(err, &se) {
					t.Fatalf("run %d: %v; want the run stopped\n%s", run, err, log)
				}
				for _, w := range append(tc.want, url, "no prompt was marked failed") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("run %d: error %q does not say %q", run, err, w)
					}
				}
				if sum == nil || sum.Errors != 0 {
					t.Errorf("run %d: %+v: prompts marked failed", run, sum)
				}
				if b, _ := os.ReadFile(filepath.Join(out, "S", "errors.jsonl")); len(b) > 0 {
					t.Fatalf("run %d: errors.jsonl: %s", run, b)
				}
				if strings.Contains(log, "nothing to do") {
					t.Fatalf("run %d: %s", run, log)
				}
				if n := sent.Load(); !tc.sends && n != 0 {
					t.Errorf("run %d: %d requests sent before the stop; want none (checked before any prompt is sent)", run, n)
				}
			}
		})
	}
}

// TestGenCrashingPrompt: a prompt that crashes the server every time is
// recorded as an error after MaxCrashes crashes, with that reason; the
// prompts in flight with it are answered; the run ends by itself.
func TestGenCrashingPrompt(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	starts := restarting(t, sim.Config{Seed: 21, CrashOn: "BOOM", DecodeTokensPerSec: 500}, addr, nil)
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "K", "text", 40)
	pf := filepath.Join(root, "K", "prompts.jsonl")
	b, _ := os.ReadFile(pf)
	lines := strings.SplitAfter(string(b), "\n")
	os.WriteFile(pf, []byte(strings.Join(lines[:5], "")+`{"id":"bomb","text":"BOOM"}`+"\n"+strings.Join(lines[5:], "")), 0o644)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sum, log, err := runGen(t, ctx, dbPath, Config{Servers: []string{"http://" + addr}, Out: out, Concurrency: 8,
		Backoff: client.Backoff{Base: time.Millisecond, Max: 10 * time.Millisecond}}, root)
	if err != nil || sum.Responses != 40 || sum.Errors != 1 {
		t.Fatalf("%+v %v (%d server starts)\n%s", sum, err, starts.Load(), log)
	}
	errs := outputLines(t, filepath.Join(out, "K", "errors.jsonl"))
	if e := errs["bomb"]; len(e) != 1 || !strings.Contains(e[0]["error"].(string), "went down 3 times while this prompt was in flight") {
		t.Errorf("errors: %v", errs)
	}
	if n := starts.Load(); n < 3 || n > 4 { // the 3rd crash may end the run before the restart
		t.Errorf("the server started %d times; want 3 crashes", n)
	}
}

// TestGenReadsModelsWhenBack: a server that was down at startup gets its
// /v1/models facts read when it comes up, so its (small) context length
// clips max_new_tokens instead of every prompt failing there.
func TestGenReadsModelsWhenBack(t *testing.T) {
	t.Parallel()
	_, fast := simServer(t, sim.Config{Seed: 22, DecodeTokensPerSec: 200, Slots: 2})
	addr := freeAddr(t)
	up := make(chan struct{})
	late := restarting(t, sim.Config{Seed: 22, ContextLength: 100}, addr, up)
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "B", "ids", 40)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	maxNew, ignore := 200, true
	var log syncBuffer
	go func() { // start the late server once gen has given up waiting for it
		for !strings.Contains(log.String(), "is not ready") {
			select {
			case <-time.After(5 * time.Millisecond):
			case <-t.Context().Done():
				return
			}
		}
		close(up)
	}()
	sets, _ := FindDatasets([]string{root}, out)
	db := openDB(t, dbPath)
	defer db.Close()
	sum, err := Run(t.Context(), db, Config{Servers: []string{fast, "http://" + addr}, Out: out, Concurrency: 4, WaitReady: 200 * time.Millisecond,
		Log: &log, LogEvery: time.Hour, Sampling: client.SamplingParams{MaxNewTokens: &maxNew, IgnoreEOS: &ignore}}, sets)
	if err != nil || sum.Responses != 40 || sum.Errors != 0 {
		t.Fatalf("%+v %v\n%s", sum, err, log.String())
	}
	if late.Load() != 1 || !strings.Contains(log.String(), addr+" is ready: SGLang, model sim-model, context length 100") {
		t.Errorf("the late server's context length was not read:\n%s", log.String())
	}
	n := 0
	for _, ls := range outputLines(t, filepath.Join(out, "B", "raw_responses.jsonl")) {
		if ls[0]["server"] == "http://"+addr {
			n++
			if ct := ls[0]["completion_tokens"].(float64); ct > 100-clipMargin {
				t.Errorf("answer of %v tokens from a 100-token context", ct)
			}
		}
	}
	if n == 0 {
		t.Errorf("the late server answered nothing:\n%s", log.String())
	}
}

// TestGenClips: max_new_tokens is clipped clipMargin below the context
// length, for token-id prompts and for text prompts (counted with
// /v1/tokenize); a server without /v1/tokenize gets text prompts unclipped,
// said once.
func TestGenClips(t *testing.T) {
	t.Parallel()
	var mu = make(chan struct{}, 1)
	sent := map[string]int{}
	record := func(h http.Handler) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var req struct {
				Text     string         `json:"text"`
				InputIDs []int          `json:"input_ids"`
				SP       map[string]any `json:"sampling_params"`
			}
			json.Unmarshal(body, &req)
			if req.SP == nil { // gen's probe of the route ({}), before the first request
				h.ServeHTTP(w, r)
				return
			}
			mu <- struct{}{}
			sent[fmt.Sprint(req.Text, len(req.InputIDs))] = int(req.SP["max_new_tokens"].(float64))
			<-mu
			r.Body = io.NopCloser(bytes.NewReader(body))
			h.ServeHTTP(w, r)
		}
	}
	h := sim.New(sim.Config{Seed: 23, ContextLength: 256}).Handler()
	url := wrap(t, h, map[string]http.HandlerFunc{"/generate": record(h)})
	root, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "L")
	os.MkdirAll(dir, 0o755)
	ids, _ := json.Marshal(map[string]any{"id": "ids", "input_ids": sim.Encode("a b c d e f g h", true)})
	long := strings.Repeat("word ", 30)
	text, _ := json.Marshal(map[string]any{"id": "text", "text": long})
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(string(ids)+"\n"+string(text)+"\n"), 0o644)
	maxNew := 1000
	cfg := Config{Out: out, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}}
	cfg.Servers = []string{url}
	sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), cfg, root)
	if err != nil || sum.Responses != 2 || sum.Errors != 0 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	nIDs := len(sim.Encode("a b c d e f g h", true))
	nText := len(sim.Encode(long, true))
	if got, want := sent[fmt.Sprint("", nIDs)], 256-clipMargin-nIDs; got != want {
		t.Errorf("token ids: max_new_tokens %d; want %d (%v)", got, want, sent)
	}
	if got, want := sent[fmt.Sprint(long, 0)], 256-clipMargin-nText; got != want {
		t.Errorf("text: max_new_tokens %d; want %d (%v)", got, want, sent)
	}

	// Without /v1/tokenize, text prompts go unclipped, said once.
	noTok := wrap(t, h, map[string]http.HandlerFunc{"/v1/tokenize": answer(404, `{"detail":"Not Found"}`), "/tokenize": answer(404, `{"detail":"Not Found"}`)})
	cfg.Servers, cfg.Out = []string{noTok}, t.TempDir()
	_, log, _ = runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), cfg, root)
	if n := strings.Count(log, "text prompts are not clipped"); n != 1 {
		t.Errorf("said %d times:\n%s", n, log)
	}
}

// TestGenIndexesOtherShards: answers and errors in other raw_responses* and
// errors* files of the answer folder (here --out's) count: their prompts
// are not asked again. Those beside the prompts do not: answers in another
// folder never stand in for this run's.
func TestGenIndexesOtherShards(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 24})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "O", "ids", 10)
	os.WriteFile(filepath.Join(root, "O", "raw_responses_node2.jsonl"), []byte(
		`{"id":"O-00001","output_ids":[1],"completion_tokens":1}`+"\n"+`{"id":"O-00002","output_ids":[1],"completion_tokens":1}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(root, "O", "errors_old.jsonl"), []byte(`{"id":"O-00003","error":"x"}`+"\n"), 0o644)
	os.MkdirAll(filepath.Join(out, "O"), 0o755)
	os.WriteFile(filepath.Join(out, "O", "raw_responses_2.jsonl"), []byte(`{"id":"O-00004","output_ids":[1],"completion_tokens":1}`+"\n"), 0o644)
	sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{url}, Out: out}, root)
	if err != nil || sum.Responses != 9 {
		t.Fatalf("%+v %v; want the 9 prompts the answer folder does not answer\n%s", sum, err, log)
	}
	got := outputLines(t, filepath.Join(out, "O", "raw_responses.jsonl"))
	if _, ok := got["O-00004"]; ok {
		t.Error("O-00004, answered by the answer folder's shard, was answered again")
	}
	for _, id := range []string{"O-00001", "O-00002", "O-00003"} {
		if _, ok := got[id]; !ok {
			t.Errorf("%s, answered only beside the prompts, was not asked", id)
		}
	}
}

// TestGenUnknownTokenCounts: answers without a token count are shown as
// such, not added as 0 tokens.
func TestGenUnknownTokenCounts(t *testing.T) {
	t.Parallel()
	h := sim.New(sim.Config{Seed: 25}).Handler()
	url := wrap(t, h, map[string]http.HandlerFunc{"/generate": func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		var m map[string]any
		json.Unmarshal(rec.Body.Bytes(), &m)
		if rec.Code != http.StatusOK { // the route's probe
			w.WriteHeader(rec.Code)
			w.Write(rec.Body.Bytes())
			return
		}
		delete(m["meta_info"].(map[string]any), "completion_tokens")
		delete(m, "output_ids")
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(m)
	}})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "U", "ids", 5)
	sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{url}, Out: out}, root)
	if err != nil || sum.Responses != 5 || sum.UnknownTokens != 5 || sum.Tokens != 0 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	if !strings.Contains(log, "tokens unknown") || strings.Contains(log, "(0 tokens)") || strings.Contains(log, " 0 tokens/s") {
		t.Errorf("unknown counts shown as 0:\n%s", log)
	}
	for _, tc := range []struct {
		n, tokens, unknown int64
		want               string
	}{
		{10, 500, 0, "50 tokens/s"},
		{10, 0, 10, "tokens/s unknown"},
		{10, 400, 2, ">=40 tokens/s (2 answers without a token count)"},
		{0, 0, 0, "0 tokens/s"},
	} {
		if got := tokenRate(tc.n, tc.tokens, tc.unknown, 10); got != tc.want {
			t.Errorf("tokenRate(%d, %d, %d) = %q; want %q", tc.n, tc.tokens, tc.unknown, got, tc.want)
		}
	}
}

// TestGenRedactsCredentials: the user and password of a --server URL appear
// nowhere gen prints or stores them: the log, errors.jsonl, answer lines,
// the /metrics labels, the index (its events and series) and the error a
// run its server stops exits with.
func TestGenRedactsCredentials(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 26, ContextLength: 64})
	secret := strings.Replace(url, "http://", "http://alice:hunter2@", 1)
	root, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "P")
	os.MkdirAll(dir, 0o755)
	long, _ := json.Marshal(map[string]any{"id": "long", "input_ids": make([]int, 100)})
	short, _ := json.Marshal(map[string]any{"id": "short", "input_ids": sim.Encode("hi", true)})
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(string(long)+"\n"+string(short)+"\n"), 0o644)
	var metrics func(*prom.Writer)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{secret}, Out: out,
		OnMetrics: func(f func(*prom.Writer)) { metrics = f }}, root)
	if err != nil || sum.Responses != 1 || sum.Errors != 1 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	var m bytes.Buffer
	metrics(prom.NewWriter(&m))
	raw, _ := os.ReadFile(filepath.Join(out, "P", "raw_responses.jsonl"))
	errs, _ := os.ReadFile(filepath.Join(out, "P", "errors.jsonl"))
	// The index stores the run's events (the start event names the servers)
	// and each server's series under its name: its bytes, free pages too,
	// hold the server's name only redacted.
	index, err := os.ReadFile(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"log": log, "metrics": m.String(), "raw_responses.jsonl": string(raw), "errors.jsonl": string(errs), "the index": string(index)} {
		show := text
		if what == "the index" { // binary: only the bytes around a hit
			show = ""
			if i := max(strings.Index(text, "hunter2"), strings.Index(text, "alice")); i >= 0 {
				show = fmt.Sprintf("%q", text[max(0, i-100):min(len(text), i+100)])
			}
		}
		if strings.Contains(text, "hunter2") || strings.Contains(text, "alice") {
			t.Errorf("%s shows the credentials:\n%s", what, show)
		}
		if what != "log" && !strings.Contains(text, "REDACTED@") {
			t.Errorf("%s does not name the server:\n%s", what, show)
		}
	}
	// A run its server stops (a wrong route: 404) names that server in the
	// error gen exits with, redacted.
	_, log, err = runGen(t, t.Context(), filepath.Join(t.TempDir(), "h.db"), Config{Servers: []string{secret + "/nope"}, Out: t.TempDir()}, root)
	if err == nil || !strings.Contains(err.Error(), "REDACTED@") || strings.Contains(err.Error()+log, "hunter2") || strings.Contains(err.Error()+log, "alice") {
		t.Errorf("a run stopped by its server: %v\n%s", err, log)
	}
}

// TestGenConnectionFailuresCount: connections lost while the server stays
// up count toward MaxAttempts, so a prompt does not loop forever.
func TestGenConnectionFailuresCount(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 27, ResetRate: 1})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "R", "ids", 4)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	sum, log, err := runGen(t, ctx, filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{url}, Out: out, MaxAttempts: 3,
		Backoff: client.Backoff{Base: time.Millisecond, Max: time.Millisecond}}, root)
	if err != nil || sum.Errors != 4 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	for id, e := range outputLines(t, filepath.Join(out, "R", "errors.jsonl")) {
		if msg := e[0]["error"].(string); !strings.Contains(msg, "gave up after 3 attempts") {
			t.Errorf("%s: %v", id, e[0])
		}
	}
}

// TestGenStartsWithTheFirstServer: a server that is not up at startup does
// not hold back the run (for --wait-ready, 30 minutes by default): the run
// starts with the servers that are ready and waits for it in the
// background.
func TestGenStartsWithTheFirstServer(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 28})
	dead := "http://" + freeAddr(t)
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "F", "ids", 20)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	sum, log, err := runGen(t, ctx, filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{dead, url}, Out: out}, root)
	if err != nil || sum.Responses != 20 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	if !strings.Contains(log, "waiting for "+dead) {
		t.Errorf("the missing server was not mentioned:\n%s", log)
	}
}
