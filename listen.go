package main

import (
	"flag"

	"gendex/query/guard"
	"gendex/query/live"
	"gendex/store"
	"gendex/store/prom"
)

// listenFlags are --listen and --listen-queries, the flags of gen and
// ingest --follow that become live.Serve's options.
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
		queries: fs.Bool("listen-queries", false, "with --listen: serve the answers there too (/v1/query: prompts, responses, file paths, missing ids), "+
			"every request with 'Authorization: Bearer TOKEN': $GENDEX_TOKEN, else a random token, printed at the start on a terminal, "+
			"else kept in <index>.listen.token, a file only you can read, its path printed at the start (the file is removed at the end)"),
	}
}

// serve serves db's socket and, with --listen, its TCP port
// (live.Serve), the token taken from $GENDEX_TOKEN and the log going to
// stderr, keeping the file descriptors of a writer with inFlight requests
// (0 for ingest) for it. A token it makes is said by tokenSay (off a
// terminal, in a file beside the index: <index>.listen.token), removed
// again by stop.
func (l listenFlags) serve(env *Env, db *store.DB, extra func(*prom.Writer), inFlight int) (stop func(), err error) {
	say := newTokenSay(env.StderrTTY, db.Path(), "listen")
	stopServe, err := live.Serve(db, live.Options{Addr: *l.addr, Queries: *l.queries, Token: env.Getenv("GENDEX_TOKEN"), SayToken: say.say,
		Log: env.Stderr, Extra: extra, Readers: checkReaders(), Reserve: writerReserve(inFlight)})
	if err != nil {
		return nil, err
	}
	return func() { stopServe(); say.remove() }, nil
}

// writerReserve is how many file descriptors a writer keeps for its own
// files, its listeners capped to leave them (guard.ConnCap): guard's
// default for the index, answer, record and prompt files, and three per
// request in flight (its connection to the server, one more the client
// keeps idle, and the built-in simulator's end of the first). gen at
// --concurrency 128 holds about 145 (measured: 128 connections, 16 files).
func writerReserve(inFlight int) int {
	return guard.DefaultReserve + 3*max(inFlight, 0)
}
