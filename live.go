package main

// Live answers: what a writing command (gen, ingest --follow) serves while
// it holds the index, and how a reader (query, shell) asks whoever can
// answer. Nothing here knows which command uses it.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"gendex/query"
	"gendex/store"
)

// liveOptions says what serveLive serves beyond the index's socket.
type liveOptions struct {
	// Addr is a TCP HOST:PORT (or :PORT, meaning loopback) for Prometheus
	// /metrics; "" serves the socket only.
	Addr string
	// Queries serves the answers (/v1/query) on Addr too; it needs Addr.
	Queries bool
	// Token, when not "", must come with every TCP request as
	// 'Authorization: Bearer TOKEN'; Addr beyond loopback needs it.
	Token string
	// Log is told, in one line, what is served on Addr.
	Log io.Writer
	// Extra, when not nil, writes more metrics after the index's own.
	Extra func(io.Writer)
}

// serveLive serves questions about db on its socket and, when o.Addr is
// given, /metrics (and the answers, with o.Queries) on that TCP address,
// while the caller writes db. A bad or unsafe o (Queries without Addr, an
// Addr beyond loopback without a Token) is a usage error and nothing is
// served. stop stops serving and returns when every connection is done.
func serveLive(db *store.DB, o liveOptions) (stop func(), err error) {
	srv := &query.Server{Src: db, Extra: o.Extra}
	var tl net.Listener
	if o.Addr != "" {
		host, port, err := net.SplitHostPort(o.Addr)
		if err != nil {
			return nil, usagef("--listen %q: want HOST:PORT or :PORT", o.Addr)
		}
		if host == "" {
			host = "127.0.0.1" // loopback unless asked otherwise
		}
		if tl, err = net.Listen("tcp", net.JoinHostPort(host, port)); err != nil {
			return nil, err
		}
		if addr, ok := tl.Addr().(*net.TCPAddr); o.Token == "" && (!ok || !addr.IP.IsLoopback()) {
			tl.Close()
			return nil, usagef("--listen %s is reachable from other machines: set GENDEX_TOKEN to a secret (clients send 'Authorization: Bearer $GENDEX_TOKEN'), or listen on 127.0.0.1", o.Addr)
		}
	} else if o.Queries {
		return nil, usagef("--listen-queries goes with --listen HOST:PORT")
	}
	ln, err := query.Listen(query.SocketPath(db.Path()))
	if err != nil {
		if tl != nil {
			tl.Close()
		}
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(sctx, ln) })
	if tl != nil {
		opts := query.PublicOptions{Queries: o.Queries, Token: o.Token}
		what := fmt.Sprintf("Prometheus metrics on http://%s/metrics", tl.Addr())
		if opts.Queries {
			what = fmt.Sprintf("answers on http://%s/v1/query?arg=progress and %s", tl.Addr(), what)
		}
		if opts.Token != "" {
			what += " (with Authorization: Bearer $GENDEX_TOKEN)"
		}
		fmt.Fprintf(o.Log, "serving %s\n", what)
		wg.Go(func() { srv.ServePublic(sctx, tl, opts) })
	}
	return func() { cancel(); wg.Wait() }, nil
}

// listenFlags are --listen and --listen-queries, the flags of gen and
// ingest --follow that become serveLive's options.
type listenFlags struct {
	addr    *string
	queries *bool
}

// addListenFlags declares --listen and --listen-queries in fs; prefix
// starts --listen's description.
func addListenFlags(fs *flag.FlagSet, prefix string) listenFlags {
	return listenFlags{
		addr: fs.String("listen", "", prefix+"also serve Prometheus /metrics over HTTP on HOST:PORT (loopback when HOST is empty); "+
			"beyond loopback it needs $GENDEX_TOKEN, sent by clients as 'Authorization: Bearer TOKEN'"),
		queries: fs.Bool("listen-queries", false, "with --listen: serve the answers there too (/v1/query: prompts, responses, file paths, missing ids)"),
	}
}

// options returns serveLive's options for the flags given, the token
// taken from $GENDEX_TOKEN and the log going to stderr.
func (l listenFlags) options(env *Env, extra func(io.Writer)) liveOptions {
	return liveOptions{Addr: *l.addr, Queries: *l.queries, Token: env.Getenv("GENDEX_TOKEN"), Log: env.Stderr, Extra: extra}
}

// pathAsker answers each question from whoever can answer for the index
// at path at that moment: the process writing it, over one connection to
// its socket kept for the process's life (reconnecting when the writer
// changes), or else the file itself, opened read-only for that one
// question. Between questions it holds no file open, so a shell left open
// never keeps gen from starting. Close it when done.
type pathAsker struct {
	path   string
	remote *query.Remote
}

func newPathAsker(path string) *pathAsker {
	return &pathAsker{path: path, remote: query.NewRemote(query.SocketPath(path))}
}

// Close closes the connection to the writer, if one is open.
func (a *pathAsker) Close() error { return a.remote.Close() }

// Ask answers q into out, as of now.
func (a *pathAsker) Ask(ctx context.Context, q query.Query, now time.Time, out query.Sink) error {
	err := a.remote.Ask(ctx, q, now, out)
	if !errors.Is(err, query.ErrNoWriter) {
		return err // answered by the writer, or failed there
	}
	db, err := store.Open(a.path, store.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, store.ErrLocked) {
		// A writer may have started since: it serves the socket at once.
		err2 := a.remote.Ask(ctx, q, now, out)
		if !errors.Is(err2, query.ErrNoWriter) {
			return err2
		}
		return fmt.Errorf("%w; its writer does not answer on %s either (an older gendex, or a bbolt tool, holds the file)", err, a.remote.Socket)
	}
	if err != nil {
		return err
	}
	defer db.Close()
	return query.Local{Src: db}.Ask(ctx, q, now, out)
}
