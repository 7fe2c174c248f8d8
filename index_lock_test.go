package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// The tests here check what README's "A reader never holds the writer"
// and "Live answers while a run writes" promise, each with real processes.

// holdLockEnv makes the test binary a helper process that takes a flock on
// a file, says "held" on stdout and keeps the lock until its stdin closes:
// a stand-in for another process (an older gendex reader, a bbolt tool,
// another writer) holding the index.
const holdLockEnv = "GENDEX_TEST_HOLD_LOCK"

func init() {
	spec := os.Getenv(holdLockEnv)
	if spec == "" {
		return
	}
	mode, path, _ := strings.Cut(spec, ":")
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	how := syscall.LOCK_SH
	if mode == "write" {
		how = syscall.LOCK_EX
	}
	if err := syscall.Flock(int(f.Fd()), how); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println("held")
	io.Copy(io.Discard, os.Stdin)
	os.Exit(0)
}

// holdLock starts a process that holds the file at path locked (mode
// "read": shared, as a reader does; "write": exclusive) until the test
// ends, and returns its pid. Its command line ends in "holds-the-index".
func holdLock(t *testing.T, mode, path string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$", "holds-the-index")
	cmd.Env = append(os.Environ(), holdLockEnv+"="+mode+":"+path)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "held\n" {
		t.Fatalf("the lock holder said %q", line)
	}
	return cmd.Process.Pid
}

// pipeQueued is how many bytes wait unread in the pipe r.
func pipeQueued(r *os.File) int {
	var v int32
	syscall.Syscall(syscall.SYS_IOCTL, r.Fd(), syscall.TIOCINQ, uintptr(unsafe.Pointer(&v)))
	return int(v)
}

// TestPipedReaderHoldsNoLock: `gendex query missing DS | less`, with no
// writer running, reads the index into its spool and lets the file go
// before it writes a byte: while its pipe is full and nobody reads it, a
// writer starts and indexes, and afterwards the reader's whole answer
// arrives. (When the reader wrote from inside its read transaction, it held
// the file's lock for as long as its pipe stalled, and the writer failed
// with "database is in use".)
func TestPipedReaderHoldsNoLock(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	const n = 100_000 // ~900 KB of ids: far more than a pipe holds
	root := promptsRoot(t, "big", n)
	db := filepath.Join(t.TempDir(), "g.db")
	if code, _, stderr := runGendexWithin(t, 2*time.Minute, gendexOpts{}, gendexBinary(t), "--db", db, "ingest", root); code != 0 {
		t.Fatalf("ingest: exit %d\n%s", code, stderr)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	reader := startGendexWith(t, gendexOpts{stdout: w}, bin, "--db", db, "query", "missing", "big", "--format", "tsv", "--no-header")
	w.Close()
	defer reader.Kill()
	waitFor(t, 60*time.Second, "the reader never wrote to its pipe", func() bool { return pipeQueued(r) > 0 })

	// The pipe is full and unread: the reader is blocked in a write.
	more := filepath.Join(root, "more")
	os.MkdirAll(more, 0o755)
	writePrompts(t, more, `{"id":"m1","text":"x"}`+"\n")
	code, _, stderr := runGendexWithin(t, time.Minute, gendexOpts{}, gendexBinary(t), "--db", db, "ingest", root)
	if code != 0 {
		t.Fatalf("a writer could not start while a reader's pipe was stalled: exit %d\n%s", code, stderr)
	}

	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	if code := reader.Wait(); code != 0 {
		t.Fatalf("the reader: exit %d\n%s", code, reader.Stderr())
	}
	if got := strings.Count(string(out), "\n"); got != n {
		t.Errorf("the reader wrote %d lines, want %d ids", got, n)
	}
}

// TestLockErrorNamesTheHolder: when another process holds the index, the
// error says whether a writer or a reader holds it, and which process (its
// pid and command line), and what to do; for a writer that is refused and
// for a reader alike.
func TestLockErrorNamesTheHolder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	gendexBinary(t)
	t.Parallel()
	root := promptsRoot(t, "d", 10)
	for _, c := range []struct {
		mode, kind string
		args       []string
	}{
		{"read", "a reader", []string{"ingest", root}},
		{"write", "a writer", []string{"query", "progress"}},
		{"write", "a writer", []string{"ingest", root}},
	} {
		db := filepath.Join(t.TempDir(), "g.db")
		if code, _, stderr := runGendexWithin(t, time.Minute, gendexOpts{}, gendexBinary(t), "--db", db, "ingest", root); code != 0 {
			t.Fatalf("ingest: exit %d\n%s", code, stderr)
		}
		pid := holdLock(t, c.mode, db)
		code, _, stderr := runGendexWithin(t, time.Minute, gendexOpts{}, gendexBinary(t), append([]string{"--db", db}, c.args...)...)
		want := fmt.Sprintf("%s (pid %d: %s -test.run=^$ holds-the-index)", c.kind, pid, os.Args[0])
		if code != 1 || !strings.Contains(stderr, "in use") || !strings.Contains(stderr, want) || !strings.Contains(stderr, "wait for it to finish, or stop it") {
			t.Errorf("gendex %s with the index held by %s: exit %d, want 1 and a message naming %q and what to do:\n%s",
				strings.Join(c.args, " "), c.kind, code, want, stderr)
		}
	}
}

// TestFrozenWriter: with the writer stopped (Ctrl-Z, SIGSTOP), a reader
// gives up after a few seconds with exit 1 and a message that says the
// writer is not answering, which process it is and how to resume it; the
// shell's watch, of the dashboard or of a question, shows the same and
// keeps going, and shows its answer again once the writer resumes.
func TestFrozenWriter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	gendexBinary(t)
	t.Parallel()
	root := promptsRoot(t, "d", 100)
	w := startWriter(t, filepath.Join(t.TempDir(), "g.db"), nil, "ingest", "--follow", root)
	pid := w.Pid()
	// The cleanup that interrupts the writer needs it running.
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGCONT) })
	if code, _, stderr := runGendexWithin(t, time.Minute, gendexOpts{}, gendexBinary(t), "--db", w.db, "query", "progress"); code != 0 {
		t.Fatalf("query before the stop: exit %d\n%s", code, stderr)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runGendexWithin(t, time.Minute, frozenReader, gendexBinary(t), "--db", w.db, "query", "progress")
	if code != 1 || stdout != "" || !strings.Contains(stderr, "not answering") || !strings.Contains(stderr, fmt.Sprintf("kill -CONT %d", pid)) ||
		!strings.Contains(stderr, "ingest --follow") {
		t.Errorf("query with the writer stopped: exit %d, want 1 and a message that the writer (its pid and command) is not answering and how to resume it\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}

	// watch, off a terminal, of the dashboard and of one question: a
	// refresh that gets no answer says so, the next one asks again, and
	// once the writer resumes its answer is back.
	for i, line := range []string{"watch 0.2", "watch 0.2 progress d"} {
		if i > 0 {
			if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		}
		watchFrozen(t, w.db, line, func() { syscall.Kill(pid, syscall.SIGCONT) })
	}
}

// frozenReader runs a reader of a stopped writer: it gives up waiting for
// the answer to begin after 1 s, not 5 s (a test hook of query/live).
var frozenReader = gendexOpts{env: []string{"GENDEX_FIRST_BYTE_TIMEOUT=1s"}}

// watchFrozen types line into a shell on db whose writer is stopped: two
// refreshes say the writer is not answering; after resume, a row of
// dataset d comes.
func watchFrozen(t *testing.T, db, line string, resume func()) {
	t.Helper()
	o := frozenReader
	o.converse = true
	sh := startGendexWith(t, o, gendexBinary(t), "--db", db, "shell")
	defer sh.Kill()
	in := sh.Stdin()
	io.WriteString(in, line+"\n")
	lines := sh.StdoutLines()
	next := func(what string, ok func(string) bool) {
		t.Helper()
		timeout := time.After(2 * time.Minute)
		for {
			select {
			case l, open := <-lines:
				if !open {
					t.Fatalf("%s: the shell ended while waiting for %s\n%s", line, what, sh.Stderr())
				}
				if ok(l) {
					return
				}
			case <-timeout:
				t.Fatalf("%s: no %s\n%s", line, what, sh.Stderr())
			}
		}
	}
	for i := range 2 {
		next(fmt.Sprintf("not-answering note %d", i+1), func(l string) bool { return strings.Contains(l, "asking again at the next refresh") })
	}
	resume()
	next("row of d after the writer resumed", func(l string) bool { return strings.HasPrefix(l, "d ") || strings.HasPrefix(l, "d\t") })
	sh.Interrupt()
	in.Close()
	if code := sh.Wait(); code != 0 {
		t.Errorf("%s: shell: exit %d\n%s", line, code, sh.Stderr())
	}
}

// TestSocketNotInGroupWritableFolder: a database in a folder its group can
// write gets its socket in the private runtime folder, not beside it, and
// readers find the writer there.
func TestSocketNotInGroupWritableFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	gendexBinary(t)
	rt := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", rt) // for this process's live.SocketPath too
	dir := filepath.Join(t.TempDir(), "shared")
	os.Mkdir(dir, 0o775)
	if err := os.Chmod(dir, 0o775); err != nil { // whatever the umask
		t.Fatal(err)
	}
	db := filepath.Join(dir, "g.db")
	root := promptsRoot(t, "d", 10)
	w := startWriter(t, db, []string{"XDG_RUNTIME_DIR=" + rt}, "ingest", "--follow", root)
	if _, err := os.Lstat(db + ".sock"); err == nil {
		t.Errorf("the writer put its socket in %s, a folder its group can write", dir)
	}
	socks, _ := filepath.Glob(filepath.Join(rt, "gendex", "*.sock"))
	if len(socks) != 1 || socks[0] != w.socket() {
		t.Errorf("sockets in the runtime folder: %v, want [%s]", socks, w.socket())
	}
	// The writer holds the file: an answer can only come from it.
	q := startGendexWith(t, gendexOpts{env: []string{"XDG_RUNTIME_DIR=" + rt}, combined: true}, gendexBinary(t), "--db", db, "query", "progress", "--format", "tsv", "--no-header")
	if code := q.Wait(); code != 0 || !strings.HasPrefix(q.Stdout(), "d\t") {
		t.Errorf("query while the writer runs: exit %d\n%s", code, q.Stdout())
	}
}

// TestServerURLWithPathAndQuery: gen reaches a server behind a prefix with
// a query string (a router's path, a gateway's key): every request goes
// to the prefix joined with the endpoint, with the query string.
func TestServerURLWithPathAndQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	simURL := startSimProcess(t, bin)
	target, _ := url.Parse(simURL)
	var bad atomic.Int32
	var badReq atomic.Value
	proxy := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/sglang/")
		if !ok || r.URL.Query().Get("key") != "k1" {
			bad.Add(1)
			badReq.Store(r.URL.RequestURI())
			http.NotFound(w, r)
			return
		}
		r.URL.Path, r.URL.RawPath, r.URL.RawQuery = "/"+rest, "", ""
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	root := promptsRoot(t, "d", 20)
	out := filepath.Join(t.TempDir(), "out")
	code, _, stderr := runGendexWithin(t, 2*time.Minute, gendexOpts{}, gendexBinary(t), "--db", filepath.Join(t.TempDir(), "g.db"), "gen", "--server", front.URL+"/sglang/?key=k1",
		"--scrape-every", "0", "--max-new-tokens", "8", "--out", out, root)
	if code != 0 || bad.Load() != 0 {
		t.Fatalf("gen through a prefix and a query string: exit %d, %d requests elsewhere (the last %v)\n%s", code, bad.Load(), badReq.Load(), stderr)
	}
	if n := lines(t, filepath.Join(out, "d", "raw_responses.jsonl")); n != 20 {
		t.Errorf("%d answers, want 20", n)
	}
	if strings.Contains(stderr, "k1") {
		t.Errorf("gen printed the URL's query string:\n%s", stderr)
	}
}
