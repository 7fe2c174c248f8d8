package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The token never lands in a log: off a terminal (a batch job's output,
// often readable by the project group) gendex web and --listen-queries
// keep a token they made in a file only its owner can read, beside the
// index, and print the file's path; on a terminal, the token as before.

// saidFile is how a line names a token kept in a file.
var saidFile = regexp.MustCompile(`\$\(cat ([^)]+)\)`)

// tokenInFile returns the token in the file line names ("$(cat PATH)")
// and the file's path, after checking the file: a plain file of this
// user, mode 0600, holding 32 hex digits and a newline.
func tokenInFile(t *testing.T, line string) (token, path string) {
	t.Helper()
	m := saidFile.FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the line names no token file ($(cat PATH)): %q", line)
	}
	path = m[1]
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatalf("the token file the line names: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 || int(st.Uid) != os.Geteuid() {
		t.Errorf("%s: %v, uid %d; want a plain file of uid %d, mode 0600", path, fi.Mode(), st.Uid, os.Geteuid())
	}
	b, _ := os.ReadFile(path)
	if !regexp.MustCompile(`^[0-9a-f]{32}\n$`).Match(b) {
		t.Errorf("%s holds %q; want a token of 32 hex digits and a newline", path, b)
	}
	return strings.TrimSpace(string(b)), path
}

// noToken fails the test when a process's output holds token.
func noToken(t *testing.T, who string, p *gendexProc, token string) {
	t.Helper()
	if strings.Contains(p.Stdout(), token) || strings.Contains(p.Stderr(), token) {
		t.Errorf("%s printed its token %s:\nstdout %q\nstderr %q", who, token, p.Stdout(), p.Stderr())
	}
}

// gone waits for the file at path to be removed.
func gone(t *testing.T, path string) {
	t.Helper()
	waitFor(t, 10*time.Second, path+" to be removed", func() bool {
		_, err := os.Lstat(path)
		return os.IsNotExist(err)
	})
}

// TestWebTokenOffTheLog: gendex web off a terminal prints neither its
// token nor anything that holds it: the URL names <index>.web-PORT.token,
// mode 0600, whose token opens the page, and the file goes when web ends.
// With $GENDEX_TOKEN set, nothing secret is printed and no file is made.
func TestWebTokenOffTheLog(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	writeIDPrompts(t, filepath.Join(p.dir, "data", "calm"), "calm", 4)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "8", "data")

	addr := freeAddr(t)
	web := startGendexWith(t, gendexOpts{dir: p.dir, env: []string{"GENDEX_TOKEN="}}, p.bin, "web", "--listen", addr)
	line, ok := web.StdoutLine("Ctrl-C")
	if !ok {
		t.Fatalf("gendex web said nothing: exit %d\n%s", web.Wait(), web.Stderr())
	}
	token, path := tokenInFile(t, line)
	_, port, _ := strings.Cut(addr, ":")
	if want := filepath.Join(p.dir, "gendex.db.web-"+port+".token"); path != want {
		t.Errorf("the token file is %s; want %s, beside the index", path, want)
	}
	base := "http://" + addr + "/"
	if !strings.Contains(line, base+"?token=$(cat "+path+")") {
		t.Errorf("gendex web printed %q; want its URL with ?token=$(cat %s)", line, path)
	}
	if code, _ := ask(t, base, "", "", 1<<20); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, body := ask(t, base, "", "Bearer "+token, 1<<20); code != 200 || !strings.Contains(body, "calm") {
		t.Errorf("the file's token: %d, want the run page\n%.300s", code, body)
	}
	if code, _ := ask(t, base+"?token="+token, "", "", 1<<20); code != 303 {
		t.Errorf("?token= the file's token: %d, want 303 (the cookie set)", code)
	}
	web.Interrupt()
	if code := web.WaitWithin(t, 30*time.Second); code != 0 {
		t.Errorf("gendex web, interrupted: exit %d\n%s", code, web.Stderr())
	}
	noToken(t, "gendex web", web, token)
	gone(t, path)

	chosen := startGendexWith(t, gendexOpts{dir: p.dir, env: []string{"GENDEX_TOKEN=chosen-7f3e-secret"}}, p.bin, "web", "--listen", addr)
	if line, ok = chosen.StdoutLine("Ctrl-C"); !ok || !strings.Contains(line, "?token=$GENDEX_TOKEN") {
		t.Errorf("gendex web with $GENDEX_TOKEN printed %q; want the URL with ?token=$GENDEX_TOKEN\n%s", line, chosen.Stderr())
	}
	if code, _ := ask(t, base, "", "Bearer chosen-7f3e-secret", 1<<20); code != 200 {
		t.Errorf("$GENDEX_TOKEN: %d, want 200", code)
	}
	chosen.Interrupt()
	chosen.WaitWithin(t, 30*time.Second)
	noToken(t, "gendex web with $GENDEX_TOKEN", chosen, "chosen-7f3e-secret")
	if files, _ := filepath.Glob(filepath.Join(p.dir, "*.token")); len(files) > 0 {
		t.Errorf("gendex web with $GENDEX_TOKEN made %v", files)
	}
}

// TestGenListenTokenOffTheLog: gen --listen-queries off a terminal prints
// its token nowhere: its line names <index>.listen.token, mode 0600, whose
// token reads the answers while gen runs; the file goes when gen ends.
// With $GENDEX_TOKEN set, nothing secret is printed and no file is made.
func TestGenListenTokenOffTheLog(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	writeIDPrompts(t, filepath.Join(p.dir, "data", "calm"), "calm", 200)
	db := filepath.Join(p.dir, "g.db")
	gen := startGendexWith(t, gendexOpts{dir: p.dir, env: []string{"GENDEX_TOKEN="}}, p.bin, "--db", db, "gen", "--server", "sim",
		"--sim-decode-tps", "20", "--max-new-tokens", "64", "--concurrency", "4", "--listen", "127.0.0.1:0", "--listen-queries", "data")
	line, ok := gen.StderrLine("Prometheus metrics on http://")
	if !ok {
		t.Fatalf("gen never said where it listens: exit %d\n%s", gen.Wait(), gen.Stderr())
	}
	token, path := tokenInFile(t, line)
	if path != db+".listen.token" {
		t.Errorf("the token file is %s; want %s, beside the index", path, db+".listen.token")
	}
	_, rest, _ := strings.Cut(line, "Prometheus metrics on http://")
	addr, _, _ := strings.Cut(rest, "/metrics")
	q := "http://" + addr + "/v1/query?arg=progress"
	if code, _ := ask(t, q, "", "", 1<<20); code != 401 {
		t.Errorf("no token: %d, want 401", code)
	}
	waitFor(t, 30*time.Second, "the answers, with the file's token", func() bool {
		code, body := ask(t, q, "", "Bearer "+token, 1<<20)
		return code == 200 && strings.Contains(body, `"calm"`)
	})
	gen.Interrupt()
	gen.WaitWithin(t, 60*time.Second)
	noToken(t, "gen", gen, token)
	gone(t, path)

	chosen := startGendexWith(t, gendexOpts{dir: p.dir, env: []string{"GENDEX_TOKEN=chosen-7f3e-secret"}}, p.bin, "--db", db, "gen", "--server", "sim",
		"--sim-decode-tps", "20", "--max-new-tokens", "64", "--concurrency", "4", "--listen", "127.0.0.1:0", "--listen-queries", "data")
	if line, ok = chosen.StderrLine("Prometheus metrics on http://"); !ok || !strings.Contains(line, "Bearer $GENDEX_TOKEN") {
		t.Errorf("gen with $GENDEX_TOKEN said %q; want Bearer $GENDEX_TOKEN\n%s", line, chosen.Stderr())
	}
	chosen.Interrupt()
	chosen.WaitWithin(t, 60*time.Second)
	noToken(t, "gen with $GENDEX_TOKEN", chosen, "chosen-7f3e-secret")
	if files, _ := filepath.Glob(filepath.Join(p.dir, "*.token")); len(files) > 0 {
		t.Errorf("gen with $GENDEX_TOKEN made %v", files)
	}
}

// TestTokenFileInTheWay: what is already at <index>.listen.token is
// replaced only when it is a file of this user (an earlier run's, whatever
// its mode: the new one is made mode 0600, never chmod-ed); a link or
// another user's file there is refused, untouched, and the error says what
// to do. A file another run has since rewritten is not removed.
func TestTokenFileInTheWay(t *testing.T) {
	t.Parallel()
	root := promptsRoot(t, "calm", 3)
	dir := t.TempDir()
	db := filepath.Join(dir, "w.db")
	path := db + ".listen.token"
	args := []string{"ingest", "--follow", "--listen", "127.0.0.1:0", "--listen-queries", root}

	writeTestFile(t, path, "an earlier run's\n")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	w := startWriter(t, db, []string{"GENDEX_TOKEN="}, args...)
	line, _ := w.StderrLine("Prometheus metrics on http://")
	token, said := tokenInFile(t, line) // mode 0600, the new token
	if said != path || token == "" {
		t.Errorf("the writer kept its token in %s; want %s replaced", said, path)
	}
	writeTestFile(t, path, "another run's\n")
	w.Interrupt()
	w.WaitWithin(t, 30*time.Second)
	if b, _ := os.ReadFile(path); string(b) != "another run's\n" {
		t.Errorf("the writer, ending, removed or changed a token file another run rewrote: %q", b)
	}
	os.Remove(path)

	// refused starts a writer that must refuse; one that serves instead
	// is interrupted at once (a refusal missed, not a hang).
	refused := func() (code int, stderr string) {
		w := startGendexWith(t, gendexOpts{env: []string{"GENDEX_TOKEN="}}, gendexBinary(t), append([]string{"--db", db}, args...)...)
		w.StderrLine("serving ") // or its exit
		w.Interrupt()
		return w.WaitWithin(t, 30*time.Second), w.Stderr()
	}
	target := filepath.Join(dir, "target")
	writeTestFile(t, target, "not a token\n")
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	code, stderr := refused()
	if b, _ := os.ReadFile(target); code != 1 || !strings.Contains(stderr, path) || !strings.Contains(stderr, "GENDEX_TOKEN") || string(b) != "not a token\n" {
		t.Errorf("a link at %s: exit %d, target %q\n%s\nwant exit 1 naming the file and $GENDEX_TOKEN, the target untouched", path, code, b, stderr)
	}
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != os.ModeSymlink {
		t.Errorf("the link at %s was taken away", path)
	}
	os.Remove(path)

	if os.Geteuid() != 0 {
		return // making another user's file needs root
	}
	writeTestFile(t, path, "theirs\n")
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	code, stderr = refused()
	if b, _ := os.ReadFile(path); code != 1 || !strings.Contains(stderr, "not yours") || string(b) != "theirs\n" {
		t.Errorf("another user's file at %s: exit %d, it holds %q\n%s\nwant exit 1, the file untouched", path, code, b, stderr)
	}
}

// TestWebTokenOnATerminal: on a terminal gendex web prints the URL with
// its token, one paste, as before, and keeps no file.
func TestWebTokenOnATerminal(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	writeIDPrompts(t, filepath.Join(p.dir, "data", "calm"), "calm", 2)
	p.mustRun("--db", "t.db", "gen", "--server", "sim", "--max-new-tokens", "8", "data")
	tm := newTerm(t, p.dir, "GENDEX_TOKEN=")
	tm.typeLine(p.bin + " --db t.db web --listen " + freeAddr(t))
	tm.waitFor("Ctrl-C to stop")
	if !regexp.MustCompile(`/\?token=[0-9a-f]{32}; Ctrl-C to stop`).MatchString(tm.screen()) {
		t.Errorf("gendex web on a terminal: want its URL with ?token= and 32 hex digits:\n%s", tm.screen())
	}
	if files, _ := filepath.Glob(filepath.Join(p.dir, "*.token")); len(files) > 0 {
		t.Errorf("gendex web on a terminal made %v", files)
	}
	tm.send("C-c")
	tm.waitLastLine("the prompt again", func(l string) bool { return strings.HasSuffix(l, "$") })
}
