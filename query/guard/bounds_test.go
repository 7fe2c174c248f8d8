package guard

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// waitClosed fails the test unless the server closes c within d (a
// guard, not a measure): what c reads then is EOF.
func waitClosed(t *testing.T, c net.Conn, d time.Duration, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: read %d bytes, %v; want the connection closed", what, n, err)
	}
}

// TestLimitHoldsAtMostN: a listener limited to 3 hands out 3 of 5
// connections made; a fourth only once one of the 3 is closed (twice:
// its slot comes back once); closing the listener ends an Accept that
// waits.
func TestLimitHoldsAtMostN(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Limit(raw, 3)
	accepted := make(chan net.Conn)
	ended := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				ended <- err
				return
			}
			accepted <- c
		}
	}()
	for range 5 {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	var held []net.Conn
	for range 3 {
		select {
		case c := <-accepted:
			held = append(held, c)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d connections accepted of 3", len(held))
		}
	}
	select {
	case <-accepted:
		t.Fatal("a fourth connection accepted while 3 are held")
	case <-time.After(200 * time.Millisecond):
	}
	held[0].Close()
	held[0].Close() // a second Close frees nothing more
	select {
	case c := <-accepted:
		held[0] = c
	case <-time.After(10 * time.Second):
		t.Fatal("no connection accepted after one of the 3 closed")
	}
	select {
	case <-accepted:
		t.Fatal("two connections accepted for one closed (twice)")
	case <-time.After(200 * time.Millisecond):
	}
	ln.Close()
	select {
	case err := <-ended:
		if !errors.Is(err, net.ErrClosed) {
			t.Errorf("Accept after Close: %v, want net.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Accept still waits after Close")
	}
	for _, c := range held {
		c.Close()
	}
}

// TestConnCap: the listeners share what the open-file limit leaves past
// the reserve, two a connection, at most MaxConns each and at least
// minConns; below
// MaxConns a line (within 80 columns) says so.
func TestConnCap(t *testing.T) {
	for _, c := range []struct {
		limit              uint64
		listeners, reserve int
		want               int
		note               bool
	}{
		{1 << 20, 2, 640, MaxConns, false},
		{1024, 2, 256 + 3*128, MaxConns, false}, // gen at --concurrency 128 under 1,024 files: 96 each are free
		{1024, 1, 256, MaxConns, false},
		{600, 2, 256, MaxConns, false},
		{400, 2, 256, 36, true},
		{256, 2, 256 + 3*128, minConns, true}, // a limit below the reserve: a few still
		{1 << 62, 0, 0, MaxConns, false},
	} {
		n, note := connCap(c.limit, c.listeners, c.reserve)
		if n != c.want || (note != "") != c.note {
			t.Errorf("connCap(%d, %d, %d) = %d, %q; want %d (a note: %v)", c.limit, c.listeners, c.reserve, n, note, c.want, c.note)
		}
		if len(note) > 68 || note != "" && !strings.Contains(note, fmt.Sprint(c.limit)) {
			t.Errorf("connCap(%d, ...)'s note: %q (%d columns), want the limit within 68 columns (80 after \"gendex web: \")", c.limit, note, len(note))
		}
	}
	if _, note := connCap(999999, 8, 999990); len(note) > 68 {
		t.Errorf("note of %d columns: %q", len(note), note)
	}
}

// serveBounded serves h on a loopback port with NewServer(h, to) and
// returns its address.
func serveBounded(t *testing.T, h http.Handler, to Timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(h, to)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// get sends GET path on c and reads the response.
func get(t *testing.T, c net.Conn, br *bufio.Reader, path string) *http.Response {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestNewServerClosesRefused: after a 401 or a 421 the server closes the
// connection; after a 200 it keeps it for the next request.
func TestNewServerClosesRefused(t *testing.T) {
	addr := serveBounded(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/401":
			http.Error(w, "no token", http.StatusUnauthorized)
		case "/421":
			Refuse(w, r)
		default:
			io.WriteString(w, "ok\n")
		}
	}), Timeouts{})
	for _, path := range []string{"/401", "/421"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(c)
		get(t, c, br, "/ok")
		resp := get(t, c, br, path)
		if resp.StatusCode != map[string]int{"/401": 401, "/421": 421}[path] {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		if !resp.Close { // a server closing the connection says so first
			t.Fatalf("GET %s: the answer does not say the connection closes (Connection: close)", path)
		}
		waitClosed(t, c, 10*time.Second, "after GET "+path)
		c.Close()
	}
}

// TestNewServerTimeouts: a connection that sends nothing, or half a
// header, is closed after Header; one that asked and asks nothing more,
// after Idle; a body that does not come, after Read. An answer that takes
// longer than Read is not cut short.
func TestNewServerTimeouts(t *testing.T) {
	const short, long = 300 * time.Millisecond, time.Hour
	bodies := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/body":
			_, err := io.ReadAll(r.Body)
			bodies <- err
		case "/slow":
			select {
			case <-r.Context().Done():
				http.Error(w, "cancelled", http.StatusServiceUnavailable)
				return
			case <-time.After(3 * short):
			}
		}
		io.WriteString(w, "ok\n")
	})
	dial := func(addr string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}

	addr := serveBounded(t, h, Timeouts{Header: short, Read: long, Idle: long})
	c, _ := dial(addr)
	waitClosed(t, c, 10*time.Second, "a connection sending nothing")
	c, _ = dial(addr)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	waitClosed(t, c, 10*time.Second, "a connection sending half a header")

	addr = serveBounded(t, h, Timeouts{Header: long, Read: long, Idle: short})
	c, br := dial(addr)
	get(t, c, br, "/")
	waitClosed(t, c, 10*time.Second, "an idle connection")

	addr = serveBounded(t, h, Timeouts{Header: long, Read: short, Idle: long})
	c, br = dial(addr)
	if resp := get(t, c, br, "/slow"); resp.StatusCode != 200 {
		t.Errorf("an answer longer than Read: %s", resp.Status)
	}
	if resp := get(t, c, br, "/"); resp.StatusCode != 200 {
		t.Errorf("the next request on its connection: %s", resp.Status)
	}
	c, br = dial(addr)
	io.WriteString(c, "POST /body HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 10\r\n\r\nabc")
	select {
	case err := <-bodies:
		if err == nil {
			t.Error("a body cut short was read whole")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a body that does not come is still waited for")
	}
	if resp, err := http.ReadResponse(br, nil); err == nil {
		io.Copy(io.Discard, resp.Body)
	}
	waitClosed(t, c, 10*time.Second, "a connection whose body did not come")
}
