package query

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gendex/store"
)

// Live reads. bbolt lets one process open a database read-write and nobody
// else in at the same time, so the process that writes (gen, ingest) serves
// questions on a Unix socket beside the database, and query and shell ask
// it there. The answer streams as JSON lines:
//
//	{"columns":[...]}  {"row":[...]}...  {"total":[...]}  {"end":true}
//	{"line":"..."}     (show)
//	{"error":"...","usage":false}
//
// Cells are null (unknown), integers, strings, or {"fixed":"12.34"}.

// Asker answers questions, from an open index (Local) or from the process
// that writes it (Remote).
type Asker interface {
	Ask(ctx context.Context, q Query, now time.Time, out Sink) error
}

// Local answers from an open index.
type Local struct{ Src Source }

// Ask runs q against the index.
func (l Local) Ask(ctx context.Context, q Query, now time.Time, out Sink) error {
	return Run(l.Src, q, now, out)
}

// SocketPath is where the writer of db serves questions.
func SocketPath(db string) string { return db + ".sock" }

// Server answers questions over HTTP: on the writer's Unix socket and,
// when asked, on a TCP port, where /metrics serves Prometheus text too.
type Server struct {
	Src Source
	// Extra, when set, writes more Prometheus samples (gen's requests in
	// flight and servers up).
	Extra func(w io.Writer)
}

// Handler serves GET /v1/query?arg=...&arg=...[&bare=1], GET /metrics and
// GET /v1/health.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.HandleFunc("GET /v1/query", s.query)
	mux.HandleFunc("GET /metrics", s.metrics)
	return mux
}

func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	bw := bufio.NewWriterSize(w, 32<<10)
	defer bw.Flush()
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	q, err := Parse(r.URL.Query()["arg"])
	if err == nil {
		q.Bare = r.URL.Query().Get("bare") == "1"
		err = Run(s.Src, q, time.Now(), &streamSink{enc: enc})
	}
	if err != nil {
		enc.Encode(map[string]any{"error": strings.TrimPrefix(err.Error(), "usage: "), "usage": errors.Is(err, ErrUsage)})
		return
	}
	enc.Encode(map[string]bool{"end": true})
}

// streamSink writes an answer as JSON lines.
type streamSink struct{ enc *json.Encoder }

func encodeRow(row []any) []any {
	out := make([]any, len(row))
	for i, v := range row {
		if f, ok := v.(Fixed); ok {
			out[i] = map[string]string{"fixed": f.String()}
		} else {
			out[i] = v
		}
	}
	return out
}

func (s *streamSink) Columns(cols []string) error {
	return s.enc.Encode(map[string][]string{"columns": cols})
}
func (s *streamSink) Row(row []any) error {
	return s.enc.Encode(map[string][]any{"row": encodeRow(row)})
}
func (s *streamSink) Total(row []any) error {
	return s.enc.Encode(map[string][]any{"total": encodeRow(row)})
}
func (s *streamSink) Line(line []byte) error {
	return s.enc.Encode(map[string]string{"line": string(line)})
}

// Listen opens the Unix socket at path, mode 0600. A socket left there by
// a process that died is replaced; one that answers is not (another writer
// serves it).
func Listen(path string) (net.Listener, error) {
	if _, err := os.Lstat(path); err == nil {
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another process serves this database", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
		}
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	return ln, nil
}

// Serve answers on ln until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Remote asks the process that writes the index, over its socket.
type Remote struct {
	Socket string
	hc     *http.Client
}

// ErrNoWriter: no process serves the socket.
var ErrNoWriter = errors.New("no process serves the socket")

// Dial connects to the writer's socket, or returns ErrNoWriter quickly.
func Dial(ctx context.Context, socket string) (*Remote, error) {
	if _, err := os.Stat(socket); err != nil {
		return nil, ErrNoWriter
	}
	r := &Remote{Socket: socket, hc: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		MaxIdleConnsPerHost: 4,
	}}}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gendex/v1/health", nil)
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoWriter, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s answered %s", ErrNoWriter, socket, resp.Status)
	}
	return r, nil
}

// Ask sends q's words to the writer and streams its answer to out.
func (r *Remote) Ask(ctx context.Context, q Query, now time.Time, out Sink) error {
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
		return fmt.Errorf("asking the writer at %s: %w", r.Socket, err)
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
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("asking the writer at %s: the answer was cut short", r.Socket)
			}
			return fmt.Errorf("asking the writer at %s: %w", r.Socket, err)
		}
		switch {
		case m.Error != nil:
			if m.Usage {
				return usageErr("%s", *m.Error)
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
		return Fixed{V: v, Prec: prec}
	}
	s := string(c)
	if strings.HasPrefix(s, "-") {
		n, _ := strconv.ParseInt(s, 10, 64)
		return n
	}
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}

// metrics writes Prometheus text: per dataset, records by stage, token
// sums, open errors, records without a token count, and missing answers.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	err := s.Src.View(func(v *store.View) error {
		var sums []store.Summary
		for _, name := range v.Datasets() {
			sm, err := v.Summary(name)
			if err != nil {
				return err
			}
			sums = append(sums, sm)
		}
		gauge := func(name, help string, each func(sm store.Summary) []sample) {
			fmt.Fprintf(bw, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name)
			for _, sm := range sums {
				for _, x := range each(sm) {
					fmt.Fprintf(bw, "%s{dataset=%q%s} %d\n", name, sm.Dataset, x.labels, x.v)
				}
			}
		}
		gauge("gendex_records", "Records indexed, by dataset and stage.", func(sm store.Summary) []sample {
			var out []sample
			for _, st := range []store.Stage{store.Prompts, store.Raw, store.Tokenized, store.Errors} {
				out = append(out, sample{fmt.Sprintf(",stage=%q", st), sm.Stage(st).Records})
			}
			return out
		})
		one := func(f func(sm store.Summary) uint64) func(sm store.Summary) []sample {
			return func(sm store.Summary) []sample { return []sample{{"", f(sm)}} }
		}
		gauge("gendex_prompt_tokens", "Prompt tokens of the responses that carry the count.", one(func(sm store.Summary) uint64 { return sm.Stage(store.Raw).PromptTokens }))
		gauge("gendex_completion_tokens", "Completion tokens of the responses that carry the count.", one(func(sm store.Summary) uint64 { return sm.Stage(store.Raw).CompletionTokens }))
		gauge("gendex_unknown_token_records", "Responses without a completion token count.", one(func(sm store.Summary) uint64 { return sm.Stage(store.Raw).UnknownCompletion }))
		gauge("gendex_errors", "Prompts that failed for good and have no response since.", one(func(sm store.Summary) uint64 { return sm.Overlap.ErrorsOpen }))
		gauge("gendex_missing_raw", "Prompts with neither a response nor a final error.", one(func(sm store.Summary) uint64 { return sm.MissingRaw() }))
		return nil
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if s.Extra != nil {
		s.Extra(bw)
	}
}

type sample struct {
	labels string
	v      uint64
}
