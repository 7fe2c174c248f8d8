package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"gendex/ingest/gen/sim"
)

// TestGenSaysRetries: a server that answers HTTP 500 with llama.cpp's
// error body to the first attempt of every other prompt: gen answers every
// prompt, and its summary, `query events` and `query server` say how many
// attempts it retried and why (as many as the server failed).
func TestGenSaysRetries(t *testing.T) {
	t.Parallel()
	h := sim.New(sim.Config{Seed: 50}).Handler()
	var mu sync.Mutex
	seen := map[string]bool{}
	failed := 0
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req struct {
			Text string `json:"text"`
		}
		json.Unmarshal(body, &req)
		var n int
		fmt.Sscanf(req.Text, "question %d", &n)
		if r.URL.Path == "/generate" && n%2 == 1 {
			mu.Lock()
			first := !seen[req.Text]
			seen[req.Text] = true
			if first {
				failed++
			}
			mu.Unlock()
			if first {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, `{"error":{"code":500,"message":"Failed to parse input","type":"server_error"}}`)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	dir := filepath.Join(t.TempDir(), "R")
	os.MkdirAll(dir, 0o755)
	var b strings.Builder
	for i := range 8 {
		fmt.Fprintf(&b, `{"id":"r%d","text":"question %d"}`+"\n", i, i)
	}
	writePrompts(t, dir, b.String())
	db := filepath.Join(t.TempDir(), "g.db")
	env := testEnv(nil)
	env.Now = time.Now
	r := gendex(t, env, "--db", db, "gen", "--server", hs.URL, dir)
	if r.code != 0 || failed != 4 {
		t.Fatalf("%d failed by the server\n%s", failed, r)
	}
	if want := "gen: 4 attempts retried: 4 HTTP 500 'Failed to parse input'\n"; !strings.Contains(r.stderr, want) {
		t.Errorf("the summary lacks %q:\n%s", want, r.stderr)
	}
	ev := gendex(t, env, "--db", db, "query", "events", "--format", "json")
	var events []eventRow
	decodeJSON(t, ev.stdout, &events)
	var retries []string
	for _, e := range events {
		if e.Event == "retries" && e.Detail != nil {
			retries = append(retries, *e.Detail)
		}
	}
	if len(retries) != 1 || retries[0] != "4 attempts retried within 10s: 4 HTTP 500 'Failed to parse input'" {
		t.Errorf("retries events %q\n%s", retries, ev.stdout)
	}
	q := gendex(t, env, "--db", db, "query", "server", "--window", "1h", "--format", "json")
	var rows []struct {
		Retries   *int    `json:"retries"`
		LastError *string `json:"last_error"`
	}
	if err := json.Unmarshal([]byte(q.stdout), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("%v\n%s", err, q)
	}
	if rows[0].Retries == nil || *rows[0].Retries != 4 || rows[0].LastError == nil || *rows[0].LastError != "HTTP 500 'Failed to parse input'" {
		t.Errorf("query server: %s", q.stdout)
	}
}
