package gen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"gendex/ingest"
	"gendex/ingest/export"
	"gendex/ingest/gen/client"
	"gendex/store"
	"gendex/store/prom"
)

// Config is one gen run.
type Config struct {
	Servers     []string
	API         client.API // default APIAuto: the route each server offers (Flavor.API)
	Concurrency int        // requests in flight at most over all servers, a hard bound (a crash suspect's retry takes one too; see MaxCrashes); 0: adaptive, each server kept at its own capacity (limit.go), within InFlightBound
	Sampling    client.SamplingParams
	Mix         Mix // --mix: keys drawn per record (mix.go)
	Samples     int // --samples: answers per prompt, each its own unit (samples.go); 0 or 1: one
	APIKey      string
	Model       string // "model" for the OpenAI-compatible endpoints
	// Out, when set, holds the output: Out/<dataset>/raw_responses.jsonl.
	// Otherwise the output goes beside the prompts.
	Out string
	// WaitReady bounds the wait for the servers before the first request.
	WaitReady time.Duration
	// RetryErrors sends again the prompts whose last outcome was an error.
	RetryErrors bool
	// Turns is TurnsAll (the default) or TurnsLast: how a chat prompt of
	// k >= 2 user turns is asked (see TurnsAll).
	Turns string
	// MaxAttempts bounds the failed attempts one prompt gets before it is
	// recorded as an error: HTTP errors (408, 429, 5xx, aborts), timeouts
	// (RequestTimeout) and connections lost while the server stays up. A
	// server that refuses connections is waited for without limit; one that
	// goes down with the prompt in flight counts toward MaxCrashes. Default
	// 20.
	MaxAttempts int
	// MaxCrashes bounds the times a server may go down while one prompt
	// is in flight (the request got no answer and /health then fails) before
	// that prompt is recorded as an error: a prompt that crashes the server
	// (out of memory) is not resent after every restart. A prompt that was
	// in flight in a crash is sent again with the others; one in flight at
	// a second crash is retried alone among such suspects (within
	// Concurrency), so the others in flight with it are not blamed for it
	// (isolate.go). A refused connection
	// (the request never reached the server) counts toward nothing and is
	// waited out; a connection failure while the server stays up counts
	// toward MaxAttempts. Default 3.
	MaxCrashes int
	// RequestTimeout bounds one attempt (0: no bound). An attempt that runs
	// out counts as an HTTP error toward MaxAttempts.
	RequestTimeout time.Duration
	StallAfter     time.Duration // a server with requests in flight and no reply this long is stalled (stall.go); default DefaultStallAfter
	Command        string        // the command line, secrets left out, for the run's row (runstate.go, `gendex query runs`)
	// ProbeEvery is how often a server with requests in flight and no
	// reply for this long is probed, and stalled after probeFailures
	// probes in a row it answers none of (probe.go); default
	// DefaultProbeEvery.
	ProbeEvery time.Duration
	// Grace is how long an interrupt waits for the requests in flight.
	Grace time.Duration
	// DownLimit ends the run (ErrServersDown) when every server has been
	// down this long after the first was ready: in a cluster task nothing
	// restarts the server, and the node should not idle until the job's
	// time limit. Default 10 minutes; below 0, no bound.
	DownLimit time.Duration
	// FlushEvery is the longest a response waits before it is written,
	// fsynced and indexed. Default 100 ms.
	FlushEvery time.Duration
	Backoff    client.Backoff
	// HTTP, when set, is used for every request (tests); otherwise one
	// transport sized for Concurrency is built.
	HTTP *http.Client
	// Log receives progress and diagnostics; Terminal makes progress a set
	// of live lines instead of a log line every LogEvery (default 10 s).
	Log      io.Writer
	Terminal bool
	LogEvery time.Duration
	// OnMetrics, when set, is given a function that writes gen's own
	// Prometheus samples (requests in flight, servers up) once the servers
	// are known.
	OnMetrics func(func(*prom.Writer))
	// OnQuit, when set, is given at the run's start a function that
	// records the run at once as interrupted, without waiting for what is
	// in flight: for a process about to exit (a second Ctrl-C).
	OnQuit func(quitNow func())
	// ScrapeEvery is how often each server's /metrics is read into the
	// index (scrape.go); 0 means DefaultScrapeEvery, negative never.
	ScrapeEvery time.Duration
	// Export, when set, makes the training records while answers arrive
	// (gen --export; exportrun.go): each answer's record or exclusion is
	// written to tokenized.jsonl or excluded.jsonl beside its raw line, in
	// the same flush, after it. Its Tokenizer and Logf are gen's own.
	Export         *export.Config
	ToolCallParser string // /parse_function_call's parser for /generate (tools.go)
	// Shard, when set, is the part of every dataset this run answers:
	// the prompts whose id hashes to it (store.ShardOf), written to files
	// of its own (FindShardDatasets); the index holds only its prompts.
	Shard store.Shard
	// Redo, when set, asks again answers the index holds (redo.go).
	Redo *Redo
	// RedoUpfront is the most answers (of the run's datasets together) a
	// --redo truncated decides before its first request; above it, each
	// is decided as the feeder reads its prompt (redofeed.go). Default
	// 50,000.
	RedoUpfront uint64
	// Simulator says every server is the built-in simulator (--server
	// sim), so a run with nothing to do need not connect to learn it.
	Simulator bool
	// AllowMixed lets a run answer a dataset whose answers were made with
	// other sampling or by another server identity (--allow-mixed).
	AllowMixed bool
	Paths      PromptPaths // where the prompt lines keep their id and prompt (--id, --prompt)

	adaptive bool // Concurrency was 0 (defaults)
}

// InFlightBound is the most requests in flight a run of c keeps:
// Concurrency, or when it is 0 (adaptive) AdaptiveBound.
func (c *Config) InFlightBound() int {
	if c.Concurrency > 0 {
		return c.Concurrency
	}
	return AdaptiveBound()
}

func (c *Config) defaults() {
	if c.Turns == "" {
		c.Turns = TurnsAll
	}
	if c.API == "" {
		c.API = client.APIAuto
	}
	if c.Concurrency <= 0 {
		c.adaptive, c.Concurrency = true, AdaptiveBound()
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 20
	}
	if c.MaxCrashes <= 0 {
		c.MaxCrashes = 3
	}
	if c.StallAfter <= 0 {
		c.StallAfter = DefaultStallAfter
	}
	if c.ProbeEvery <= 0 {
		c.ProbeEvery = DefaultProbeEvery
	}
	if c.Grace <= 0 {
		c.Grace = 15 * time.Second
	}
	if c.DownLimit == 0 {
		c.DownLimit = 10 * time.Minute
	}
	if c.FlushEvery <= 0 {
		c.FlushEvery = 100 * time.Millisecond
	}
	if c.WaitReady <= 0 {
		c.WaitReady = 30 * time.Minute
	}
	if c.RedoUpfront == 0 {
		c.RedoUpfront = 50_000
	}
	if c.LogEvery <= 0 {
		c.LogEvery = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// run is one Run's state.
type run struct {
	givenUp atomic.Int64 // requests in flight when an interrupt's grace ended
	cfg     Config
	db      *store.DB
	rep     *ingest.Reporter
	sets    []*dsRun

	jobs    chan job
	results chan result
	asker   *asker         // a job in, a result out: the servers, retries, crash suspects (worker.go)
	talk    *conversations // turn by turn chats and tool steps (turns.go, toolturns.go)

	ctl  *control     // the log and the stops, shared by every part (control.go)
	live *liveLog     // the log, on a terminal (newRun); the progress lines draw on it
	feed *feeder      // prompt lines into jobs (feed.go)
	redo *redoChooser // --redo's choice (redo.go)
	mon  *monitor     // the run's state in the index: metrics, events, its row, stalls (scrape.go)
	prog *progress    // the progress lines and the summary (progress.go)
	wr   *writer      // the answer files, the index, the records, the provenance (writer.go)
}

// dsRun is one dataset's state in a run, shared by the parts: each group
// of fields is written by the part it names (the others only read it).
type dsRun struct {
	Dataset

	// The writer's (writer.go, reconcile.go, place.go, provenance.go):
	// the output files and their sources, the counts of what this run
	// wrote, the index's files once reconciled (held: all in its place,
	// settlePlaces) and who made the answers (makers).
	raw, errs, turns ingest.Source
	rawFile          *os.File
	errFile          *os.File
	turnsFile        *os.File
	exp              exportOut // gen --export's outputs and counts
	ok, failed       atomic.Int64
	tokens           atomic.Int64
	unknown          atomic.Int64 // answers without a token count
	rate             rateWindow
	held             []store.FileState
	makers           makerCounts
	todo             int64 // the units to send at the start (reconcile; prepare adds the redo chooser's)
	samples          int   // the run's answers per prompt (Config.samples)
	// idRule is where its prompts keep their id (--id, else the path the
	// index remembers, else builtinIDRule), in its answers' provenance;
	// provs its server provenances with it (provenanceOf).
	idRule string
	provMu sync.Mutex
	provs  map[string][]byte
	// turnsDone counts the turn lines this run wrote; halfDone the
	// conversations with turns recorded but neither their last turn nor a
	// final error (counted from the index at the start, then kept).
	turnsDone, halfDone atomic.Int64

	// The feeder's (feed.go, promptshape.go, promptrule.go): the prompts
	// files' lines and shapes as read, whether its feeding ended (fed),
	// whether its first prompt has tools (sampleTools), and the prompt
	// rule this run's answers record (promptClash: why it is not the
	// earlier one's extended).
	shapes                  [numShapes]bool
	scan                    *promptScan
	fed                     atomic.Bool
	tools                   bool
	promptRule, promptClash string

	// The redo chooser's (redo.go): what --redo asks again (nil without).
	redo *redoSet
}

type job struct {
	ds *dsRun
	p  *Prompt
	// redo marks a prompt answered before and asked again (--redo).
	redo bool
	tries
	// conv is the state of a conversation asked turn by turn (--turns
	// all, k >= 2); nil for one request.
	conv *conv
	tc   *toolConv // a tool conversation, asked step by step (toolturns.go)
}

// tries is what one prompt went through in this run.
type tries struct {
	attempts     int  // requests sent
	serverErrors int  // HTTP errors and timeouts, toward MaxAttempts
	crashes      int  // the server went away with it in flight, toward MaxCrashes
	suspect      bool // retried alone among suspects (see MaxCrashes)
}

// lineKind says which file a result's line goes to.
type lineKind uint8

const (
	rawLine  lineKind = iota // raw_responses.jsonl: an answer, or a whole conversation
	turnLine                 // turns.jsonl: an earlier turn of a conversation
	errLine                  // errors.jsonl: a final error
)

type result struct {
	ds   *dsRun
	line []byte
	kind lineKind
	// tokens are the completion tokens of the answer this result brings
	// (a conversation's: its last turn's), 0 when unknown; unknown marks a
	// raw line without a completion count (a conversation's: any turn
	// without one).
	tokens  int64
	unknown bool
	// opens marks the first turn line of a conversation not yet counted
	// as half done; closes the last line of one that is.
	opens, closes bool
	// exp is a raw line's training record or exclusion under --export.
	exp export.Decision
	// truncated marks a raw line whose finish_reason is length; redo one
	// that replaces an earlier answer (--redo); ownLimit a truncated one
	// whose prompt line set its own max_new_tokens (the run's was not it).
	truncated, redo, ownLimit bool
}

// Run generates every dataset's missing answers. It returns ctx.Err() when
// interrupted (after the grace period and a final flush), or the first
// fatal error (an unusable server, a full disk); answers written before
// either are indexed and kept.
func Run(ctx context.Context, db *store.DB, cfg Config, datasets []Dataset) (sum *Summary, err error) {
	cfg.defaults()
	if len(cfg.Servers) == 0 {
		return nil, errors.New("no --server given")
	}
	r := newRun(db, cfg)
	stop, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	r.ctl.stop, r.ctl.fail = stop, fail
	reqs, cancelReqs := context.WithCancel(context.Background())
	defer cancelReqs()
	r.ctl.reqs, r.ctl.cancelReqs = reqs, cancelReqs

	var opened []*dsRun
	defer func() {
		for i := len(opened) - 1; i >= 0; i-- {
			opened[i].close()
		}
	}()
	todo, err := r.prepare(ctx, datasets, &opened)
	if err != nil {
		return nil, r.asker.refused(err)
	}
	if todo == 0 && !r.redo.choosing() {
		sum, err := r.nothingToDo()
		return sum, r.asker.refused(err)
	}
	r.mon = newMonitor(r.ctl, &r.cfg, r.db, r.sets, r.asker.restartSeen)
	r.mon.begin(r.redo.todoText(todo), r.settings())
	r.asker.mon = r.mon
	r.asker.aborts.noted = r.mon.bursts.givenUp // an event a burst (abort.go)
	defer func() {
		err = r.asker.refused(err)
		r.mon.end(sum, err)
	}()
	r.feed.feedEarly(todo) // a large redo with nothing left ends without a server (earlyfeed.go)
	if err := r.asker.connect(); err != nil {
		return r.notConnected(err)
	}
	r.asker.sayIDsPrompts(r.sets)
	r.prog = &progress{ctl: r.ctl, cfg: &r.cfg, db: r.db, sets: r.sets, live: r.live, pool: r.asker.pool, mon: r.mon, iso: &r.asker.iso,
		rep: r.rep, toolStops: &r.talk.stops, owed: r.redo.sayOwed}
	go r.asker.boundDown()
	werr := r.generate(ctx)
	if werr == nil && r.feed.fedNothing() { // a server was up first: said the same way (earlyfeed.go)
		return r.notConnected(errNothingFed)
	}

	sum = &Summary{Elapsed: time.Since(r.ctl.started), GivenUp: r.givenUp.Load(), Interrupted: ctx.Err() != nil,
		AbortedOnServer: r.asker.aborts.onServer.Load(), ClosedOnly: r.asker.aborts.closed.Load()}
	for _, ds := range r.sets {
		sum.Responses += ds.ok.Load()
		sum.Errors += ds.failed.Load()
		sum.Turns += ds.turnsDone.Load()
		sum.Tokens += ds.tokens.Load()
		sum.UnknownTokens += ds.unknown.Load()
	}
	r.wr.addExport(sum)
	r.prog.final(sum)
	if werr != nil {
		return sum, werr
	}
	if cause := context.Cause(r.ctl.stop); cause != nil {
		return sum, cause
	}
	return sum, r.feed.leftUnsent(sum)
}

// newRun makes a run of cfg (its defaults set) over db, its log and
// indexer ready.
func newRun(db *store.DB, cfg Config) *run {
	r := &run{cfg: cfg, db: db, ctl: &control{started: time.Now()}}
	if cfg.Terminal {
		r.live = &liveLog{w: cfg.Log}
		r.cfg.Log = r.live
	} else {
		r.cfg.Log = &syncWriter{w: cfg.Log} // the scrapers log from their own goroutines
	}
	r.ctl.log = r.cfg.Log
	r.rep = &ingest.Reporter{W: r.cfg.Log}
	r.wr = &writer{ctl: r.ctl, cfg: &r.cfg, db: db, ix: &ingest.Indexer{DB: db, Report: r.rep.Report}}
	r.jobs = make(chan job, cfg.Concurrency)
	r.results = make(chan result, cfg.Concurrency)
	r.redo = &redoChooser{ctl: r.ctl, cfg: &r.cfg, db: db}
	r.asker = &asker{ctl: r.ctl, cfg: &r.cfg, redoLine: r.redo.redoLine, askedOf: r.wr.askedOf,
		checkServerKind: r.wr.checkServerKind, checkProvenance: r.wr.checkProvenance}
	r.asker.aborts.ctl = r.ctl
	r.talk = &conversations{ctl: r.ctl, cfg: &r.cfg, db: db, ask: r.asker, redoLine: r.redo.redoLine, keepTurn: r.redo.keepTurn}
	r.asker.talk = r.talk
	r.wr.halfDone = r.talk.countHalfDone
	r.feed = &feeder{ctl: r.ctl, cfg: &r.cfg, db: db, redo: r.redo, convs: r.talk, jobs: r.jobs, results: r.results, prompts: &r.asker.prompts}
	r.asker.nothingFed = r.feed.nothingFed
	return r
}

// prepare decides what is left to answer in datasets, each dataset's
// files indexed and reconciled (the datasets it opened are added to
// opened, for the caller to close), the records of earlier answers
// exported under --export, and says it; it returns the prompts to ask.
func (r *run) prepare(ctx context.Context, datasets []Dataset, opened *[]*dsRun) (int64, error) {
	cfg := &r.cfg
	scans, err := r.feed.scanPrompts(datasets) // before the index changes: a path that reads nothing stops here
	if err != nil {
		return 0, err
	}
	// The index believes only what the disk holds: counted files that are
	// gone or changed are forgotten, moved ones found, before anything is
	// decided.
	if err := r.wr.ix.CheckDisk(ctx, sourcesOf(datasets)); err != nil {
		return 0, err
	}
	if err := r.wr.settlePlaces(datasets); err != nil {
		return 0, err
	}
	if err := claimShards(datasets, cfg.Shard); err != nil {
		return 0, err
	}
	if err := r.feed.checkIDRule(datasets); err != nil { // before the prompts are indexed under it
		return 0, err
	}
	for _, d := range datasets {
		ds, err := r.wr.reconcile(d)
		if ds != nil {
			*opened = append(*opened, ds)
		}
		if err != nil {
			return 0, err
		}
		r.sets = append(r.sets, ds)
		if cfg.Export != nil {
			if err := export.CheckFormat(ds.Tokenized, cfg.Export.Format); err != nil {
				return 0, err
			}
		}
	}
	r.wr.ix.SayForgotten()                                       // the files read: how many prompts a gone file leaves unanswered
	r.wr.sets, r.feed.sets, r.redo.sets = r.sets, r.sets, r.sets // the datasets opened: the parts' from here
	if err := r.wr.countAnswerMakers(); err != nil {
		return 0, err
	}
	if err := r.feed.choosePromptRules(); err != nil {
		return 0, err
	}
	if err := r.redo.chooseRedo(); err != nil {
		return 0, err
	}
	r.asker.shapes = readShapes(r.sets, scans)
	r.asker.tools = sampleTools(r.sets)
	if cfg.Export != nil { // the records of earlier answers first (exportrun.go)
		tok := r.wr.firstServer()
		for _, ds := range r.sets {
			if err := r.wr.catchUp(r.ctl.stop, ds, tok); err != nil {
				return 0, err
			}
		}
	}
	r.redo.sayRedo()
	var todo, half int64
	for _, ds := range r.sets {
		if ds.redo != nil {
			ds.todo += int64(len(ds.redo.ids))
		}
		todo += ds.todo
		half += ds.halfDone.Load()
	}
	halfText := ""
	if half > 0 {
		halfText = fmt.Sprintf(" (%d of them conversations half done: only their missing turns are asked)", half)
	}
	r.ctl.logf("gen: %s, %s%s; %s", counted(len(r.sets), "dataset", "datasets"), r.redo.todoText(todo), halfText, r.settings())
	if todo > 0 || r.redo.choosing() {
		r.wr.saySkipped()
	}
	return todo, r.feed.sayShapes(todo)
}

// notConnected ends a run whose connect returned err: with nothing to do
// when the early feeder found nothing (errNothingFed); otherwise the
// feeder, if started, is stopped and waited for.
func (r *run) notConnected(err error) (*Summary, error) {
	if errors.Is(err, errNothingFed) {
		r.ctl.cancelReqs() // the waits for the servers end
		sum, err := r.nothingToDo()
		if sum != nil {
			sum.Elapsed = time.Since(r.ctl.started)
		}
		return sum, err
	}
	r.feed.abortEarly(err)
	return &Summary{Elapsed: time.Since(r.ctl.started)}, err
}

// nothingToDo ends a run with no prompt to ask, saying why.
func (r *run) nothingToDo() (*Summary, error) {
	if err := r.wr.checkKindIdle(r.asker.connect); err != nil {
		return nil, err
	}
	var failed uint64
	r.db.View(func(v *store.View) error {
		for _, ds := range r.sets {
			if s, err := ds.summary(v); err == nil {
				failed += s.Overlap.Failed
			}
		}
		return nil
	})
	if failed > 0 {
		r.ctl.logf("gen: nothing to do: every prompt has an answer or a final error (%d failed for good: 'gendex query errors' lists them, --retry-errors sends them again)", failed)
	} else {
		r.ctl.logf("gen: nothing to do: every prompt has an answer (see 'gendex query progress')")
	}
	r.wr.sayAnswered()
	sum := &Summary{}
	r.wr.addExport(sum)
	return sum, nil
}

// generate asks the prompts: the workers, the feeder, the writer and the
// progress lines run until every prompt is answered or the run stops; it
// returns the writer's error (or that of the records of redone answers).
func (r *run) generate(ctx context.Context) error {
	cfg := &r.cfg
	r.feed.startFeed() // unless feedEarly did: the feeder
	r.asker.start(r.jobs, r.results)
	writerDone := make(chan error, 1)
	go func() { writerDone <- r.wr.write(r.results) }()
	progressDone := make(chan struct{})
	progressStop := make(chan struct{})
	go func() { r.prog.report(progressStop); close(progressDone) }()
	go r.graceOnInterrupt(ctx)

	r.asker.wait()
	close(r.results)
	werr := <-writerDone
	close(progressStop)
	<-progressDone
	if werr == nil && !r.ctl.stopping() && cfg.Export != nil {
		werr = r.redo.redoRecords(r.wr)
	}
	r.ctl.cancelReqs()
	return werr
}

// graceOnInterrupt: an interrupt stops the feeding at once and the
// requests in flight after the grace period.
func (r *run) graceOnInterrupt(ctx context.Context) {
	select {
	case <-r.ctl.stop.Done():
	case <-r.ctl.reqs.Done():
		return
	}
	if ctx.Err() != nil { // an interrupt (NotifyContext's cause names the signal, not context.Canceled)
		r.mon.event(time.Now().UnixMilli(), "", EventInterrupt, fmt.Sprintf("%d requests in flight, given up to %s", r.asker.pool.inFlight(), r.cfg.Grace))
	}
	if n := r.asker.pool.inFlight(); n > 0 && ctx.Err() != nil {
		r.ctl.logf("gen: stopping: waiting up to %s for %d answers in flight; Ctrl-C again quits now, the next run catches up", r.cfg.Grace, n)
	}
	select {
	case <-time.After(r.cfg.Grace):
		r.givenUp.Store(r.asker.pool.inFlight())
		r.ctl.cancelReqs()
	case <-r.ctl.reqs.Done():
	}
}

func (r *run) settings() string {
	b, _ := json.Marshal(r.cfg.Sampling)
	export := ""
	if x := r.cfg.Export; x != nil {
		export = fmt.Sprintf(", export %s (tokenized.jsonl and excluded.jsonl beside the answers)", x.Format)
	}
	api := string(r.cfg.API)
	if r.cfg.API == client.APIAuto {
		api = "auto (each server's own: SGLang /generate, others chat)"
	}
	return fmt.Sprintf("api %s, %s, turns %s%s, sampling %s (unset keys: server defaults)%s", api, r.cfg.concurrencyText(), r.cfg.Turns, export, b, r.cfg.Mix.said())
}

// concurrencyText says the run's concurrency: the number given, or
// adaptive and its bound.
func (c *Config) concurrencyText() string {
	if !c.adaptive {
		return fmt.Sprintf("concurrency %d", c.Concurrency)
	}
	return fmt.Sprintf("concurrency adaptive (up to %d)", c.Concurrency)
}

// sortedByName returns sets by name, a copy.
func sortedByName(sets []*dsRun) []*dsRun {
	out := append([]*dsRun(nil), sets...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
