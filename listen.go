package main

import (
	"flag"

	"gendex/query/live"
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
			"every request with 'Authorization: Bearer TOKEN': $GENDEX_TOKEN, else a random token printed at the start"),
	}
}

// options returns live.Serve's options for the flags given, the token
// taken from $GENDEX_TOKEN and the log going to stderr.
func (l listenFlags) options(env *Env, extra func(*prom.Writer)) live.Options {
	return live.Options{Addr: *l.addr, Queries: *l.queries, Token: env.Getenv("GENDEX_TOKEN"), Log: env.Stderr, Extra: extra, Readers: checkReaders()}
}
