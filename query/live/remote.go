package live

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gendex/query"
	"gendex/store"
)

// Remote asks the process that writes the index, over its socket. It
// connects on the first question and keeps that one connection for the
// next ones (re-dialing the socket when the writer closed it: a writer that
// restarted is found at the same path). Close releases the connection. A
// Remote is safe for concurrent use.
//
// A Remote waits for a writer a bounded time: FirstByteTimeout for the
// answer to start (the writer sends its response header before it
// computes the answer, and a blank line every second while it does), then
// ReadTimeout for each read of the rest. A writer that is stopped (Ctrl-Z),
// hung or swamped gets an error wrapping ErrNotAnswering instead of a hang.
// The answer is read whole into a spool (memory, then an unlinked
// temporary file) before the first row reaches out, so a reader whose own
// output stalls (gendex query ... | less) never stalls the writer's
// connection.
type Remote struct {
	Socket string
	// FirstByteTimeout bounds the wait for the answer to start; 0 means
	// DefaultFirstByteTimeout.
	FirstByteTimeout time.Duration
	// ReadTimeout bounds each wait for more of an answer once it has
	// started; 0 means DefaultReadTimeout.
	ReadTimeout time.Duration
	tr          *http.Transport
	hc          *http.Client
	peer        atomic.Int64 // pid of the writer last connected to, 0 unknown
}

const (
	// DefaultFirstByteTimeout is Remote.FirstByteTimeout's default: a
	// writer sends its response header as soon as it reads the question.
	DefaultFirstByteTimeout = 5 * time.Second
	// DefaultReadTimeout is Remote.ReadTimeout's default: a writer sends a
	// blank line every heartbeatEvery while it computes a long answer.
	DefaultReadTimeout = 15 * time.Second
)

// firstByteTimeout is DefaultFirstByteTimeout, unless the environment's
// GENDEX_FIRST_BYTE_TIMEOUT, read once, is a positive duration: a test
// hook, for the whole-binary tests of a stopped writer, which wait for it
// again and again.
var firstByteTimeout = sync.OnceValue(func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("GENDEX_FIRST_BYTE_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return DefaultFirstByteTimeout
})

// ErrNoWriter: no process serves the socket.
var ErrNoWriter = errors.New("no process serves the socket")

// ErrNotAnswering: a process serves the socket (it accepted the
// connection) but did not answer in time: it is stopped, hung or swamped.
var ErrNotAnswering = errors.New("the writer is not answering")

// errSilent is the cause a Remote's watchdog cancels a question with.
var errSilent = errors.New("the writer sent nothing in time")

// remoteIdle is how long a Remote keeps an unused connection: shorter than
// the server's idle timeout, so the client, not the server, closes it.
const remoteIdle = 30 * time.Second

// NewRemote returns a Remote for the writer at socket, without connecting.
// Before each connection it checks the socket's folder and the socket,
// through one open folder, and after it the process at the other end (see
// Listen): a socket of another user, or in an unsafe folder, or served by
// another user's process, is refused with ErrUnsafeSocket; no socket, or
// nobody answering, is ErrNoWriter.
func NewRemote(socket string) *Remote {
	r := &Remote{Socket: socket}
	r.tr = &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			c, pid, err := dialSocket(func(addr string) (net.Conn, error) { return d.DialContext(ctx, "unix", addr) }, socket)
			if err != nil {
				return nil, err
			}
			r.peer.Store(int64(pid))
			return c, nil
		},
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     remoteIdle,
	}
	r.hc = &http.Client{Transport: r.tr}
	return r
}

// Dial returns a Remote for the writer at socket once the writer answers a
// health check, or ErrNoWriter quickly (ErrUnsafeSocket for a socket it
// must not use). Close the Remote when done.
func Dial(ctx context.Context, socket string) (*Remote, error) {
	r := NewRemote(socket)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gendex/v1/health", nil)
	resp, err := r.hc.Do(req)
	if err != nil {
		r.Close()
		if errors.Is(err, ErrUnsafeSocket) || errors.Is(err, ErrNoWriter) {
			return nil, unwrapURL(err)
		}
		return nil, fmt.Errorf("%w: %v", ErrNoWriter, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		r.Close()
		return nil, fmt.Errorf("%w: %s answered %s", ErrNoWriter, socket, resp.Status)
	}
	return r, nil
}

// closedUnanswered says err is a connection closed before any answer
// came: the end of the file, a reset, or what net/http's transport says
// when the close came before it read a byte (its errServerClosedIdle,
// not exported: told by its words).
func closedUnanswered(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "server closed idle connection")
}

// unwrapURL drops net/http's `Get "http://gendex/...":` prefix, which
// names no real URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Close closes the Remote's idle connection. The Remote may still be used;
// it connects again.
func (r *Remote) Close() error {
	r.tr.CloseIdleConnections()
	return nil
}

// Ask sends q's words to the writer, reads its whole answer into a spool,
// and then gives it to out. When no writer could be reached, nothing was
// sent to out and the error wraps ErrNoWriter; when the writer did not
// answer in time (see Remote), nothing was sent to out and the error wraps
// ErrNotAnswering.
func (r *Remote) Ask(ctx context.Context, q query.Query, now time.Time, out query.Sink) error {
	v := url.Values{"arg": q.Args}
	if q.Bare {
		v.Set("bare", "1")
	}
	first, each := r.FirstByteTimeout, r.ReadTimeout
	if first <= 0 {
		first = firstByteTimeout()
	}
	if each <= 0 {
		each = DefaultReadTimeout
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watchdog := time.AfterFunc(first, func() { cancel(errSilent) })
	defer watchdog.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://gendex/v1/query?"+v.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		if errors.Is(context.Cause(ctx), errSilent) {
			return r.notAnswering(fmt.Sprintf("no answer began within %v", first))
		}
		if closedUnanswered(err) {
			// The writer let go of the connection before any answer: it
			// is exiting. Nothing was given to out, so the caller asks
			// the index (or, if a writer holds it still, the socket again).
			return fmt.Errorf("%w: %s closed the connection unanswered (%v)", ErrNoWriter, r.Socket, unwrapURL(err))
		}
		return fmt.Errorf("asking the writer at %s: %w", r.Socket, unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("asking the writer at %s: %s", r.Socket, resp.Status)
	}
	sp := &spool{}
	defer sp.Close()
	_, err = io.Copy(sp, &watchedReader{r: resp.Body, t: watchdog, d: each})
	if err != nil {
		if errors.Is(context.Cause(ctx), errSilent) {
			return r.notAnswering(fmt.Sprintf("the answer stopped coming for %v (%d bytes read)", each, sp.Len()))
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("asking the writer at %s: the answer was cut short (%v; did the writer exit? ask again)", r.Socket, unwrapURL(err))
	}
	watchdog.Stop()
	rd, err := sp.Reader()
	if err != nil {
		return err
	}
	return decodeAnswer(rd, out, func() error {
		return fmt.Errorf("asking the writer at %s: the answer was cut short (did the writer exit? ask again)", r.Socket)
	})
}

// watchedReader gives each Read of r at most d: it moves the watchdog t on
// before each one.
type watchedReader struct {
	r io.Reader
	t *time.Timer
	d time.Duration
}

func (w *watchedReader) Read(p []byte) (int, error) {
	w.t.Reset(w.d)
	return w.r.Read(p)
}

// notAnswering is the error for a writer that accepted the question and
// then sent nothing for too long: what happened, which process, and what
// to check.
func (r *Remote) notAnswering(what string) error {
	pid := int(r.peer.Load())
	who, check := "the process that writes this index", "check that process (gendex gen or gendex ingest --follow: 'ps -eo pid,stat,args | grep gendex'; state T means stopped: resume it with 'fg' in its terminal or 'kill -CONT PID')"
	if pid > 0 {
		who = fmt.Sprintf("the writer (pid %d", pid)
		if cmd := procCmdline(pid); cmd != "" {
			who += ": " + cmd
		}
		who += ")"
		switch procState(pid) {
		case 'T', 't':
			check = fmt.Sprintf("it is stopped (Ctrl-Z or SIGSTOP): resume it with 'fg' in its terminal or 'kill -CONT %d'", pid)
		case 0:
			check = fmt.Sprintf("pid %d is gone: ask again", pid)
		default:
			check = fmt.Sprintf("check whether it is hung or swamped ('ps -o pid,stat,etime,args -p %d'; state T means stopped: 'kill -CONT %d')", pid, pid)
		}
	}
	return fmt.Errorf("%w: %s accepted the question on %s but %s; %s", ErrNotAnswering, who, r.Socket, what, check)
}

// procCmdline is pid's command line, its arguments joined by spaces, or ""
// where the system does not say.
func procCmdline(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// procState is pid's state letter from /proc/PID/stat (R, S, D, T, ...),
// '?' where the system does not say, and 0 when the process is gone.
func procState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if _, err := os.Stat("/proc/self/stat"); err == nil {
				return 0
			}
		}
		return '?'
	}
	// pid (comm) state ...: comm may hold spaces and parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2]
	}
	return '?'
}

// decodeAnswer gives out the answer in r, JSON lines as the socket sends
// them (see the package doc). cut is the error for an answer that ends
// before its end line.
func decodeAnswer(r io.Reader, out query.Sink, cut func() error) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	for {
		var m struct {
			Columns []string          `json:"columns"`
			Row     []json.RawMessage `json:"row"`
			Total   []json.RawMessage `json:"total"`
			Line    *string           `json:"line"`
			Note    *string           `json:"note"`
			Error   *string           `json:"error"`
			Usage   bool              `json:"usage"`
			Missing bool              `json:"not_found"`
			End     bool              `json:"end"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return cut()
			}
			return fmt.Errorf("reading the answer: %w", err)
		}
		var err error
		switch {
		case m.Error != nil:
			if m.Usage {
				return fmt.Errorf("%w: %s", query.ErrUsage, *m.Error)
			}
			if m.Missing {
				return store.NotFound("%s", *m.Error)
			}
			return errors.New(*m.Error)
		case m.End:
			return nil
		case m.Columns != nil:
			err = out.Columns(m.Columns)
		case m.Row != nil:
			err = out.Row(decodeRow(m.Row))
		case m.Total != nil:
			err = out.Total(decodeRow(m.Total))
		case m.Line != nil:
			err = out.Line([]byte(*m.Line))
		case m.Note != nil:
			err = out.Note(*m.Note)
		}
		if err != nil {
			return err
		}
	}
}

func decodeRow(raw []json.RawMessage) []any {
	row := make([]any, len(raw))
	for i, c := range raw {
		row[i] = decodeCell(c)
	}
	return row
}

func decodeCell(c json.RawMessage) any {
	switch {
	case len(c) == 0 || string(c) == "null":
		return nil
	case string(c) == "true" || string(c) == "false":
		return string(c) == "true"
	case c[0] == '"':
		var s string
		json.Unmarshal(c, &s)
		return s
	case c[0] == '{':
		var f struct{ Fixed string }
		json.Unmarshal(c, &f)
		v, _ := strconv.ParseFloat(f.Fixed, 64)
		prec := 0
		if i := strings.IndexByte(f.Fixed, '.'); i >= 0 {
			prec = len(f.Fixed) - i - 1
		}
		return query.Fixed{V: v, Prec: prec}
	}
	s := string(c)
	if strings.HasPrefix(s, "-") {
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
