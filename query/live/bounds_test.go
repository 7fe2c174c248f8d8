package live_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/query/guard"
	"gendex/query/live"
	"gendex/store"
)

// emptyDB opens an empty index, closed when the test ends.
func emptyDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// roundTrip sends GET path (with Host host and header auth, when not "")
// on c and returns the response's status.
func roundTrip(t *testing.T, c net.Conn, br *bufio.Reader, path, host, auth string) int {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second)) // a guard, not a measure
	req := "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\n"
	if auth != "" {
		req += "Authorization: " + auth + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// closedWithin fails the test unless the server closes c within d.
func closedWithin(t *testing.T, c net.Conn, br *bufio.Reader, d time.Duration, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	if n, err := br.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: read %d bytes, %v; want the connection closed", what, n, err)
	}
}

// TestPublicPortClosesRefused: on the writer's TCP port, a request without
// the token (401) or for another Host (421) closes its connection; one
// with the token keeps it.
func TestPublicPortClosesRefused(t *testing.T) {
	var log bytes.Buffer
	stop, err := live.Serve(emptyDB(t), live.Options{Addr: "127.0.0.1:0", Token: "s3cret", Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	_, rest, _ := strings.Cut(log.String(), "on http://")
	addr, _, _ := strings.Cut(rest, "/")
	for _, c := range []struct {
		host, auth string
		want       int
	}{
		{addr, "", 401},
		{addr, "Bearer wrong", 401},
		{"attacker.example", "Bearer s3cret", 421},
	} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(conn)
		if got := roundTrip(t, conn, br, "/metrics", c.host, c.auth); got != c.want {
			t.Fatalf("GET /metrics, Host %s, %q: %d, want %d", c.host, c.auth, got, c.want)
		}
		closedWithin(t, conn, br, 10*time.Second, fmt.Sprintf("after a %d", c.want))
		conn.Close()
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for i := range 2 { // the second on the same connection
		if got := roundTrip(t, conn, br, "/v1/health", addr, "Bearer s3cret"); got != 200 {
			t.Fatalf("GET /v1/health #%d with the token: %d", i+1, got)
		}
	}
}

// serveSocket serves db on a fresh socket with srv until the test ends,
// and returns the socket's path.
func serveSocket(t *testing.T, srv *live.Server) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "g.db.sock")
	ln, err := live.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return sock
}

// TestSocketBounds: the writer's socket closes a connection idle past
// Timeouts.Idle, and holds at most Conns at once: one more is answered
// once one of them closes.
func TestSocketBounds(t *testing.T) {
	db := emptyDB(t)
	sock := serveSocket(t, &live.Server{Src: db, Timeouts: guard.Timeouts{Idle: 300 * time.Millisecond}})
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if got := roundTrip(t, c, br, "/v1/health", "gendex", ""); got != 200 {
		t.Fatalf("GET /v1/health: %d", got)
	}
	closedWithin(t, c, br, 10*time.Second, "an idle connection to the socket")

	sock = serveSocket(t, &live.Server{Src: db, Conns: 2})
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	for _, c := range held[:2] {
		if got := roundTrip(t, c, bufio.NewReader(c), "/v1/health", "gendex", ""); got != 200 {
			t.Fatalf("GET /v1/health: %d", got)
		}
	}
	third := make(chan int, 1)
	go func() {
		c := held[2]
		io.WriteString(c, "GET /v1/health HTTP/1.1\r\nHost: gendex\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			third <- 0
			return
		}
		third <- resp.StatusCode
	}()
	select {
	case got := <-third:
		t.Fatalf("a third connection answered (%d) while 2 are held", got)
	case <-time.After(300 * time.Millisecond):
	}
	held[0].Close()
	select {
	case got := <-third:
		if got != 200 {
			t.Fatalf("the third connection, once one closed: %d", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the third connection is not answered after one of the 2 closed")
	}
}
