package guard

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Bounds on what others may cost a listening process: however many
// connections anyone opens, a listener holds at most a few of them, each
// for a bounded time, so the process keeps its file descriptors for its
// own files (gen's answers, its index, its requests to the servers).

// MaxConns is the most connections one listener holds at once: far more
// than its users open (a Prometheus, a few browser tabs, query and shell),
// far fewer than a process's files.
const MaxConns = 64

// minConns is the fewest a listener holds, whatever the limit: below it
// the owner's own page or scrape would wait behind a handful of others.
const minConns = 8

// DefaultReserve is how many file descriptors a listening process keeps
// for its own files beyond its listeners' connections, before what its
// work adds (gen adds its requests in flight).
const DefaultReserve = 256

// Limit returns ln holding at most n connections open at once. Accept
// takes the next connection from the kernel only once one of the n has
// closed: the others wait in the kernel's queue (and then in their
// senders' retries), costing this process no file descriptor. Closing
// the returned listener ends an Accept that waits.
func Limit(ln net.Listener, n int) net.Listener {
	return &limited{Listener: ln, slots: make(chan struct{}, max(n, 1)), closed: make(chan struct{})}
}

type limited struct {
	net.Listener
	slots     chan struct{} // one per connection held
	closed    chan struct{}
	closeOnce sync.Once
}

func (l *limited) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &slotConn{Conn: c, free: func() { <-l.slots }}, nil
}

func (l *limited) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// slotConn gives its slot back when it is first closed.
type slotConn struct {
	net.Conn
	once sync.Once
	free func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.free)
	return err
}

// CloseWrite half-closes the connection, as net/http does before it
// closes one whose answer says Connection: close (a 401, a 421), so the
// answer is not lost to a reset.
func (c *slotConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// ConnCap returns how many connections each of a process's listeners
// (Limit's n) may hold so that, all of them full, reserve file
// descriptors stay for the process's own files: the open-file limit
// (RLIMIT_NOFILE; Go raises the soft limit to the hard one at start) less
// reserve, shared by the listeners at two descriptors a connection (its
// socket, and the file an answer too large for memory is spooled to), at
// most MaxConns and at least minConns. When that is below MaxConns, note
// says so in one line.
func ConnCap(listeners, reserve int) (n int, note string) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return MaxConns, ""
	}
	return connCap(lim.Cur, listeners, reserve)
}

// connCap is ConnCap under the open-file limit limit.
func connCap(limit uint64, listeners, reserve int) (n int, note string) {
	listeners = max(listeners, 1)
	free := int64(min(limit, 1<<30)) - int64(reserve)
	n = int(min(max(free/int64(2*listeners), minConns), MaxConns))
	if n < MaxConns {
		note = fmt.Sprintf("open-file limit %d: %d connections per listener (ulimit -n)", limit, n)
	}
	return n, note
}

// Timeouts bound the time of one connection to a listener.
type Timeouts struct {
	Header time.Duration // to read a request's header
	Read   time.Duration // to read a whole request, its body included
	Idle   time.Duration // between two requests (and, unanswered, the first is Header's)
}

// DefaultTimeouts are what a zero field of Timeouts means: a header comes
// at once from any client, a body (none of gendex's requests has one)
// within seconds, and a client that keeps its connection for its next
// request asks within a minute (a Prometheus scrapes every 15-60 s; one
// slower dials again).
var DefaultTimeouts = Timeouts{Header: 10 * time.Second, Read: 30 * time.Second, Idle: 60 * time.Second}

// NewServer returns an http.Server serving h within t (a zero field:
// DefaultTimeouts'), on which a response 401 or 421 closes its
// connection: who is refused holds nothing.
func NewServer(h http.Handler, t Timeouts) *http.Server {
	d := DefaultTimeouts
	t.Header, t.Read, t.Idle = or(t.Header, d.Header), or(t.Read, d.Read), or(t.Idle, d.Idle)
	return &http.Server{
		// (net/http lifts Read's deadline once a request is read whole,
		// so a long answer is not cut by it.)
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h.ServeHTTP(&closeRefused{ResponseWriter: w}, r)
		}),
		ReadHeaderTimeout: t.Header,
		ReadTimeout:       t.Read,
		IdleTimeout:       t.Idle,
	}
}

func or(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// closeRefused closes the connection after a 401 or 421.
type closeRefused struct {
	http.ResponseWriter
	wrote bool
}

func (w *closeRefused) WriteHeader(code int) {
	if !w.wrote && (code == http.StatusUnauthorized || code == http.StatusMisdirectedRequest) {
		w.Header().Set("Connection", "close")
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeRefused) Write(p []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *closeRefused) Unwrap() http.ResponseWriter { return w.ResponseWriter }
