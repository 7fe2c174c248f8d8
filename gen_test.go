package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
)

// genPrompts writes n token-id prompts to a new dataset folder and returns
// the folder.
func genPrompts(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	var b strings.Builder
	for i := range n {
		b.WriteString(`{"id":"p` + string(rune('a'+i)) + `","text":"hello"}` + "\n")
	}
	writePrompts(t, dir, b.String())
	return dir
}

// TestGenAPIKeyFile: the key can come from a file (trailing newline
// trimmed); an unreadable or empty file is an error naming it; the help
// says --api-key shows in ps.
func TestGenAPIKeyFile(t *testing.T) {
	t.Parallel()
	dir := genPrompts(t, 3)
	keyFile := filepath.Join(t.TempDir(), "key")
	os.WriteFile(keyFile, []byte("sekret\n"), 0o600)
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	missing := filepath.Join(t.TempDir(), "missing")
	db := filepath.Join(t.TempDir(), "g.db")

	r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--sim-api-key", "sekret", "--api-key-file", keyFile, dir)
	if r.code != 0 || strings.Contains(r.stderr, "sekret") {
		t.Fatalf("key from a file: exit %d (%v)\n%s", r.code, r.err, r.stderr)
	}
	for _, tc := range []struct {
		file string
		want string
	}{
		{missing, missing},
		{empty, empty + " is empty"},
	} {
		r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--api-key-file", tc.file, dir)
		if r.code != 1 || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("--api-key-file %s: exit %d\n%s", tc.file, r.code, r.stderr)
		}
	}
	if r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--api-key", "x", "--api-key-file", keyFile, dir); r.code != 2 {
		t.Errorf("both flags: exit %d\n%s", r.code, r.stderr)
	}
	help := gendex(t, testEnv(nil), "gen", "-h")
	if !strings.Contains(help.stdout, "-api-key-file") || !strings.Contains(help.stdout, "ps") {
		t.Errorf("help:\n%s", help.stdout)
	}
}

// TestGenRunLevelErrorExits: against a server without /generate gen exits
// at once, refused (5: nothing was sent), says what to check, and records
// no prompt as failed.
func TestGenRunLevelErrorExits(t *testing.T) {
	t.Parallel()
	h := sim.New(sim.Config{}).Handler()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/generate" {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer hs.Close()
	dir := genPrompts(t, 5)
	db := filepath.Join(t.TempDir(), "g.db")
	for run := range 2 {
		r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", hs.URL, dir)
		if r.code != 5 || !strings.Contains(r.stderr, hs.URL) || !strings.Contains(r.stderr, "HTTP 404") || !strings.Contains(r.stderr, "--api generate, chat or completions forces one") {
			t.Errorf("run %d: exit %d\n%s", run, r.code, r.stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "errors.jsonl")); err == nil {
		t.Error("errors.jsonl was written")
	}
}
