package live

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"gendex/query"
)

// Remote asks the process that writes the index, over its socket. It
// connects on the first question and keeps that one connection for the
// next ones (re-dialing the socket when the writer closed it: a writer that
// restarted is found at the same path). Close releases the connection. A
// Remote is safe for concurrent use.
type Remote struct {
	Socket string
	tr     *http.Transport
	hc     *http.Client
}

// ErrNoWriter: no process serves the socket.
var ErrNoWriter = errors.New("no process serves the socket")

// remoteIdle is how long a Remote keeps an unused connection: shorter than
// the server's idle timeout, so the client, not the server, closes it.
const remoteIdle = 30 * time.Second

// NewRemote returns a Remote for the writer at socket, without connecting.
// Before each connection it checks the socket (see Listen): a socket of
// another user, or in an unsafe folder, is refused with ErrUnsafeSocket; no
// socket, or nobody answering, is ErrNoWriter.
func NewRemote(socket string) *Remote {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if err := checkDir(socket); err != nil {
				if errors.Is(err, ErrUnsafeSocket) {
					return nil, err
				}
				return nil, fmt.Errorf("%w: %v", ErrNoWriter, err)
			}
			if err := checkSocket(socket); err != nil {
				if errors.Is(err, ErrUnsafeSocket) {
					return nil, err
				}
				return nil, fmt.Errorf("%w: %v", ErrNoWriter, err)
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, "unix", socket)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrNoWriter, err)
			}
			return c, nil
		},
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     remoteIdle,
	}
	return &Remote{Socket: socket, tr: tr, hc: &http.Client{Transport: tr}}
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

// Ask sends q's words to the writer and streams its answer to out. When no
// writer could be reached, nothing was sent to out and the error wraps
// ErrNoWriter.
func (r *Remote) Ask(ctx context.Context, q query.Query, now time.Time, out query.Sink) error {
	v := url.Values{"arg": q.Args}
	if q.Bare {
		v.Set("bare", "1")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://gendex/v1/query?"+v.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return fmt.Errorf("asking the writer at %s: %w", r.Socket, unwrapURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("asking the writer at %s: %s", r.Socket, resp.Status)
	}
	dec := json.NewDecoder(resp.Body)
	dec.UseNumber()
	for {
		var m struct {
			Columns []string          `json:"columns"`
			Row     []json.RawMessage `json:"row"`
			Total   []json.RawMessage `json:"total"`
			Line    *string           `json:"line"`
			Error   *string           `json:"error"`
			Usage   bool              `json:"usage"`
			End     bool              `json:"end"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return fmt.Errorf("asking the writer at %s: the answer was cut short (did the writer exit? ask again)", r.Socket)
			}
			return fmt.Errorf("asking the writer at %s: %w", r.Socket, err)
		}
		switch {
		case m.Error != nil:
			if m.Usage {
				return fmt.Errorf("%w: %s", query.ErrUsage, *m.Error)
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
