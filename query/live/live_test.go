package live_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"gendex/ingest"
	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/format"
	"gendex/query/live"
	"gendex/store"
)

// fixtureRoot is the query package's fixture (described, and guarded, by
// its TestFixtureIsWhatTheTestsAssume).
var fixtureRoot = filepath.Join("..", "..", "testdata", "query", "root")

// TestRemoteAnswersAsLocal: every question asked over the writer's socket
// gets the answer the index itself gives.
func TestRemoteAnswersAsLocal(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	// A server in rotation and one waited for: up is a boolean.
	err := db.Update(func(tx *store.Tx) error {
		at := time.Now().Add(-time.Minute).UnixMilli()
		for name, up := range map[string]bool{"http://a": true, "http://b": false} {
			if err := tx.PutServerSample(name, &store.ServerSample{Time: at, Up: up, Run: at}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "g.db.sock")
	ln, err := live.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi.Mode(), err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- (&live.Server{Src: db}).Serve(ctx, ln) }()
	remote, err := live.Dial(t.Context(), sock)
	if err != nil {
		t.Fatal(err)
	}
	defer remote.Close()
	now := time.Now()
	for _, args := range [][]string{
		{"progress"}, {"tokens"}, {"finish"}, {"errors"}, {"datasets"},
		{"throughput", "--window", "1h"}, {"missing", "alpha"}, {"missing", "alpha", "--stage", "tokenized"},
		{"show", "alpha", "B2_opencodeinstruct-0000017"}, {"progress", "alpha", "beta"},
		{"server", "--window", "1h"},
	} {
		q, err := query.Parse(args)
		if err != nil {
			t.Fatal(err)
		}
		var local, viaSocket query.Collect
		if err := (query.Local{Src: db}).Ask(t.Context(), q, now, &local); err != nil {
			t.Fatal(err)
		}
		if err := remote.Ask(t.Context(), q, now, &viaSocket); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if args[0] == "throughput" { // the server's clock is its own
			local.Result.Rows, viaSocket.Result.Rows, local.Result.Total, viaSocket.Result.Total = nil, nil, nil, nil
		}
		for _, f := range []query.Format{query.JSON, query.Table, query.TSV} {
			var a, b strings.Builder
			format.Write(&a, &local.Result, format.Options{Format: f})
			format.Write(&b, &viaSocket.Result, format.Options{Format: f})
			if a.String() != b.String() || a.Len() == 0 {
				t.Errorf("%v as %v:\n local\n%s\n socket\n%s", args, f, a.String(), b.String())
			}
		}
	}
	// Errors come back as errors; usage errors as usage errors, and what
	// the index does not hold as store.ErrNotFound.
	q, _ := query.Parse([]string{"progress", "nope"})
	if err := remote.Ask(t.Context(), q, now, &query.Collect{}); err == nil || errors.Is(err, query.ErrUsage) || !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown dataset over the socket: %v", err)
	}
	// A second server on the same socket is refused while the first runs.
	if _, err := live.Listen(sock); err == nil {
		t.Error("a second Listen on a served socket succeeded")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Errorf("socket left behind after Serve: %v", err)
	}
	if _, err := live.Dial(t.Context(), sock); !errors.Is(err, live.ErrNoWriter) {
		t.Errorf("Dial after the writer left: %v", err)
	}
}

// TestListenReplacesStaleSocket: a socket file left by a process that died
// is replaced.
func TestListenReplacesStaleSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "g.db.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close() // the file stays; nobody answers
	if _, err := os.Stat(sock); err != nil {
		t.Fatal(err)
	}
	if _, err := live.Dial(t.Context(), sock); !errors.Is(err, live.ErrNoWriter) {
		t.Errorf("Dial on a stale socket: %v", err)
	}
	ln2, err := live.Listen(sock)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ln2.Close()
}

// bigIndex indexes one dataset "big" of n prompts and no responses, so that
// `missing big` answers with n ids.
func bigIndex(t *testing.T, n int) *store.DB {
	t.Helper()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "big"), 0o755)
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":"prompt-%07d","text":"p"}`+"\n", i)
	}
	os.WriteFile(filepath.Join(root, "big", "prompts.jsonl"), []byte(b.String()), 0o644)
	db, _ := ingesttest.Index(t, root)
	return db
}

// views counts the read transactions open on a Source, and those done.
type views struct {
	src        query.Source
	open, done atomic.Int32
}

func (v *views) View(fn func(*store.View) error) error {
	v.open.Add(1)
	defer v.done.Add(1)
	defer v.open.Add(-1)
	return v.src.View(fn)
}

// serve serves srv on a fresh socket until the test ends; stop stops it
// and waits for Serve to return (the test fails if it has not within a
// minute).
func serve(t *testing.T, srv *live.Server) (sock string, stop func()) {
	t.Helper()
	sock = filepath.Join(t.TempDir(), "g.db.sock")
	ln, err := live.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, ln); close(done) }()
	stop = func() {
		cancel()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Error("Serve did not return within a minute of its stop")
		}
	}
	t.Cleanup(stop)
	return sock, stop
}

// until polls cond every 10 ms until it holds, or fails the test after d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
	}
}

// stalledReader asks for path on sock and never reads the answer. It
// returns the connection and a function that reports how many bytes of the
// answer wait unread in its receive buffer.
func stalledReader(t *testing.T, sock, path string) (*net.UnixConn, func() int) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	uc := c.(*net.UnixConn)
	uc.SetReadBuffer(4096)
	fmt.Fprintf(uc, "GET %s HTTP/1.1\r\nHost: gendex\r\n\r\n", path)
	raw, _ := uc.SyscallConn()
	queued := func() int {
		n := 0
		var v int32
		raw.Control(func(fd uintptr) {
			syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&v)))
		})
		n = int(v)
		return n
	}
	return uc, queued
}

// TestStalledReaderHoldsNoTransaction: a reader that asks for a long answer
// and stops reading holds no read transaction in the writer (bbolt's remap,
// and Close, wait for every open one), its connection is cut after the
// stall timeout, and Serve returns promptly on exit while it is stalled.
func TestStalledReaderHoldsNoTransaction(t *testing.T) {
	db := bigIndex(t, 60_000) // ~2 MB of answer: far more than socket buffers hold
	src := &views{src: db}
	sock, stop := serve(t, &live.Server{Src: src, StallTimeout: time.Hour})
	_, queued := stalledReader(t, sock, "/v1/query?arg=missing&arg=big")
	until(t, 10*time.Second, "the answer never started to arrive", func() bool { return queued() > 0 })
	until(t, 10*time.Second, fmt.Sprintf("a stalled reader holds %d read transactions open", src.open.Load()),
		func() bool { return src.open.Load() == 0 && src.done.Load() >= 1 })
	// The writer's commits go on while the reader is stalled.
	if err := db.Update(func(*store.Tx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	// The stall timeout is an hour: Serve must return long before the
	// reader is cut off, while it still stalls.
	stop()
}

// TestStalledReaderDoesNotBlockRemap: while a reader that stopped reading
// waits on a long answer, the writer grows the index far past its mapped
// size. bbolt's remap takes the lock every open read transaction holds, so
// a writer that streamed answers from inside a transaction would wait for
// the reader here until the stall timeout (an hour in this test).
func TestStalledReaderDoesNotBlockRemap(t *testing.T) {
	root := t.TempDir()
	write := func(ds string, n int) {
		os.MkdirAll(filepath.Join(root, ds), 0o755)
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, `{"id":"%s-%07d","text":"p"}`+"\n", ds, i)
		}
		os.WriteFile(filepath.Join(root, ds, "prompts.jsonl"), []byte(b.String()), 0o644)
	}
	write("big", 60_000)
	path := filepath.Join(t.TempDir(), "index.db")
	db, err := store.Open(path, store.Options{InitialMmapSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ix := &ingest.Indexer{DB: db}
	indexAll := func() error {
		srcs, err := ingest.Discover(root, "", nil)
		if err != nil {
			return err
		}
		for _, src := range srcs {
			if _, err := ix.IndexFile(context.Background(), src); err != nil {
				return err
			}
		}
		return nil
	}
	if err := indexAll(); err != nil {
		t.Fatal(err)
	}
	sock, _ := serve(t, &live.Server{Src: db, StallTimeout: time.Hour})
	_, queued := stalledReader(t, sock, "/v1/query?arg=missing&arg=big")
	until(t, 10*time.Second, "the answer never started to arrive", func() bool { return queued() > 0 })

	size := func() int64 { fi, _ := os.Stat(path); return fi.Size() }
	before := size()
	write("more", 400_000)
	done := make(chan error, 1)
	go func() { done <- indexAll() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the writer's commits waited on a stalled reader (index %d bytes, was %d)", size(), before)
	}
	// The map is at most twice the file's size at open; four times that
	// size means bbolt remapped at least once while the reader stalled.
	if after := size(); after < 4*before {
		t.Errorf("the index grew from %d to %d bytes only: no remap was exercised", before, after)
	}
}

// TestStallTimeoutCutsOffReader: a reader that reads nothing for the stall
// timeout loses its connection (the writer closes its end).
func TestStallTimeoutCutsOffReader(t *testing.T) {
	db := bigIndex(t, 60_000)
	fds := func() int { e, _ := os.ReadDir("/proc/self/fd"); return len(e) }
	sock, _ := serve(t, &live.Server{Src: db, StallTimeout: 200 * time.Millisecond})
	before := fds()
	c, queued := stalledReader(t, sock, "/v1/query?arg=missing&arg=big")
	until(t, 10*time.Second, "the answer never started to arrive", func() bool { return queued() > 0 })
	// Our end stays open; the writer's end must close.
	until(t, 10*time.Second, "the writer kept a stalled reader's connection open", func() bool { return fds() <= before+1 })
	body, _ := io.ReadAll(c)
	if strings.Contains(string(body), `{"end":true}`) {
		t.Error("the cut-off answer is whole")
	}
}

// TestRemoteReusesOneConnection: one Remote asks many questions over one
// connection, and Close closes it.
func TestRemoteReusesOneConnection(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	sock := filepath.Join(t.TempDir(), "g.db.sock")
	ln, err := live.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingListener{Listener: ln}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go (&live.Server{Src: db}).Serve(ctx, cl)
	r := live.NewRemote(sock)
	q, _ := query.Parse([]string{"progress"})
	for range 500 {
		if err := r.Ask(t.Context(), q, time.Now(), &query.Collect{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := cl.n.Load(); n != 1 {
		t.Errorf("500 questions opened %d connections, want 1", n)
	}
	r.Close()
	until(t, 5*time.Second, "Close left the connection open", func() bool { return cl.open() == 0 })
}

// countingListener counts the connections it accepted and those closed.
type countingListener struct {
	net.Listener
	n      atomic.Int32
	closed atomic.Int32
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
		c = &trackedConn{Conn: c, l: l}
	}
	return c, err
}

func (l *countingListener) open() int32 { return l.n.Load() - l.closed.Load() }

type trackedConn struct {
	net.Conn
	l    *countingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.l.closed.Add(1) })
	return c.Conn.Close()
}

// TestNoWriter: with no socket, or a socket nobody serves, Ask says
// ErrNoWriter (so the caller opens the file instead).
func TestNoWriter(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "g.db.sock")
	q, _ := query.Parse([]string{"progress"})
	r := live.NewRemote(sock)
	defer r.Close()
	if err := r.Ask(t.Context(), q, time.Now(), &query.Collect{}); !errors.Is(err, live.ErrNoWriter) {
		t.Errorf("no socket: %v", err)
	}
	// A writer that exits as it is asked: it takes the connection and
	// closes it unanswered. The caller asks the index then.
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := r.Ask(t.Context(), q, time.Now(), &query.Collect{}); !errors.Is(err, live.ErrNoWriter) {
		t.Errorf("a writer that closed the connection unanswered: %v, want ErrNoWriter", err)
	}
}

// TestSocketPathFits: a database path too long for a socket address gets
// a short socket in the runtime dir, the same for every process that asks
// (by any path to the same file), and it serves.
func TestSocketPathFits(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dir := t.TempDir()
	long := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 60))
	os.MkdirAll(long, 0o755)
	dbPath := filepath.Join(long, "g.db")
	if len(dbPath+".sock") <= 108 {
		t.Fatalf("test path too short: %d", len(dbPath))
	}
	db, _ := ingesttest.Index(t, fixtureRoot)
	sock := live.SocketPath(dbPath)
	if len(sock) > 107 || filepath.Dir(sock) != live.RuntimeDir() {
		t.Fatalf("SocketPath(%s) = %s", dbPath, sock)
	}
	// The same file by a relative path and through a symlink.
	os.Symlink(long, filepath.Join(dir, "l"))
	t.Chdir(filepath.Join(long, ".."))
	for _, p := range []string{filepath.Join(filepath.Base(long), "g.db"), filepath.Join(dir, "l", "g.db")} {
		if got := live.SocketPath(p); got != sock {
			t.Errorf("SocketPath(%s) = %s, want %s", p, got, sock)
		}
	}
	ln, err := live.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(live.RuntimeDir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("runtime dir: %v %v", fi.Mode(), err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go (&live.Server{Src: db}).Serve(ctx, ln)
	r, err := live.Dial(t.Context(), live.SocketPath(dbPath))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	q, _ := query.Parse([]string{"progress"})
	if err := r.Ask(t.Context(), q, time.Now(), &query.Collect{}); err != nil {
		t.Fatal(err)
	}
	// A short path keeps its socket beside the database.
	if got, want := live.SocketPath(filepath.Join(dir, "g.db")), filepath.Join(dir, "g.db.sock"); got != want {
		t.Errorf("SocketPath = %s, want %s", got, want)
	}
}

// TestUnsafeSocketRefused: a socket of another user is neither connected
// to nor replaced; a runtime dir open to others, or of another user, is
// refused; a database folder writable by everyone, sticky or not, does
// not hold the socket.
func TestUnsafeSocketRefused(t *testing.T) {
	// Only root may give a file to another user (chown), and the
	// guarantee is about another user's socket and folders. CI runs as
	// root (.ci/run installs its packages with apt-get), so the test runs
	// there on every push.
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give the socket and folders to another user (uid 4242); CI runs it as root")
	}
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	dir := t.TempDir()
	sock := filepath.Join(dir, "g.db.sock")
	planted, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer planted.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := planted.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	if err := os.Lchown(sock, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if _, err := live.Listen(sock); !errors.Is(err, live.ErrUnsafeSocket) || !strings.Contains(err.Error(), "uid 4242") {
		t.Errorf("Listen over another user's socket: %v", err)
	}
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("Listen removed another user's socket: %v", err)
	}
	q, _ := query.Parse([]string{"progress"})
	r := live.NewRemote(sock)
	defer r.Close()
	if err := r.Ask(t.Context(), q, time.Now(), &query.Collect{}); !errors.Is(err, live.ErrUnsafeSocket) {
		t.Errorf("Ask on another user's socket: %v", err)
	}
	if _, err := live.Dial(t.Context(), sock); !errors.Is(err, live.ErrUnsafeSocket) {
		t.Errorf("Dial on another user's socket: %v", err)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("a reader connected %d times to another user's socket", n)
	}

	// The runtime dir: open to others, then another user's.
	rd := live.RuntimeDir()
	longDB := filepath.Join(dir, strings.Repeat("x", 120), "g.db")
	rsock := live.SocketPath(longDB)
	if filepath.Dir(rsock) != rd {
		t.Fatalf("SocketPath(%s) = %s, not in %s", longDB, rsock, rd)
	}
	os.Mkdir(rd, 0o700)
	os.Chmod(rd, 0o777)
	if _, err := live.Listen(rsock); !errors.Is(err, live.ErrUnsafeSocket) || !strings.Contains(err.Error(), "chmod 700") {
		t.Errorf("Listen in a runtime dir of mode 0777: %v", err)
	}
	os.Chmod(rd, 0o700)
	os.Chown(rd, 4242, 4242)
	if _, err := live.Listen(rsock); !errors.Is(err, live.ErrUnsafeSocket) || !strings.Contains(err.Error(), "uid 4242") {
		t.Errorf("Listen in another user's runtime dir: %v", err)
	}
	if err := live.NewRemote(rsock).Ask(t.Context(), q, time.Now(), &query.Collect{}); !errors.Is(err, live.ErrUnsafeSocket) {
		t.Errorf("Ask in another user's runtime dir: %v", err)
	}
	os.Chown(rd, 0, 0)
	ln, err := live.Listen(rsock)
	if err != nil {
		t.Fatalf("Listen in a sound runtime dir: %v", err)
	}
	ln.Close()

	// A database folder anyone can write to keeps no socket, even a sticky
	// one (/tmp), where another user could make <db>.sock first. Mode 0757
	// is writable by everyone but not by the group, so that the rule for
	// everyone, not the group's, is what refuses it.
	open := filepath.Join(dir, "open")
	os.Mkdir(open, 0o777)
	for _, mode := range []os.FileMode{0o777, 0o777 | os.ModeSticky, 0o757, 0o757 | os.ModeSticky} {
		if err := os.Chmod(open, mode); err != nil {
			t.Fatal(err)
		}
		if got := live.SocketPath(filepath.Join(open, "g.db")); filepath.Dir(got) != rd {
			t.Errorf("socket for a db in a folder of mode %v: %s", mode, got)
		}
		if ln, err := live.Listen(filepath.Join(open, "g.db.sock")); !errors.Is(err, live.ErrUnsafeSocket) {
			t.Errorf("Listen in a folder of mode %v: %v; want ErrUnsafeSocket", mode, err)
			if ln != nil {
				ln.Close()
			}
		}
	}
}

// TestPublicHandler: a TCP port serves /metrics only unless queries are
// asked for, and with a token wants it on every request.
func TestPublicHandler(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	srv := &live.Server{Src: db}
	get := func(h http.Handler, path, auth string) int {
		hs := httptest.NewServer(h)
		defer hs.Close()
		req, _ := http.NewRequest(http.MethodGet, hs.URL+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		o          live.PublicOptions
		path, auth string
		want       int
	}{
		{live.PublicOptions{}, "/metrics", "", 200},
		{live.PublicOptions{}, "/v1/query?arg=progress", "", 404},
		{live.PublicOptions{Queries: true}, "/v1/query?arg=progress", "", 200},
		{live.PublicOptions{Token: "s3cret"}, "/metrics", "", 401},
		{live.PublicOptions{Token: "s3cret"}, "/metrics", "Bearer wrong", 401},
		{live.PublicOptions{Token: "s3cret"}, "/metrics", "s3cret", 401},
		{live.PublicOptions{Token: "s3cret"}, "/metrics", "Bearer s3cret", 200},
		{live.PublicOptions{Token: "s3cret"}, "/v1/query?arg=progress", "Bearer s3cret", 404},
		{live.PublicOptions{Token: "s3cret", Queries: true}, "/v1/query?arg=progress", "Bearer s3cret", 200},
	} {
		if got := get(srv.PublicHandler(c.o), c.path, c.auth); got != c.want {
			t.Errorf("%+v GET %s (Authorization %q): %d, want %d", c.o, c.path, c.auth, got, c.want)
		}
	}
}
