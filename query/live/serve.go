package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"gendex/query"
	"gendex/query/guard"
	"gendex/store"
	"gendex/store/prom"
)

// ErrUsage is wrapped by the errors Serve returns for options that are bad
// or unsafe: a mistake in how the writer was started, not a failure.
var ErrUsage = errors.New("usage")

func usagef(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// Options says what Serve serves beyond the index's socket.
type Options struct {
	// Addr is a TCP HOST:PORT (or :PORT, meaning loopback) for Prometheus
	// /metrics; "" serves the socket only.
	Addr string
	// Queries serves the answers (/v1/query) on Addr too; it needs Addr.
	Queries bool
	// Token, when not "", must come with every TCP request as
	// 'Authorization: Bearer TOKEN'; Addr beyond loopback needs it. With
	// Queries and no Token, Serve makes a random one and logs it as
	// SayToken says: the answers are never served without one (loopback is
	// no user boundary).
	Token string
	// SayToken, when not nil, is given the token Serve makes and returns
	// how the log line names it (such as "$(cat FILE)", after keeping it
	// there); an error stops Serve. nil: the line holds the token itself.
	SayToken func(token string) (string, error)
	// Log is told, in one line, what is served on Addr.
	Log io.Writer
	// Extra, when not nil, writes more metrics after the index's own.
	Extra func(*prom.Writer)
	// Readers are what check reads the files with (Server.Readers).
	Readers query.CheckReaders
	// Reserve is how many file descriptors the caller keeps for its own
	// files: the listeners' connections are capped to leave them
	// (guard.ConnCap); 0 means guard.DefaultReserve.
	Reserve int
}

// Serve serves questions about db on its socket and, when o.Addr is given,
// /metrics (and the answers, with o.Queries) on that TCP address, while
// the caller writes db. A bad or unsafe o (Queries without Addr, an Addr
// beyond loopback without a Token) is an error wrapping ErrUsage and
// nothing is served. stop stops serving and returns when every connection
// is done.
func Serve(db *store.DB, o Options) (stop func(), err error) {
	srv := &Server{Src: db, Extra: o.Extra, Readers: o.Readers}
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
	ln, err := Listen(SocketPath(db.Path()))
	if err != nil {
		if tl != nil {
			tl.Close()
		}
		return nil, err
	}
	srv.Conns = connCap(o, tl != nil)
	sctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { srv.Serve(sctx, ln) })
	if tl != nil {
		opts := PublicOptions{Queries: o.Queries, Token: o.Token, Hosts: guard.ForListen(o.Addr)}
		what := fmt.Sprintf("Prometheus metrics on http://%s/metrics", tl.Addr())
		if opts.Queries {
			what = fmt.Sprintf("answers on http://%s/v1/query?arg=progress and %s", tl.Addr(), what)
		}
		switch {
		case opts.Token != "":
			what += " (with Authorization: Bearer $GENDEX_TOKEN)"
		case opts.Queries:
			// The answers need a token: a random one, said once here.
			opts.Token = guard.NewToken()
			said := opts.Token
			if o.SayToken != nil {
				if said, err = o.SayToken(opts.Token); err != nil {
					tl.Close()
					cancel()
					wg.Wait()
					return nil, err
				}
			}
			what += " (with Authorization: Bearer " + said + "; set $GENDEX_TOKEN to choose it)"
		}
		fmt.Fprintf(o.Log, "serving %s\n", what)
		wg.Go(func() { srv.ServePublic(sctx, tl, opts) })
	}
	return func() { cancel(); wg.Wait() }, nil
}

// connCap is how many connections each of Serve's listeners (the socket,
// and the TCP port when tcp) holds, said in o.Log when the open-file
// limit makes it small.
func connCap(o Options, tcp bool) int {
	listeners, reserve := 1, o.Reserve
	if tcp {
		listeners++
	}
	if reserve <= 0 {
		reserve = guard.DefaultReserve
	}
	n, note := guard.ConnCap(listeners, reserve)
	if note != "" && o.Log != nil {
		fmt.Fprintln(o.Log, note)
	}
	return n
}
