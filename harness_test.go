// The harness every whole-binary test of package main uses: the binary
// and testdata's tools built once, before any test (gendexBinary,
// built), a command run in this process with an Env of
// buffers (gendex, mustGendex), the binary run as a user runs it
// (runGendex, mustRunGendex, runGendexCombined, runGendexWithin) or in the
// background (startGendex, startGendexWith: a gendexProc the test reads
// while it runs, signals, kills and waits for; killWhileWriting), a
// simulator process (startSimProcess, startSimAt), a running writer
// (startWriter), a work folder with the demo prompts and its default index
// (placeRun), a question's JSON (queryJSON, mustQueryJSON, decodeJSON),
// prompt and fixture files (writePrompts, writeTestFile, promptsRoot,
// ingested) and golden files (golden). Every gendex process a test starts
// goes through startGendexWith. A test file holds its command's or its
// guarantee's tests and only the helpers no other file needs.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gendex/query/live"
)

// Building the binary.

// The programs the tests run, each built once before any test starts
// (TestMain): building one while tests were starting processes made the
// exec of the new file fail now and then with EACCES (a child forked
// meanwhile holds the file open for writing).
var builds = map[string]*build{
	"gendex":   {pkg: "."},
	"seedgen":  {pkg: "./testdata/seedgen"},
	"seedread": {pkg: "./testdata/seedread"},
}

// build is one program built into a folder of its own, or why it could
// not be.
type build struct {
	pkg  string
	path string
	err  error
}

// buildAll builds every program of builds, at once.
func buildAll() {
	var wg sync.WaitGroup
	for name, b := range builds {
		wg.Go(func() { b.path, b.err = goBuild(name, b.pkg) })
	}
	wg.Wait()
}

// goBuild builds package pkg into a folder of its own as name.
func goBuild(name, pkg string) (string, error) {
	dir, err := os.MkdirTemp("", "gendex-test-"+name)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", path, pkg).CombinedOutput(); err != nil {
		return path, fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
	}
	return path, nil
}

// built returns the program name (gendex, or the stdlib program
// ./testdata/<name>) that TestMain built, or fails the test with why it
// could not.
func built(t *testing.T, name string) string {
	t.Helper()
	b, ok := builds[name]
	if !ok {
		t.Fatalf("no program %s in builds (harness_test.go): add it there", name)
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// gendexBinary returns the gendex binary.
func gendexBinary(t *testing.T) string {
	t.Helper()
	return built(t, "gendex")
}

// testParallel is how many whole-binary tests run at once unless -parallel
// says otherwise: they mostly wait for the processes they start (the
// simulator, gen, a shell in tmux), so far more of them than the 2 cores
// of CI (go test's default, GOMAXPROCS) keep the cores busy; every test
// but the three that set the process's environment or folder
// (t.Setenv, t.Chdir) runs in parallel.
const testParallel = 8

// TestMain builds the programs before any test starts, runs the tests
// testParallel at a time (unless -parallel is given), and removes the
// programs.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", strconv.Itoa(testParallel))
	}
	buildAll()
	if err := builds["gendex"].err; err != nil {
		fmt.Fprintln(os.Stderr, err) // every test that runs the binary fails with it too
	}
	code := m.Run()
	for _, b := range builds {
		if b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
	}
	os.Exit(code)
}

// Running a command in this process.

// update makes golden and goldenIn rewrite the golden files instead of
// comparing (go test . -update).
var update = flag.Bool("update", false, "rewrite the golden files in testdata/cli")

// The datasets of testdata/query/root are described in query/query_test.go.
var (
	root      = filepath.Join("testdata", "query", "root")
	brokenRaw = filepath.Join("testdata", "cli", "broken", "bad", "raw_responses.jsonl")
)

// clockNow is a moment the clock dataset was written around: its 30 s
// window (the completed seconds before it) holds five responses, 53 known
// tokens and one without a count.
var clockNow = time.Date(2026, 11, 28, 10, 0, 0, 500e6, time.UTC)

// testEnv is an Env with buffers, no TTY, an empty environment (the
// developer's own $GENDEX_DB must not leak in) and a fixed clock.
func testEnv(vars map[string]string) *Env {
	return &Env{
		Stdin:  strings.NewReader(""),
		Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{},
		Getenv: func(k string) string { return vars[k] },
		Now:    func() time.Time { return clockNow },
	}
}

// result is how one command ended: its exit code, the error run returned
// and what it wrote.
type result struct {
	code           int
	err            error
	stdout, stderr string
}

// gendex runs the command line args as main does, with fresh buffers.
func gendex(t *testing.T, env *Env, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := *env
	e.Stdout, e.Stderr = &out, &errb
	err := run(context.Background(), &e, args)
	code := exitCode(&errb, err)
	return result{code, err, out.String(), errb.String()}
}

// String is the result as a failing test shows it.
func (r result) String() string {
	return "exit " + strconv.Itoa(r.code) + "\n--- stdout\n" + r.stdout + "--- stderr\n" + r.stderr
}

// mustGendex runs args as gendex does and fails the test unless it exits 0.
func mustGendex(t *testing.T, env *Env, args ...string) result {
	t.Helper()
	r := gendex(t, env, args...)
	if r.code != 0 {
		t.Fatalf("gendex %q: %s", args, r)
	}
	return r
}

// ingested returns a fresh index of the fixture root.
func ingested(t *testing.T) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "g.db")
	mustGendex(t, testEnv(nil), "--db", db, "ingest", root)
	return db
}

// golden compares got with testdata/cli/name (-update rewrites it).
func golden(t *testing.T, name string, got string) {
	t.Helper()
	goldenIn(t, filepath.Join("testdata", "cli", name), got)
}

// goldenIn compares got with the golden file at path (-update rewrites
// it).
func goldenIn(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run 'go test . -update' to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update after checking):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// lines counts the lines of the file at path.
func lines(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(data, []byte("\n"))
}

// Processes: simulators, writers, waiting.

// freeAddr returns a loopback address no one listens on now, for a
// server the test starts (or restarts) there later.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startSimProcess runs `gendex sim` with args on a free loopback port until
// the test ends, and returns its URL once it answers /health.
func startSimProcess(t *testing.T, bin string, args ...string) string {
	t.Helper()
	addr := freeAddr(t)
	startSimAt(t, bin, addr, args...)
	return "http://" + addr
}

// startSimAt starts `gendex sim` on addr, waits for it to answer /health
// and returns its process (killed when the test ends), for a test that
// kills it or starts another on the same address.
func startSimAt(t *testing.T, bin, addr string, args ...string) *gendexProc {
	t.Helper()
	sim := startGendex(t, bin, "", append([]string{"sim", "--listen", addr}, args...)...)
	waitFor(t, 30*time.Second, "gendex sim to answer /health", func() bool {
		resp, err := http.Get("http://" + addr + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return sim
}

// waitFor polls cond every 20 ms until it holds, or fails the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
	}
}

// runGendex runs the binary bin with args in dir (the test's working
// directory when dir is "") and $GENDEX_DB unset, so that the developer's
// own index is never used and the default index is dir's ./gendex.db; it
// returns the exit code, stdout and stderr, and fails the test only when
// the process could not run. It is startGendex waited for.
func runGendex(t *testing.T, bin, dir string, args ...string) (int, string, string) {
	t.Helper()
	p := startGendex(t, bin, dir, args...)
	code := p.Wait()
	return code, p.Stdout(), p.Stderr()
}

// runGendexCombined is runGendex in the test's working directory with
// stdout and stderr in one string, in the order written (as exec's
// CombinedOutput gives them).
func runGendexCombined(t *testing.T, bin string, args ...string) (int, string) {
	t.Helper()
	p := startGendexWith(t, gendexOpts{combined: true}, bin, args...)
	return p.Wait(), p.Stdout()
}

// runGendexWithin is runGendex, with startGendexWith's options, for a
// command that must end within d: one still running then is killed and
// fails the test with what it wrote.
func runGendexWithin(t *testing.T, d time.Duration, o gendexOpts, bin string, args ...string) (int, string, string) {
	t.Helper()
	p := startGendexWith(t, o, bin, args...)
	code := p.WaitWithin(t, d)
	return code, p.Stdout(), p.Stderr()
}

// gendexOpts say how startGendexWith runs the binary beyond its
// arguments; the zero value is startGendex's.
type gendexOpts struct {
	dir      string   // the working directory ("" is the test's)
	env      []string // KEY=VALUE added to the test's environment (after GENDEX_DB=, which they may set)
	stdin    string   // what the process reads on its standard input ("": nothing, /dev/null)
	combined bool     // stdout and stderr into one buffer, in the order written: Stdout and Stderr both return it
	stdout   *os.File // where the standard output goes instead of a buffer (Stdout is then "")
	converse bool     // the test writes to Stdin as it goes and reads StdoutLines (Stdout is then "")
}

// gendexProc is the binary running in the background, started by
// startGendex: the test reads what it wrote while it runs, signals it and
// waits for it; it is killed when the test ends if it still runs. Its
// methods are safe to call from any goroutine.
type gendexProc struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{} // closed once the process has exited
	stdin          io.WriteCloser
	lines          chan string
}

// startGendex starts the binary bin with args in dir, as runGendex runs
// it, and returns at once.
func startGendex(t *testing.T, bin, dir string, args ...string) *gendexProc {
	t.Helper()
	return startGendexWith(t, gendexOpts{dir: dir}, bin, args...)
}

// startGendexWith is startGendex with an environment, a standard input or
// one output buffer (gendexOpts).
func startGendexWith(t *testing.T, o gendexOpts, bin string, args ...string) *gendexProc {
	t.Helper()
	p := &gendexProc{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, done: make(chan struct{})}
	if o.combined {
		p.stderr = p.stdout
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Dir = o.dir
	p.cmd.Env = append(append(os.Environ(), "GENDEX_DB="), o.env...)
	if o.stdin != "" {
		p.cmd.Stdin = strings.NewReader(o.stdin)
	}
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if o.stdout != nil {
		p.cmd.Stdout = o.stdout
	}
	var out *os.File // the read end of a conversation's stdout
	if o.converse {
		var err error
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if out, p.cmd.Stdout, err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
	}
	p.cmd.WaitDelay = 10 * time.Second // a child left holding its output does not hang Wait
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("%s %q: %v", filepath.Base(bin), args, err)
	}
	if o.converse {
		p.cmd.Stdout.(*os.File).Close() // the child's now: its exit ends the lines
		p.lines = make(chan string, 64)
		go func() {
			defer close(p.lines)
			defer out.Close()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				p.lines <- sc.Text()
			}
		}()
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	t.Cleanup(p.Kill)
	return p
}

// Kill sends SIGKILL (unless the process has exited) and waits for the
// process to end.
func (p *gendexProc) Kill() {
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Interrupt sends SIGINT, as ^C does, and returns at once.
func (p *gendexProc) Interrupt() { p.Signal(os.Interrupt) }

// Signal sends sig unless the process has exited.
func (p *gendexProc) Signal(sig os.Signal) {
	select {
	case <-p.done:
	default:
		p.cmd.Process.Signal(sig)
	}
}

// Wait waits for the process to end and returns its exit code: -1 when a
// signal ended it.
func (p *gendexProc) Wait() int {
	<-p.done
	return p.cmd.ProcessState.ExitCode()
}

// WaitWithin is Wait for a process that must end within d: one still
// running then is killed and fails the test with what it wrote.
func (p *gendexProc) WaitWithin(t *testing.T, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.Kill()
		t.Fatalf("gendex %s did not end within %v\nstdout:\n%s\nstderr:\n%s", strings.Join(p.cmd.Args[1:], " "), d, p.Stdout(), p.Stderr())
	}
	return p.Wait()
}

// Done is closed once the process has exited.
func (p *gendexProc) Done() <-chan struct{} { return p.done }

// Pid is the process's id.
func (p *gendexProc) Pid() int { return p.cmd.Process.Pid }

// StderrLine waits for the first whole line of stderr that holds s and
// returns it (without its newline); false when the process ended without
// writing one.
func (p *gendexProc) StderrLine(s string) (string, bool) { return p.line(p.stderr, s) }

// StdoutLine is StderrLine for stdout.
func (p *gendexProc) StdoutLine(s string) (string, bool) { return p.line(p.stdout, s) }

// line waits for the first whole line of out that holds s.
func (p *gendexProc) line(out *lockedBuffer, s string) (string, bool) {
	for {
		exited := false
		select {
		case <-p.done:
			exited = true // and all it wrote is in the buffer
		default:
		}
		for _, l := range strings.SplitAfter(out.String(), "\n") {
			if strings.HasSuffix(l, "\n") && strings.Contains(l, s) {
				return strings.TrimSuffix(l, "\n"), true
			}
		}
		if exited {
			return "", false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stdin is the process's standard input, for a conversation
// (gendexOpts.converse); closing it is the end of the input.
func (p *gendexProc) Stdin() io.WriteCloser { return p.stdin }

// StdoutLines gives a conversation's (gendexOpts.converse) standard
// output line by line as it comes, and is closed when the process has
// exited and every line was taken.
func (p *gendexProc) StdoutLines() <-chan string { return p.lines }

// Stdout is what the process wrote on its standard output so far.
func (p *gendexProc) Stdout() string { return p.stdout.String() }

// Stderr is what the process wrote on its standard error so far.
func (p *gendexProc) Stderr() string { return p.stderr.String() }

// killWhileWriting starts the binary bin with args and, once writing
// reports that it writes, SIGKILLs it after delay (the random moment under
// test). It reports whether the kill landed, and the process: one that
// ended on its own first (or never wrote within 20 s and then ended) holds
// its exit code and what it wrote.
func killWhileWriting(t *testing.T, bin string, args []string, writing func() bool, delay time.Duration) (killed bool, p *gendexProc) {
	t.Helper()
	p = startGendex(t, bin, "", args...)
	for deadline := time.Now().Add(20 * time.Second); !writing() && time.Now().Before(deadline); {
		select {
		case <-p.Done():
			return false, p
		case <-time.After(5 * time.Millisecond):
		}
	}
	select {
	case <-time.After(delay):
		p.Kill()
		return p.Wait() != 0, p
	case <-p.Done():
		return false, p
	}
}

// mustRunGendex runs the binary bin with args, as runGendex does in the
// test's working directory, and fails the test with what it wrote unless
// it exits 0; it returns its stdout and then its stderr.
func mustRunGendex(t *testing.T, bin string, args ...string) string {
	t.Helper()
	code, stdout, stderr := runGendex(t, bin, "", args...)
	if code != 0 {
		t.Fatalf("gendex %q: exit %d\n%s%s", args, code, stdout, stderr)
	}
	return stdout + stderr
}

// writer is a running `gendex ingest --follow` or `gendex gen`: the
// process (a gendexProc) that serves the socket of the index db.
type writer struct {
	*gendexProc
	db string
}

// lockedBuffer is a strings.Builder a process writes to while the test
// reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startWriter starts gendex --db db ARGS with env added to the test's,
// and waits until it answers on its socket. The writer is interrupted at
// the end of the test if it still runs.
func startWriter(t *testing.T, db string, env []string, args ...string) *writer {
	t.Helper()
	w := &writer{startGendexWith(t, gendexOpts{env: env}, gendexBinary(t), append([]string{"--db", db}, args...)...), db}
	t.Cleanup(func() { // before startGendex's kill
		w.Interrupt()
		select {
		case <-w.Done():
		case <-time.After(20 * time.Second):
		}
	})
	waitFor(t, 60*time.Second, "the writer never answered on its socket", func() bool {
		select {
		case <-w.Done():
			t.Fatalf("the writer exited: exit %d\n%s", w.Wait(), w.Stderr())
		default:
		}
		_, err := w.metrics()
		return err == nil
	})
	return w
}

// socketClient is an HTTP client of the writer's socket.
func (w *writer) socketClient() *http.Client {
	sock := w.socket()
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", sock)
	}}}
}

// socket is where the writer serves. (A test that gives the writer
// another XDG_RUNTIME_DIR sets it with t.Setenv too, so that this agrees.)
func (w *writer) socket() string { return live.SocketPath(w.db) }

// metrics reads the writer's /metrics over its socket, on a connection of
// its own that it closes.
func (w *writer) metrics() (string, error) {
	hc := w.socketClient()
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://gendex/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("/metrics: %s", resp.Status)
	}
	return string(b), err
}

// A work folder: placeRun.

// placeRun is a folder with a copy of the demo prompts, an index, and the
// binary, for whole-binary runs.
type placeRun struct {
	t   *testing.T
	bin string
	dir string
}

// newPlaceRun makes a placeRun in a fresh folder (its path as gendex
// stores it) with a copy of testdata/demo's prompts under demo/; it skips
// the test under -short.
func newPlaceRun(t *testing.T) *placeRun {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	dir, err := filepath.EvalSymlinks(t.TempDir()) // the spelling gendex stores
	if err != nil {
		t.Fatal(err)
	}
	p := &placeRun{t: t, bin: gendexBinary(t), dir: dir}
	copyPrompts(t, filepath.Join("testdata", "demo"), filepath.Join(p.dir, "demo"))
	return p
}

// run runs the binary in p.dir (the default ./gendex.db is there).
func (p *placeRun) run(args ...string) (code int, stderr string) {
	p.t.Helper()
	code, _, stderr = runGendex(p.t, p.bin, p.dir, args...)
	return code, stderr
}

// mustRun is run that fails the test unless the command exits 0; it
// returns the stderr.
func (p *placeRun) mustRun(args ...string) string {
	p.t.Helper()
	code, errOut := p.run(args...)
	if code != 0 {
		p.t.Fatalf("gendex %q: exit %d\n%s", args, code, errOut)
	}
	return errOut
}

// progress returns query progress as JSON rows, by dataset.
func (p *placeRun) progress(db string) map[string]map[string]any {
	p.t.Helper()
	code, out, errOut := runGendex(p.t, p.bin, p.dir, "--db", db, "query", "progress", "--format", "json")
	if code != 0 {
		p.t.Fatalf("query progress: exit %d\n%s", code, errOut)
	}
	var rows []map[string]any
	decodeJSON(p.t, out, &rows)
	by := map[string]map[string]any{}
	for _, r := range rows {
		by[r["dataset"].(string)] = r
	}
	return by
}

// copyPrompts copies the prompts*.jsonl files under from to to (a clone
// where README's real run wrote answers beside the demo's prompts holds
// more).
func copyPrompts(t *testing.T, from, to string) {
	t.Helper()
	copyFiles(t, from, to, func(name string) bool { return strings.HasPrefix(name, "prompts") })
}

// copyTree copies every file under from to to.
func copyTree(t *testing.T, from, to string) {
	t.Helper()
	copyFiles(t, from, to, func(string) bool { return true })
}

// copyFiles copies the files under from whose names keep takes to the
// same places under to.
func copyFiles(t *testing.T, from, to string, keep func(name string) bool) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if !keep(d.Name()) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Questions and files.

// queryJSON runs the binary bin's `gendex --db DB query ARGS --format json`
// (runGendex) and decodes its rows; a question that fails returns an
// error with its exit code and stderr.
func queryJSON[T any](t *testing.T, bin, db string, args ...string) ([]T, error) {
	t.Helper()
	code, out, stderr := runGendex(t, bin, "", append([]string{"--db", db, "query"}, append(args, "--format", "json")...)...)
	if code != 0 {
		return nil, fmt.Errorf("exit %d\n%s", code, stderr)
	}
	var rows []T
	if err := json.Unmarshal([]byte(out), &rows); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return rows, nil
}

// promptsRoot writes ROOT/<dataset>/prompts.jsonl with n prompts.
func promptsRoot(t *testing.T, dataset string, n int) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "prompts")
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":"p%07d","text":"prompt %d"}`+"\n", i, i)
	}
	writePrompts(t, filepath.Join(root, dataset), b.String())
	return root
}

// writeTestFile writes s to path, making its folder.
func writeTestFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// shScript writes a shell script at path and returns the command line that
// runs it: "sh PATH". Tests run the scripts they write through sh, which
// reads them, and never exec them: a child that a parallel test forks
// while the script is open for writing keeps it open so until its own
// exec, and the kernel refuses to exec a file open for writing (ETXTBSY,
// golang/go#22315); and the script's mode, which the umask decides, does
// not matter (issue 46: a pager.sh written 0755 once came out 0600).
func shScript(t *testing.T, path, script string) string {
	t.Helper()
	writeTestFile(t, path, script)
	return "sh " + filepath.Clean(path)
}

// mustQueryJSON is queryJSON that fails the test, with the command's
// stderr, when the question fails.
func mustQueryJSON[T any](t *testing.T, bin, db string, args ...string) []T {
	t.Helper()
	rows, err := queryJSON[T](t, bin, db, args...)
	if err != nil {
		t.Fatalf("query %s: %v", strings.Join(args, " "), err)
	}
	return rows
}

// decodeJSON decodes a command's JSON output into v, failing the test with
// the output when it is not JSON.
func decodeJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// writePrompts writes text (prompt lines) as dir/prompts.jsonl, making dir.
func writePrompts(t *testing.T, dir, text string) {
	t.Helper()
	writeTestFile(t, filepath.Join(dir, "prompts.jsonl"), text)
}

// writeAnswered writes dir/D with prompts p1..p3 and their answers in
// raw_responses.jsonl, and returns that file's path.
func writeAnswered(t *testing.T, dir string) string {
	t.Helper()
	d := filepath.Join(dir, "D")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	writePrompts(t, d, `{"id":"p1","text":"a"}`+"\n"+`{"id":"p2","text":"b"}`+"\n"+`{"id":"p3","text":"c"}`+"\n")
	raw := filepath.Join(d, "raw_responses.jsonl")
	os.WriteFile(raw, []byte(`{"id":"p1","text":"x","completion_tokens":3}`+"\n"+`{"id":"p2","text":"y","completion_tokens":4}`+"\n"+`{"id":"p3","text":"z","completion_tokens":5}`+"\n"), 0o644)
	return raw
}
