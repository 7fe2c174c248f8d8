package main

import (
	"bufio"
	"errors"
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
)

// TestGenListenUnderACrowd: 1,500 idle connections to gen's --listen port
// (anyone on the node can open them, no token needed), held while gen
// runs under an open-file limit of 1,024, cost gen none of the files it
// needs for its own work: every prompt is answered exactly once and gen
// exits 0. (gen holds a few of them at a time; the rest wait in the
// kernel's queue.) The prompts are in several files, so that gen opens
// files while the crowd holds its connections.
func TestGenListenUnderACrowd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const crowd, files, perFile = 1500, 6, 20
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < crowd+500 {
		t.Skipf("this test process may open %d files, too few to hold %d connections", lim.Cur, crowd)
	}
	// gen takes a few of the crowd; the rest wait in the kernel's queue,
	// as long as net.core.somaxconn.
	if b, err := os.ReadFile("/proc/sys/net/core/somaxconn"); err == nil {
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n < crowd {
			t.Skipf("net.core.somaxconn is %d: the kernel queues fewer than %d connections", n, crowd)
		}
	}
	bin := gendexBinary(t)
	dir := t.TempDir()
	for f := range files {
		var b strings.Builder
		for i := range perFile {
			fmt.Fprintf(&b, `{"id":"c%d-%02d","text":"prompt %d of file %d"}`+"\n", f, i, i, f)
		}
		writeTestFile(t, filepath.Join(dir, "prompts", "crowd", fmt.Sprintf("prompts-%d.jsonl", f)), b.String())
	}
	// About a second an answer: the run lasts while the crowd comes.
	sim := startSimProcess(t, bin, "--decode-tps", "40")
	db := filepath.Join(dir, "g.db")
	limited, args := withOpenFiles(1024, bin, "--db", db, "gen", "--server", sim, "--concurrency", "8", "--max-new-tokens", "40",
		"--listen", "127.0.0.1:0", "--out", filepath.Join(dir, "out"), filepath.Join(dir, "prompts"))
	gen := startGendexWith(t, gendexOpts{env: []string{"GENDEX_TOKEN="}}, limited, args...)
	line, ok := gen.StderrLine("Prometheus metrics on http://")
	if !ok {
		t.Fatalf("gen never said where it listens: exit %d\n%s", gen.Wait(), gen.Stderr())
	}
	_, rest, _ := strings.Cut(line, "Prometheus metrics on http://")
	addr, _, _ := strings.Cut(rest, "/metrics")

	held := holdConnections(t, addr, crowd)
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	if len(held) < crowd {
		t.Fatalf("only %d of %d connections to gen's --listen opened", len(held), crowd)
	}
	if code := gen.WaitWithin(t, 3*time.Minute); code != 0 {
		t.Fatalf("gen under a crowd of %d idle connections: exit %d\n%s", crowd, code, gen.Stderr())
	}

	want := files * perFile
	times := map[string]int{}
	for _, id := range answerIDs(t, filepath.Join(dir, "out", "crowd")) {
		times[id]++
	}
	if len(times) != want {
		t.Errorf("%d prompts answered, want %d", len(times), want)
	}
	for id, n := range times {
		if n != 1 {
			t.Errorf("%s answered %d times", id, n)
		}
	}
	rows := mustQueryJSON[map[string]any](t, bin, db, "progress")
	if len(rows) != 1 || rows[0]["raw"] != float64(want) || rows[0]["missing_raw"] != float64(0) || rows[0]["errors"] != float64(0) {
		t.Errorf("query progress: %v, want %d answers, none missing or failed", rows, want)
	}
}

// withOpenFiles returns the command line that runs bin with args under an
// open-file limit of n, soft and hard: through prlimit, else a shell's
// ulimit.
func withOpenFiles(n int, bin string, args ...string) (string, []string) {
	if p, err := exec.LookPath("prlimit"); err == nil {
		return p, append([]string{"--nofile=" + strconv.Itoa(n) + ":" + strconv.Itoa(n), "--", bin}, args...)
	}
	return "sh", append([]string{"-c", `ulimit -n ` + strconv.Itoa(n) + ` && exec "$@"`, "sh", bin}, args...)
}

// holdConnections opens n TCP connections to addr that send nothing, and
// returns those that opened.
func holdConnections(t *testing.T, addr string, n int) []net.Conn {
	t.Helper()
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
		first error
	)
	for w := range 50 {
		wg.Go(func() {
			for i := w; i < n; i += 50 {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					conns = append(conns, c)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if first != nil {
		t.Logf("a connection to %s failed: %v", addr, first)
	}
	return conns
}

// TestWebLetsGoOfIdleAndRefused: gendex web closes a connection that
// sends nothing, and one idle after its answer (the test hook
// $GENDEX_WEB_IDLE shortens both timeouts from 10 s and 60 s), and says
// it closes one it answered 401 or 421; a page it serves keeps its
// connection for the next request.
func TestWebLetsGoOfIdleAndRefused(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	p.mustRun("ingest", "demo")
	// 2 s, not less: each request is written right after its dial, and
	// a test process descheduled that long under load (CI's -race, every
	// package at once) saw its 421 request cut as one that sent nothing.
	base, printed := startWeb(t, p, []string{"GENDEX_WEB_IDLE=2s"})
	token := tokenOf(t, base, printed)
	addr := strings.TrimSuffix(strings.TrimPrefix(base, "http://"), "/")
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	closed := func(c net.Conn, br *bufio.Reader, what string) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(20 * time.Second)) // a guard, not a measure
		if n, err := br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Errorf("%s: read %d bytes, %v; want the connection closed", what, n, err)
		}
	}
	c, br := dial()
	closed(c, br, "a connection that sends nothing")

	for _, r := range []struct {
		host, auth string
		want       int
	}{
		{addr, "Bearer " + token, 200},
		{addr, "", 401},
		{rebound, "Bearer " + token, 421},
	} {
		c, br := dial()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		req := fmt.Sprintf("GET / HTTP/1.1\r\nHost: %s\r\n", r.host)
		if r.auth != "" {
			req += "Authorization: " + r.auth + "\r\n"
		}
		io.WriteString(c, req+"\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET / (Host %s, %q): %v", r.host, r.auth, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != r.want || resp.Close != (r.want != 200) {
			t.Errorf("GET / (Host %s, %q): %s, closing the connection: %v; want %d, closing it: %v",
				r.host, r.auth, resp.Status, resp.Close, r.want, r.want != 200)
		}
		closed(c, br, fmt.Sprintf("a connection after its %d", r.want))
	}
}
