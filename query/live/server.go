// Package live serves answers while the index is being written, and asks
// for them: the writer's socket server and its client, the socket's path
// and safety checks, Prometheus /metrics, and Asker, which asks whoever
// can answer for an index at a given moment.
//
// bbolt lets one process open a database read-write and nobody
// else in at the same time, so the process that writes (gen, ingest) serves
// questions on a Unix socket (see SocketPath), and query and shell ask it
// there. The answer comes as JSON lines:
//
//	{"columns":[...]}  {"row":[...]}...  {"total":[...]}  {"end":true}
//	{"line":"..."}     (show)
//	{"note":"..."}     (a sentence about the answer, apart from its data; anywhere before the end)
//	{"error":"...","usage":false}
//
// Cells are null (unknown), integers, strings, or {"fixed":"12.34"}.
//
// A reader never holds the writer: an answer is computed into a spool
// (memory, then an unlinked temporary file past spoolMemory) inside the
// read transaction, and only sent once the transaction is over; a reader
// that stops reading is cut off after StallTimeout, and on exit after
// shutdownGrace.
package live

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gendex/query"
	"gendex/query/guard"
	"gendex/store"
	"gendex/store/prom"
)

const (
	// DefaultStallTimeout is Server.StallTimeout's default.
	DefaultStallTimeout = 30 * time.Second
	// shutdownGrace is how long Serve, on exit, lets answers being sent
	// finish before it closes their connections.
	shutdownGrace = time.Second
	// spoolMemory is how much of one answer is kept in memory before the
	// rest goes to a temporary file.
	spoolMemory = 4 << 20
)

// Server answers questions over HTTP: on the writer's Unix socket and,
// when asked, on a TCP port, where /metrics serves Prometheus text too.
type Server struct {
	Src query.Source
	// Extra, when set, writes more Prometheus samples (gen's requests in
	// flight and servers up) to the Writer of /metrics, after the index's
	// own: a family is written once across both.
	Extra func(p *prom.Writer)
	// StallTimeout is how long one write of an answer may wait on a reader
	// that does not read before the connection is closed; 0 means
	// DefaultStallTimeout. A slow reader that keeps reading is not cut off.
	StallTimeout time.Duration
	// Readers are what check reads the files with (query.CheckReaders:
	// each one left nil has its stated meaning in the check's answer).
	Readers query.CheckReaders
	// Conns is the most connections each listener holds at once (0:
	// guard.MaxConns); the others wait in the kernel's queue.
	Conns int
	// Timeouts bound each connection's time (zero fields: guard's
	// defaults).
	Timeouts guard.Timeouts

	answering atomic.Int64 // read transactions open for answers
}

// Handler serves GET /v1/query?arg=...&arg=...[&bare=1], GET /metrics and
// GET /v1/health, to anyone who can connect: it is for the Unix socket,
// which only its owner can open.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", health)
	mux.HandleFunc("GET /v1/query", s.query)
	mux.HandleFunc("GET /metrics", s.metrics)
	return mux
}

// PublicOptions says what a TCP port serves.
type PublicOptions struct {
	// Queries serves /v1/query too (prompts and answers, file paths,
	// missing ids); without it only /metrics and /v1/health are served.
	Queries bool
	// Token, when set, must come with every request as
	// "Authorization: Bearer TOKEN"; requests without it get 401.
	Token string
	// Hosts are the Host headers answered (the zero Hosts: localhost and
	// IP literals); a request for another gets 421, so a page that rebinds
	// its name to the port reads nothing (see package guard).
	Hosts guard.Hosts
}

// PublicHandler is the handler for a TCP port (see PublicOptions).
func (s *Server) PublicHandler(o PublicOptions) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/health", health)
	mux.HandleFunc("GET /metrics", s.metrics)
	if o.Queries {
		mux.HandleFunc("GET /v1/query", s.query)
	} else {
		mux.HandleFunc("GET /v1/query", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "this port serves /metrics only (start the writer with --listen-queries to serve answers here)", http.StatusNotFound)
		})
	}
	if o.Token == "" {
		return o.Hosts.Check(mux)
	}
	return o.Hosts.Check(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !guard.Same(r.Header.Get("Authorization"), "Bearer "+o.Token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gendex"`)
			http.Error(w, "401 unauthorized: send 'Authorization: Bearer TOKEN', the token the writer printed when it started (or $GENDEX_TOKEN, when set)", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	}))
}

func health(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }

// Serve answers on ln with Handler until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.serve(ctx, ln, s.Handler())
}

// ServePublic answers on ln with PublicHandler(o) until ctx is done.
func (s *Server) ServePublic(ctx context.Context, ln net.Listener, o PublicOptions) error {
	return s.serve(ctx, ln, s.PublicHandler(o))
}

// serve serves h on ln until ctx is done, holding at most Conns
// connections within Timeouts (package guard). When it returns, every
// connection is closed: answers still being sent get shutdownGrace, then
// their connections are closed, so a reader that stopped reading never
// delays the exit by more than that.
func (s *Server) serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	stall := s.StallTimeout
	if stall <= 0 {
		stall = DefaultStallTimeout
	}
	conns := s.Conns
	if conns <= 0 {
		conns = guard.MaxConns
	}
	ln = guard.Limit(ln, conns)
	hs := guard.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Every response starts with a fresh write deadline (the
		// connection keeps the last one set); stallWriter moves it on as
		// an answer is sent.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(stall))
		h.ServeHTTP(&stallWriter{ResponseWriter: w, stall: stall}, r)
	}), s.Timeouts)
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		if hs.Shutdown(sctx) != nil {
			hs.Close()
		}
	}()
	err := hs.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		<-closed
		return nil
	}
	return err
}

// stallWriter gives each write StallTimeout to get through.
type stallWriter struct {
	http.ResponseWriter
	stall time.Duration
}

func (w *stallWriter) Write(p []byte) (int, error) {
	http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.stall))
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (s *Server) query(w http.ResponseWriter, r *http.Request) {
	// The header goes first, before the answer is computed: the reader
	// knows at once that the writer is alive (see Remote).
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	var sp *spool
	q, err := query.Parse(r.URL.Query()["arg"])
	if err == nil {
		q.Bare = r.URL.Query().Get("bare") == "1"
		q.Check.CheckReaders = s.Readers
		stop := heartbeat(w, heartbeatEvery)
		// The whole answer goes to the spool inside the read transaction;
		// nothing of it goes to the network before the transaction is over.
		sp, err = spoolAnswer(r.Context(), countedSource{s.Src, &s.answering}, q, time.Now())
		stop()
	}
	if sp == nil { // a bad question, or the spool failed
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false)
		enc.Encode(errorLine(err))
		return
	}
	defer sp.Close()
	rd, err := sp.Reader()
	if err != nil {
		return // the reader sees the answer cut short
	}
	io.CopyBuffer(w, rd, make([]byte, 64<<10))
}

// Answering is the number of read transactions open right now for answers
// being computed. Answers are spooled, so it is 0 while readers only read
// (a stalled reader holds none).
func (s *Server) Answering() int64 { return s.answering.Load() }

// countedSource counts the read transactions open on src in n.
type countedSource struct {
	src query.Source
	n   *atomic.Int64
}

func (c countedSource) View(fn func(*store.View) error) error {
	c.n.Add(1)
	defer c.n.Add(-1)
	return c.src.View(fn)
}

// heartbeatEvery is how often a writer computing an answer sends a blank
// line, so that its reader tells a long answer from a writer that stopped.
const heartbeatEvery = time.Second

// heartbeat writes a newline to w every d until stop is called; stop
// returns once it no longer writes. (Blank lines between JSON lines are
// skipped by every reader.) It writes only to the network, never inside a
// read transaction: the answer meanwhile goes to its spool.
func heartbeat(w http.ResponseWriter, d time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	rc := http.NewResponseController(w)
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if _, err := io.WriteString(w, "\n"); err != nil || rc.Flush() != nil {
					return
				}
			}
		}
	})
	return func() { close(done); wg.Wait() }
}

// errorLine is the JSON line that carries err to the reader, with its
// kind: a usage error, or something asked for that the index does not
// hold (not_found).
func errorLine(err error) map[string]any {
	return map[string]any{"error": strings.TrimPrefix(err.Error(), "usage: "), "usage": errors.Is(err, query.ErrUsage),
		"not_found": errors.Is(err, store.ErrNotFound)}
}

// spoolAnswer computes q's answer from src into a spool, as the JSON lines
// the socket sends (an error line after what was computed when Run fails,
// the end line otherwise), and returns it with Run's error. The read
// transaction is over when it returns. A nil spool means the spool itself
// failed (a full disk).
func spoolAnswer(ctx context.Context, src query.Source, q query.Query, now time.Time) (*spool, error) {
	sp := &spool{}
	bw := bufio.NewWriterSize(sp, 64<<10)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	err := query.Run(src, q, now, &streamSink{enc: enc, ctx: ctx})
	if err != nil {
		enc.Encode(errorLine(err))
	} else {
		enc.Encode(map[string]bool{"end": true})
	}
	if ferr := bw.Flush(); ferr != nil {
		sp.Close()
		return nil, fmt.Errorf("spooling the answer: %w", ferr)
	}
	return sp, err
}

// spool keeps an answer until it can be sent: in memory up to spoolMemory
// bytes, the rest in an unlinked temporary file.
type spool struct {
	mem bytes.Buffer
	f   *os.File
	n   int64
}

func (s *spool) Write(p []byte) (int, error) {
	if s.f == nil && s.mem.Len()+len(p) > spoolMemory {
		f, err := os.CreateTemp("", "gendex-answer-*")
		if err != nil {
			return 0, err
		}
		os.Remove(f.Name())
		s.f = f
		if _, err := s.mem.WriteTo(f); err != nil {
			return 0, err
		}
	}
	s.n += int64(len(p))
	if s.f != nil {
		return s.f.Write(p)
	}
	return s.mem.Write(p)
}

// Len is the number of bytes written.
func (s *spool) Len() int64 { return s.n }

// Reader reads back what was written, from the start.
func (s *spool) Reader() (io.Reader, error) {
	if s.f == nil {
		return bytes.NewReader(s.mem.Bytes()), nil
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	return s.f, nil
}

// Close frees the temporary file, if any.
func (s *spool) Close() error {
	if s.f != nil {
		return s.f.Close()
	}
	return nil
}

// streamSink writes an answer as JSON lines. It stops the answer when ctx
// is done (the reader went away, or the server is closing).
type streamSink struct {
	enc  *json.Encoder
	ctx  context.Context
	rows int
}

func encodeRow(row []any) []any {
	out := make([]any, len(row))
	for i, v := range row {
		if f, ok := v.(query.Fixed); ok {
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
	if s.rows++; s.rows%4096 == 0 && s.ctx.Err() != nil {
		return s.ctx.Err()
	}
	return s.enc.Encode(map[string][]any{"row": encodeRow(row)})
}
func (s *streamSink) Total(row []any) error {
	return s.enc.Encode(map[string][]any{"total": encodeRow(row)})
}
func (s *streamSink) Line(line []byte) error {
	return s.enc.Encode(map[string]string{"line": string(line)})
}
func (s *streamSink) Note(note string) error {
	return s.enc.Encode(map[string]string{"note": note})
}
