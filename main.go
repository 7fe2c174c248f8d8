// Command gendex runs synthetic-data generation against SGLang (and
// OpenAI-compatible servers), indexes every record of every stage into a
// bbolt file, and answers progress, token, missing-record and throughput
// questions instantly, while generation is still running.
//
// Usage:
//
//	gendex [--db FILE] COMMAND [ARGS]
//
// Commands:
//
//	gen --server URL [FLAGS] ROOT|DATASET_DIR...               generate every missing answer
//	sim --listen 127.0.0.1:PORT [FLAGS]                        an SGLang-compatible simulator
//	ingest [--follow] [--dataset NAME --stage STAGE] [--id PATH] PATH...   index JSONL files
//	query QUESTION [ARGS] [--format table|tsv|csv|json]        ask the index
//	help                                                       this text
//
// The database is ./gendex.db, or $GENDEX_DB, or --db FILE.
// Exit status: 0 ok, 1 error (or lines skipped), 2 usage, 130 interrupted.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"

	"gendex/ingest"
	"gendex/ingest/gen"
	"gendex/ingest/gen/sglang"
	"gendex/ingest/gen/sim"
	"gendex/query"
	"gendex/shell"
	"gendex/store"
)

func main() {
	env := &Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr,
		StdoutTTY: isTerminal(os.Stdout), StdinTTY: isTerminal(os.Stdin), StderrTTY: isTerminal(os.Stderr),
		Getenv: os.Getenv, Now: time.Now,
	}
	ctx, stop := context.Background(), func() {}
	if !(commandOf(os.Args[1:]) == "shell" && env.StdinTTY && env.StdoutTTY) {
		// The interactive shell handles Ctrl-C itself: it cancels the
		// running command, not the shell.
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	err := run(ctx, env, os.Args[1:])
	stop()
	os.Exit(exitCode(env.Stderr, err))
}

// commandOf returns the command word of a command line (after --db FILE).
func commandOf(args []string) string {
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--db" || a == "-db":
			i++
		case strings.HasPrefix(a, "-"):
		default:
			return a
		}
	}
	return ""
}

func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// Env is everything a command touches outside its arguments, so tests can
// run commands with buffers and a fixed clock.
type Env struct {
	Stdin                          io.Reader
	Stdout, Stderr                 io.Writer
	StdinTTY, StdoutTTY, StderrTTY bool
	Getenv                         func(string) string
	Now                            func() time.Time
}

// errUsage marks a usage error (exit 2); its message has been printed.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// errHelp: -h was asked for; the usage has been printed (exit 0).
var errHelp = errors.New("help")

// errSkipped: the command did its work but left input lines out (exit 1).
var errSkipped = errors.New("some lines were skipped")

func exitCode(stderr io.Writer, err error) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "gendex: %s\n", ue.msg)
		fmt.Fprintln(stderr, "Run 'gendex help' for usage.")
		return 2
	case errors.Is(err, query.ErrUsage):
		fmt.Fprintf(stderr, "gendex: %s\n", strings.TrimPrefix(err.Error(), "usage: "))
		return 2
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "gendex: interrupted")
		return 130
	case errors.Is(err, errSkipped):
		return 1
	}
	fmt.Fprintf(stderr, "gendex: %v\n", err)
	return 1
}

const usage = `gendex: generate synthetic datasets with an LLM server and ask about them instantly.

Usage:
  gendex [--db FILE] COMMAND [ARGS]

Commands:
  gen --server URL [FLAGS] ROOT|DATASET_DIR...
                                    answer every dataset's prompts with an SGLang (or OpenAI-compatible)
                                    server: each prompt exactly once, through crashes and restarts;
                                    --server sim runs against a built-in simulator (a dry run)
  sim --listen 127.0.0.1:PORT       an SGLang-compatible simulator, for dry runs and tests
  ingest [--follow] PATH...         index JSONL files: a dataset root (ROOT/<dataset>/*.jsonl),
                                    one dataset folder, or one file (with --dataset NAME --stage STAGE);
                                    --id PATH reads ids from a dotted path (question_id, meta.uid)
  query QUESTION [ARGS]             answer a question from the index, instantly:
%s
  shell                             ask the same questions interactively; watch a run live
  help                              show this text

Every command takes --db FILE (default ./gendex.db, or $GENDEX_DB).
Output is a table on a terminal and TSV with a header when piped; --format table|tsv|csv|json.
gen and ingest --follow take --listen HOST:PORT to serve Prometheus /metrics (--listen-queries: the
answers too); beyond loopback they need $GENDEX_TOKEN, which clients send as Authorization: Bearer.
`

func printUsage(w io.Writer) {
	var qs strings.Builder
	for _, q := range query.Questions {
		fmt.Fprintf(&qs, "      %-56s %s\n", q.Usage, q.Help)
	}
	fmt.Fprintf(w, usage, strings.TrimRight(qs.String(), "\n"))
}

func run(ctx context.Context, env *Env, args []string) error {
	global := flag.NewFlagSet("gendex", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	dbPath := global.String("db", "", "index file")
	if err := global.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(env.Stdout)
			return nil
		}
		return usagef("%v", err)
	}
	args = global.Args()
	if len(args) == 0 {
		printUsage(env.Stderr)
		return &usageError{"no command given"}
	}
	c := &command{env: env, db: *dbPath}
	cmd, args := args[0], args[1:]
	switch cmd {
	case "ingest":
		return c.ingest(ctx, args)
	case "query":
		return c.query(ctx, args)
	case "gen":
		return c.gen(ctx, args)
	case "sim":
		return c.sim(ctx, args)
	case "shell":
		return c.shell(ctx, args)
	case "help", "-h", "-help", "--help":
		printUsage(env.Stdout)
		return nil
	}
	return usagef("unknown command %q", cmd)
}

// command carries what every command shares.
type command struct {
	env *Env
	db  string // from the global --db
}

// flags returns a flag set with --db, for one command.
func (c *command) flags(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	db := fs.String("db", "", "index file")
	return fs, db
}

// dbPath picks the index file: the command's --db, the global --db,
// $GENDEX_DB, or ./gendex.db.
func (c *command) dbPath(flagValue string) string {
	switch {
	case flagValue != "":
		return flagValue
	case c.db != "":
		return c.db
	case c.env.Getenv("GENDEX_DB") != "":
		return c.env.Getenv("GENDEX_DB")
	}
	return "gendex.db"
}

// parse parses flags given anywhere among the positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	pos, err := query.ParseFlags(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return nil, errHelp
	case err != nil:
		return nil, usagef("%s: %v", fs.Name(), err)
	}
	return pos, nil
}

func (c *command) ingest(ctx context.Context, args []string) error {
	fs, dbFlag := c.flags("ingest")
	follow := fs.Bool("follow", false, "keep indexing new lines and files until interrupted")
	dataset := fs.String("dataset", "", "dataset name for a single file (default: its folder's name)")
	stageName := fs.String("stage", "", "stage for a single file: prompts, raw, tokenized or errors")
	idPath := fs.String("id", "", "where the lines keep their id: a dotted path such as question_id or meta.uid (remembered per file; a file indexed under another path is indexed again)")
	listen := addListenFlags(fs, "with --follow: ")
	paths, err := parse(fs, args)
	if errors.Is(err, errHelp) {
		printUsage(c.env.Stdout)
		return err
	}
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("ingest: give at least one PATH (a dataset root, a dataset folder or a file)")
	}
	var stage *store.Stage
	if *stageName != "" {
		st, err := store.ParseStage(*stageName)
		if err != nil {
			return usagef("ingest: %v", err)
		}
		stage = &st
	}
	if _, err := ingest.ParseIDPath(*idPath); err != nil {
		return usagef("ingest: --id: %v", err)
	}
	db, err := store.Open(c.dbPath(*dbFlag), store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	if (*listen.addr != "" || *listen.queries) && !*follow {
		return usagef("ingest: --listen goes with --follow")
	}
	stopLive, err := c.serveLive(ctx, db, listen, nil)
	if err != nil {
		return err
	}
	defer stopLive()

	rep := &ingest.Reporter{W: c.env.Stderr}
	ix := &ingest.Indexer{DB: db, Report: rep.Report}
	discover := func() ([]ingest.Source, error) {
		var all []ingest.Source
		for _, p := range paths {
			srcs, err := ingest.Discover(p, *dataset, stage)
			if err != nil {
				return nil, err
			}
			for i := range srcs {
				srcs[i].IDPath = *idPath
			}
			all = append(all, srcs...)
		}
		return all, nil
	}
	srcs, err := discover()
	if errors.Is(err, ingest.ErrStageNeedsFile) {
		return usagef("ingest: %v", err)
	}
	if err != nil {
		return err
	}
	if len(srcs) == 0 && !*follow {
		return fmt.Errorf("no prompts*, raw_responses*, tokenized* or errors* .jsonl files under %s", strings.Join(paths, ", "))
	}
	start := c.env.Now()
	var total ingest.FileResult
	files, unchanged := 0, 0
	for _, src := range srcs {
		res, err := ix.IndexFile(ctx, src)
		accumulate(&total, res)
		files++
		if res.Unchanged {
			unchanged++
		}
		if res.Torn > 0 && !*follow {
			rep.Report(ingest.Problem{Path: src.Path, Line: res.NextLine, Kind: ingest.Torn,
				Msg: fmt.Sprintf("last line has no newline (%d bytes); not indexed until it is completed (if the file is finished, add the newline: echo >> FILE)", res.Torn)})
		}
		if err != nil {
			return err
		}
	}
	elapsed := c.env.Now().Sub(start)
	fmt.Fprintf(c.env.Stderr, "indexed %d new records from %d files (%d unchanged, %s read) in %s\n",
		total.Added, files, unchanged, humanBytes(total.Bytes), elapsed.Round(time.Millisecond))
	if *follow {
		return c.follow(ctx, ix, rep, discover)
	}
	return ingestVerdict(c.env.Stderr, rep)
}

func accumulate(t *ingest.FileResult, r ingest.FileResult) {
	t.Added += r.Added
	t.Duplicates += r.Duplicates
	t.Skipped += r.Skipped
	t.Unknown += r.Unknown
	t.Bytes += r.Bytes
}

// ingestVerdict prints the problem summary and says whether lines were skipped.
func ingestVerdict(w io.Writer, rep *ingest.Reporter) error {
	if rep.Total() > 0 {
		fmt.Fprintln(w, "problems by file:")
		rep.Summary(w)
	}
	if n := rep.Skipped(); n > 0 {
		fmt.Fprintf(w, "gendex: %d lines were skipped (invalid JSON, no id, or beyond the index's limits); everything else is indexed\n", n)
		return errSkipped
	}
	if n := rep.Count(ingest.Torn); n > 0 {
		fmt.Fprintf(w, "gendex: %d files end in a line without a newline, not indexed yet; everything else is indexed\n", n)
		return errSkipped
	}
	return nil
}

// follow keeps indexing until ctx is done: changed files every 200 ms,
// new datasets and files every second.
func (c *command) follow(ctx context.Context, ix *ingest.Indexer, rep *ingest.Reporter, discover func() ([]ingest.Source, error)) error {
	fmt.Fprintln(c.env.Stderr, "following; Ctrl-C to stop")
	var srcs []ingest.Source
	lastDiscover := time.Time{}
	lastLog := c.env.Now()
	var added int
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if time.Since(lastDiscover) >= time.Second {
			s, err := discover()
			if err != nil {
				fmt.Fprintf(c.env.Stderr, "warning: %v\n", err)
			} else {
				srcs = s
			}
			lastDiscover = time.Now()
		}
		for _, src := range srcs {
			res, err := ix.IndexFile(ctx, src)
			added += res.Added
			if err != nil && ctx.Err() == nil {
				fmt.Fprintf(c.env.Stderr, "warning: %v\n", err)
			}
		}
		if now := c.env.Now(); added > 0 && now.Sub(lastLog) >= 10*time.Second {
			fmt.Fprintf(c.env.Stderr, "%s indexed %d new records\n", now.Format(time.TimeOnly), added)
			added, lastLog = 0, now
		}
		select {
		case <-ctx.Done():
			if added > 0 {
				fmt.Fprintf(c.env.Stderr, "indexed %d new records\n", added)
			}
			ingestVerdict(c.env.Stderr, rep)
			return nil
		case <-tick.C:
		}
	}
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func (c *command) query(ctx context.Context, args []string) error {
	var dbFlag string
	rest := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ { // --db is the command's; the rest is the question's
		a := args[i]
		switch {
		case a == "--db" || a == "-db":
			if i+1 >= len(args) {
				return usagef("query: --db needs a file")
			}
			dbFlag = args[i+1]
			i++
		case strings.HasPrefix(a, "--db=") || strings.HasPrefix(a, "-db="):
			dbFlag = a[strings.Index(a, "=")+1:]
		default:
			rest = append(rest, a)
		}
	}
	q, err := query.Parse(rest)
	if err != nil {
		return err
	}
	q.Resolve(c.env.StdoutTTY)
	path := c.dbPath(dbFlag)
	out := query.NewWriter(c.env.Stdout, query.Options{Format: q.Format, NoHeader: q.NoHeader})
	asker := newPathAsker(path)
	defer asker.Close()
	if err := asker.Ask(ctx, q, c.env.Now(), out); err != nil {
		return err
	}
	return out.Close()
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

func (c *command) shell(ctx context.Context, args []string) error {
	fs, dbFlag := c.flags("shell")
	if rest, err := parse(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			fmt.Fprintln(c.env.Stdout, "usage: gendex shell [--db FILE]   (then type help)")
		}
		return err
	} else if len(rest) > 0 {
		return usagef("shell takes no arguments (commands come on its input)")
	}
	asker := newPathAsker(c.dbPath(*dbFlag))
	defer asker.Close()
	sh := &shell.Shell{
		Ask: asker, In: c.env.Stdin, Out: c.env.Stdout, Err: c.env.Stderr,
		Interactive: c.env.StdinTTY && c.env.StdoutTTY, Now: c.env.Now,
		HistoryPath: shell.HistoryPath(c.env.Getenv),
	}
	return sh.Run(ctx)
}

// listenFlags are --listen and --listen-queries, for gen and ingest --follow.
type listenFlags struct {
	addr    *string
	queries *bool
}

func addListenFlags(fs *flag.FlagSet, prefix string) listenFlags {
	return listenFlags{
		addr: fs.String("listen", "", prefix+"also serve Prometheus /metrics over HTTP on HOST:PORT (loopback when HOST is empty); "+
			"beyond loopback it needs $GENDEX_TOKEN, sent by clients as 'Authorization: Bearer TOKEN'"),
		queries: fs.Bool("listen-queries", false, "with --listen: serve the answers there too (/v1/query: prompts, responses, file paths, missing ids)"),
	}
}

// serveLive serves questions about db on its socket and, when l.addr is
// given, /metrics (and the answers, with --listen-queries) on that TCP
// address, while the calling command writes db. A TCP address beyond
// loopback is refused unless $GENDEX_TOKEN is set; when it is set, every
// TCP request must carry it.
func (c *command) serveLive(ctx context.Context, db *store.DB, l listenFlags, extra func(io.Writer)) (stop func(), err error) {
	srv := &query.Server{Src: db, Extra: extra}
	var tl net.Listener
	if *l.addr != "" {
		host, port, err := net.SplitHostPort(*l.addr)
		if err != nil {
			return nil, usagef("--listen %q: want HOST:PORT or :PORT", *l.addr)
		}
		if host == "" {
			host = "127.0.0.1" // loopback unless asked otherwise
		}
		if tl, err = net.Listen("tcp", net.JoinHostPort(host, port)); err != nil {
			return nil, err
		}
		token := c.env.Getenv("GENDEX_TOKEN")
		if addr, ok := tl.Addr().(*net.TCPAddr); token == "" && (!ok || !addr.IP.IsLoopback()) {
			tl.Close()
			return nil, usagef("--listen %s is reachable from other machines: set GENDEX_TOKEN to a secret (clients send 'Authorization: Bearer $GENDEX_TOKEN'), or listen on 127.0.0.1", *l.addr)
		}
	} else if *l.queries {
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
		opts := query.PublicOptions{Queries: *l.queries, Token: c.env.Getenv("GENDEX_TOKEN")}
		what := fmt.Sprintf("Prometheus metrics on http://%s/metrics", tl.Addr())
		if opts.Queries {
			what = fmt.Sprintf("answers on http://%s/v1/query?arg=progress and %s", tl.Addr(), what)
		}
		if opts.Token != "" {
			what += " (with Authorization: Bearer $GENDEX_TOKEN)"
		}
		fmt.Fprintf(c.env.Stderr, "serving %s\n", what)
		wg.Go(func() { srv.ServePublic(sctx, tl, opts) })
	}
	return func() { cancel(); wg.Wait() }, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func (c *command) gen(ctx context.Context, args []string) error {
	fs, dbFlag := c.flags("gen")
	var servers stringList
	fs.Var(&servers, "server", "server URL (repeatable), or sim for the built-in simulator")
	api := fs.String("api", "generate", "generate (SGLang /generate), chat or completions (OpenAI-compatible)")
	concurrency := fs.Int("concurrency", 128, "requests in flight")
	out := fs.String("out", "", "write DIR/<dataset>/raw_responses.jsonl instead of beside the prompts")
	waitReady := fs.Duration("wait-ready", 30*time.Minute, "how long to wait for the servers to load and warm up")
	retryErrors := fs.Bool("retry-errors", false, "send again the prompts whose last outcome was an error")
	apiKey := fs.String("api-key", "", "API key sent as a Bearer token (default $SGLANG_API_KEY); other users see it in ps: prefer --api-key-file or $SGLANG_API_KEY")
	apiKeyFile := fs.String("api-key-file", "", "read the API key from this file (a trailing newline is trimmed)")
	model := fs.String("model", "", "model name for the OpenAI-compatible endpoints")
	grace := fs.Duration("grace", 15*time.Second, "after an interrupt, how long to wait for the answers in flight")
	requestTimeout := fs.Duration("request-timeout", time.Hour, "give one attempt this long to answer (0: no limit); running out counts toward --max-attempts")
	maxAttempts := fs.Int("max-attempts", 20, "failed attempts (429, 5xx, aborts, timeouts, lost connections) one prompt may get before it is recorded as an error")
	maxCrashes := fs.Int("max-crashes", 3, "times a server may go down with one prompt in flight before that prompt is recorded as an error")
	listen := addListenFlags(fs, "")
	sp, err := samplingFlags(fs)
	if err != nil {
		return err
	}
	simCfg := simFlags(fs, "sim-")
	paths, err := parse(fs, args)
	if errors.Is(err, errHelp) {
		fmt.Fprintln(c.env.Stdout, "usage: gendex gen --server URL [--server URL]... [flags] ROOT|DATASET_DIR...")
		fs.SetOutput(c.env.Stdout)
		fs.PrintDefaults()
		return err
	}
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return usagef("gen: give at least one ROOT or DATASET_DIR holding prompts*.jsonl")
	}
	if len(servers) == 0 {
		return usagef("gen: give at least one --server URL (or --server sim for a dry run)")
	}
	cfg := gen.Config{
		API: sglang.API(*api), Concurrency: *concurrency, Out: *out, WaitReady: *waitReady,
		RetryErrors: *retryErrors, APIKey: *apiKey, Model: *model, Grace: *grace, MaxAttempts: *maxAttempts,
		MaxCrashes: *maxCrashes, RequestTimeout: *requestTimeout,
		Sampling: *sp, Log: c.env.Stderr, Terminal: c.env.StderrTTY,
	}
	switch cfg.API {
	case sglang.APIGenerate, sglang.APIChat, sglang.APICompletions:
	default:
		return usagef("gen: --api %q: want generate, chat or completions", *api)
	}
	switch {
	case *apiKeyFile != "" && cfg.APIKey != "":
		return usagef("gen: give --api-key or --api-key-file, not both")
	case *apiKeyFile != "":
		if cfg.APIKey, err = readAPIKey(*apiKeyFile); err != nil {
			return err
		}
	case cfg.APIKey == "":
		cfg.APIKey = c.env.Getenv("SGLANG_API_KEY")
	}
	if err := cfg.Sampling.Validate(); err != nil {
		return usagef("gen: %v", err)
	}
	sets, err := gen.FindDatasets(paths, *out)
	if err != nil {
		return err
	}
	for _, s := range servers {
		if s != "sim" {
			cfg.Servers = append(cfg.Servers, s)
			continue
		}
		url, stop, err := startSim(ctx, *simCfg)
		if err != nil {
			return err
		}
		defer stop()
		fmt.Fprintf(c.env.Stderr, "gen: --server sim: a built-in SGLang simulator at %s (deterministic answers; no GPU)\n", url)
		cfg.Servers = append(cfg.Servers, url)
	}
	db, err := store.Open(c.dbPath(*dbFlag), store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	var metrics atomic.Pointer[func(io.Writer)]
	cfg.OnMetrics = func(f func(io.Writer)) { metrics.Store(&f) }
	stopLive, err := c.serveLive(ctx, db, listen, func(w io.Writer) {
		if f := metrics.Load(); f != nil {
			(*f)(w)
		}
	})
	if err != nil {
		return err
	}
	defer stopLive()
	// A second interrupt quits at once: what is written is fsynced and the
	// index catches up from the files on the next start.
	go func() {
		<-ctx.Done()
		again := make(chan os.Signal, 1)
		signal.Notify(again, os.Interrupt, syscall.SIGTERM)
		<-again
		fmt.Fprintln(c.env.Stderr, "gendex: interrupted twice: quitting now")
		os.Exit(130)
	}()
	_, err = gen.Run(ctx, db, cfg, sets)
	return err
}

// readAPIKey returns the API key held in path, without its trailing
// newline.
func readAPIKey(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("gen: --api-key-file: %w (give a readable file holding the API key)", err)
	}
	key := strings.TrimRight(string(b), "\r\n")
	if strings.TrimSpace(key) == "" {
		return "", fmt.Errorf("gen: --api-key-file %s is empty: put the server's API key in it", path)
	}
	return key, nil
}

// samplingFlags declares the sampling flags, named as SGLang names them.
// Only the flags given are sent, except max_new_tokens, which is always
// sent (SGLang's /generate default of 128 made explicit).
func samplingFlags(fs *flag.FlagSet) (*sglang.SamplingParams, error) {
	sp := &sglang.SamplingParams{}
	maxNew := 128
	sp.MaxNewTokens = &maxNew
	intFlag := func(name, usage string, dst **int) {
		fs.Func(name, usage, func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("want an integer")
			}
			*dst = &n
			return nil
		})
	}
	floatFlag := func(name, usage string, dst **float64) {
		fs.Func(name, usage, func(v string) error {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return fmt.Errorf("want a number")
			}
			*dst = &f
			return nil
		})
	}
	boolFlag := func(name, usage string, dst **bool) {
		fs.BoolFunc(name, usage, func(v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false")
			}
			*dst = &b
			return nil
		})
	}
	intFlag("max-new-tokens", "tokens to generate at most (default 128; clipped so prompt + max-new-tokens stays 16 below the context length)", &sp.MaxNewTokens)
	intFlag("min-new-tokens", "tokens to generate at least (server default 0)", &sp.MinNewTokens)
	floatFlag("temperature", "sampling temperature (server default 1.0; 0 is greedy)", &sp.Temperature)
	floatFlag("top-p", "nucleus sampling (server default 1.0)", &sp.TopP)
	intFlag("top-k", "top-k sampling (server default -1: all)", &sp.TopK)
	floatFlag("min-p", "min-p sampling (server default 0)", &sp.MinP)
	floatFlag("frequency-penalty", "server default 0", &sp.FrequencyPenalty)
	floatFlag("presence-penalty", "server default 0", &sp.PresencePenalty)
	floatFlag("repetition-penalty", "server default 1.0", &sp.RepetitionPenalty)
	boolFlag("ignore-eos", "keep generating past EOS (server default false)", &sp.IgnoreEOS)
	boolFlag("skip-special-tokens", "leave special tokens out of text (server default true)", &sp.SkipSpecialTokens)
	boolFlag("no-stop-trim", "keep the stop string in text (server default false)", &sp.NoStopTrim)
	fs.Func("stop", "stop string (repeatable)", func(v string) error { sp.Stop = append(sp.Stop, v); return nil })
	fs.Func("stop-token-ids", "comma-separated token ids that stop generation", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("want comma-separated integers")
			}
			sp.StopTokenIDs = append(sp.StopTokenIDs, n)
		}
		return nil
	})
	fs.Func("seed", "sampling_seed", func(v string) error {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return fmt.Errorf("want an integer")
		}
		sp.SamplingSeed = &n
		return nil
	})
	return sp, nil
}

// simFlags declares the simulator's settings under prefix.
func simFlags(fs *flag.FlagSet, prefix string) *sim.Config {
	cfg := &sim.Config{}
	fs.StringVar(&cfg.Model, prefix+"model", sim.DefaultModel, "simulator: served model name")
	fs.IntVar(&cfg.ContextLength, prefix+"context", sim.DefaultContextLength, "simulator: context length")
	fs.IntVar(&cfg.Slots, prefix+"slots", sim.DefaultSlots, "simulator: requests decoding at once (--max-running-requests)")
	fs.Float64Var(&cfg.DecodeTokensPerSec, prefix+"decode-tps", 0, "simulator: decode tokens/s per request (0: instant)")
	fs.Float64Var(&cfg.PrefillTokensPerSec, prefix+"prefill-tps", 0, "simulator: prefill tokens/s per request (0: instant)")
	fs.DurationVar(&cfg.StartupDelay, prefix+"startup-delay", 0, "simulator: refuse connections this long (model loading)")
	fs.DurationVar(&cfg.Warmup, prefix+"warmup", 0, "simulator: answer 503 this long after binding (warmup)")
	fs.Float64Var(&cfg.ErrorRate, prefix+"error-rate", 0, "simulator: fraction of requests answered 500/503")
	fs.Float64Var(&cfg.ResetRate, prefix+"reset-rate", 0, "simulator: fraction of connections reset")
	fs.Float64Var(&cfg.AbortRate, prefix+"abort-rate", 0, "simulator: fraction of requests aborted (200, finish_reason abort)")
	fs.IntVar(&cfg.CrashAfter, prefix+"crash-after", 0, "simulator: crash after this many answers (0: never)")
	fs.StringVar(&cfg.CrashOn, prefix+"crash-on", "", "simulator: crash when a request's prompt holds this text (a prompt that kills the server)")
	fs.Int64Var(&cfg.Seed, prefix+"seed", 0, "simulator: seed for answers and faults")
	fs.StringVar(&cfg.APIKey, prefix+"api-key", "", "simulator: require this API key")
	fs.BoolVar(&cfg.ReasoningParser, prefix+"reasoning", false, "simulator: a reasoning model (reasoning_content, reasoning_tokens)")
	fs.BoolVar(&cfg.EnableMetrics, prefix+"metrics", false, "simulator: serve /metrics")
	return cfg
}

// startSim runs a simulator on a loopback port in this process.
func startSim(ctx context.Context, cfg sim.Config) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := sim.New(cfg)
	done := make(chan struct{})
	go func() { s.Serve(sctx, ln); close(done) }()
	return "http://" + ln.Addr().String(), func() { cancel(); <-done }, nil
}

func (c *command) sim(ctx context.Context, args []string) error {
	fs, _ := c.flags("sim")
	listen := fs.String("listen", "127.0.0.1:30000", "address to listen on")
	cfg := simFlags(fs, "")
	if _, err := parse(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			fmt.Fprintln(c.env.Stdout, "usage: gendex sim --listen 127.0.0.1:PORT [flags]")
			fs.SetOutput(c.env.Stdout)
			fs.PrintDefaults()
		}
		return err
	}
	s := sim.New(*cfg)
	fmt.Fprintf(c.env.Stderr, "gendex sim: an SGLang-compatible simulator on http://%s (model %s, %d slots); Ctrl-C to stop\n", *listen, cfg.Model, cfg.Slots)
	err := s.ListenAndServe(ctx, *listen)
	if ctx.Err() != nil {
		st := s.Stats()
		fmt.Fprintf(c.env.Stderr, "gendex sim: %d requests, %d completed, %d generated tokens\n", st.Requests, st.Completed, st.GeneratedTokens)
		return nil
	}
	return err
}
