// Package gen runs generation: it streams every dataset's prompts to one or
// more SGLang (or OpenAI-compatible) servers, appends each response to
// <dataset>/raw_responses.jsonl the moment it arrives, and indexes it
// through the same path as `gendex ingest`, so that every prompt is
// answered exactly once through crashes and restarts.
//
// The protocol (DESIGN.md, "Crash consistency"): responses are buffered for
// at most FlushEvery, written to the dataset's file in one write and
// fsynced, then indexed from the file's stored offset in one transaction.
// On start, every output file is indexed up to its end first (a crash
// between write and index), a torn last line is cut off (gen is the only
// writer of its files), and the prompts already answered, per the index,
// are skipped. One prompt is never in flight twice.
package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"gendex/ingest"
	"gendex/ingest/sglang"
	"gendex/store"
)

// Config is one gen run.
type Config struct {
	Servers     []string
	API         sglang.API // default APIGenerate
	Concurrency int        // requests in flight, default 128
	Sampling    sglang.SamplingParams
	APIKey      string
	Model       string // "model" for the OpenAI-compatible endpoints
	// Out, when set, holds the output: Out/<dataset>/raw_responses.jsonl.
	// Otherwise the output goes beside the prompts.
	Out string
	// WaitReady bounds the wait for the servers before the first request.
	WaitReady time.Duration
	// RetryErrors sends again the prompts whose last outcome was an error.
	RetryErrors bool
	// MaxAttempts bounds the answers with an HTTP error (429, 5xx, abort)
	// one prompt gets before it is recorded as an error; a server that does
	// not answer at all is waited for, without limit. Default 20.
	MaxAttempts int
	// RequestTimeout bounds one attempt (0: no bound). An attempt that runs
	// out counts as an HTTP error toward MaxAttempts.
	RequestTimeout time.Duration
	// Grace is how long an interrupt waits for the requests in flight.
	Grace time.Duration
	// FlushEvery is the longest a response waits before it is written,
	// fsynced and indexed. Default 100 ms.
	FlushEvery time.Duration
	Backoff    sglang.Backoff
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
	OnMetrics func(func(io.Writer))
}

func (c *Config) defaults() {
	if c.API == "" {
		c.API = sglang.APIGenerate
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 128
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 20
	}
	if c.Grace <= 0 {
		c.Grace = 15 * time.Second
	}
	if c.FlushEvery <= 0 {
		c.FlushEvery = 100 * time.Millisecond
	}
	if c.WaitReady <= 0 {
		c.WaitReady = 30 * time.Minute
	}
	if c.LogEvery <= 0 {
		c.LogEvery = 10 * time.Second
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
}

// Dataset is one folder of prompts and where its answers go.
type Dataset struct {
	Name    string
	Prompts []string // prompts*.jsonl, sorted
	Raw     string   // raw_responses.jsonl
	Errors  string   // errors.jsonl
}

// FindDatasets lists the datasets under each path: a folder holding
// prompts*.jsonl is a dataset (named after the folder); otherwise each of
// its subfolders that holds some is. Output files go beside the prompts, or
// under out/<dataset>/ when out is set.
func FindDatasets(paths []string, out string) ([]Dataset, error) {
	var sets []Dataset
	seen := map[string]string{}
	for _, p := range paths {
		srcs, err := ingest.Discover(p, "", nil)
		if err != nil {
			return nil, err
		}
		byName := map[string]*Dataset{}
		var order []string
		for _, s := range srcs {
			if s.Stage != store.Prompts {
				continue
			}
			d := byName[s.Dataset]
			if d == nil {
				dir := filepath.Dir(s.Path)
				if out != "" {
					abs, err := filepath.Abs(out)
					if err != nil {
						return nil, err
					}
					dir = filepath.Join(abs, s.Dataset)
				}
				d = &Dataset{Name: s.Dataset, Raw: filepath.Join(dir, "raw_responses.jsonl"), Errors: filepath.Join(dir, "errors.jsonl")}
				byName[s.Dataset] = d
				order = append(order, s.Dataset)
			}
			d.Prompts = append(d.Prompts, s.Path)
		}
		for _, name := range order {
			d := byName[name]
			if prev, dup := seen[name]; dup {
				return nil, fmt.Errorf("two datasets are named %s (%s and %s); rename one folder", name, prev, filepath.Dir(d.Prompts[0]))
			}
			seen[name] = filepath.Dir(d.Prompts[0])
			sets = append(sets, *d)
		}
	}
	if len(sets) == 0 {
		return nil, fmt.Errorf("no prompts*.jsonl under %s", strings.Join(paths, ", "))
	}
	return sets, nil
}

// Summary is what a run did.
type Summary struct {
	Responses, Errors int64
	Tokens            int64
	Elapsed           time.Duration
}

// run is one Run's state.
type run struct {
	cfg  Config
	db   *store.DB
	ix   *ingest.Indexer
	rep  *ingest.Reporter
	pool *pool
	sets []*dsRun

	jobs    chan job
	results chan result

	stop       context.Context // done: send nothing new (interrupt or failure)
	reqs       context.Context // done: abandon requests in flight
	cancelReqs context.CancelFunc
	failOnce   sync.Once
	fail       context.CancelCauseFunc

	started  time.Time
	live     *liveLog // the log, on a terminal
	saidOnce sync.Map
	all      rateWindow
}

type dsRun struct {
	Dataset
	raw, errs  ingest.Source
	rawFile    *os.File
	errFile    *os.File
	todo       int64 // prompts to send at the start
	ok, failed atomic.Int64
	tokens     atomic.Int64
	rate       rateWindow
	fed        atomic.Bool
}

type job struct {
	ds *dsRun
	p  *Prompt
}

type result struct {
	ds     *dsRun
	line   []byte
	isErr  bool
	tokens int64
}

// Run generates every dataset's missing answers. It returns ctx.Err() when
// interrupted (after the grace period and a final flush), or the first
// fatal error (an unusable server, a full disk); answers written before
// either are indexed and kept.
func Run(ctx context.Context, db *store.DB, cfg Config, datasets []Dataset) (*Summary, error) {
	cfg.defaults()
	if len(cfg.Servers) == 0 {
		return nil, errors.New("no --server given")
	}
	r := &run{cfg: cfg, db: db, started: time.Now()}
	if cfg.Terminal {
		r.live = &liveLog{w: cfg.Log}
		r.cfg.Log = r.live
	}
	r.rep = &ingest.Reporter{W: r.cfg.Log}
	r.ix = &ingest.Indexer{DB: db, Report: r.rep.Report}
	stop, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	r.stop, r.fail = stop, fail
	reqs, cancelReqs := context.WithCancel(context.Background())
	defer cancelReqs()
	r.reqs, r.cancelReqs = reqs, cancelReqs

	for _, d := range datasets {
		ds, err := r.reconcile(d)
		if ds != nil {
			defer ds.close()
		}
		if err != nil {
			return nil, err
		}
		r.sets = append(r.sets, ds)
	}
	var todo int64
	for _, ds := range r.sets {
		todo += ds.todo
	}
	r.logf("gen: %d datasets, %d prompts to answer; %s", len(r.sets), todo, r.settings())
	if todo == 0 {
		r.logf("gen: nothing to do: every prompt has an answer (see 'gendex query progress')")
		return &Summary{}, nil
	}
	if err := r.connect(); err != nil {
		return nil, err
	}

	r.jobs = make(chan job, cfg.Concurrency)
	r.results = make(chan result, cfg.Concurrency)
	var workers sync.WaitGroup
	for range cfg.Concurrency {
		workers.Go(r.work)
	}
	go r.feed()
	writerDone := make(chan error, 1)
	go func() { writerDone <- r.write() }()
	progressDone := make(chan struct{})
	progressStop := make(chan struct{})
	go func() { r.progress(progressStop); close(progressDone) }()

	// An interrupt stops the feeding at once and the requests in flight
	// after the grace period.
	go func() {
		select {
		case <-r.stop.Done():
		case <-reqs.Done():
			return
		}
		if n := r.pool.inFlight(); n > 0 && context.Cause(r.stop) == context.Canceled {
			r.logf("gen: interrupted: waiting up to %s for %d requests in flight (interrupt again to quit now)", cfg.Grace, n)
		}
		select {
		case <-time.After(cfg.Grace):
			cancelReqs()
		case <-reqs.Done():
		}
	}()

	workers.Wait()
	close(r.results)
	werr := <-writerDone
	close(progressStop)
	<-progressDone
	cancelReqs()

	sum := &Summary{Elapsed: time.Since(r.started)}
	for _, ds := range r.sets {
		sum.Responses += ds.ok.Load()
		sum.Errors += ds.failed.Load()
		sum.Tokens += ds.tokens.Load()
	}
	r.final(sum)
	if werr != nil {
		return sum, werr
	}
	if cause := context.Cause(r.stop); cause != nil {
		return sum, cause
	}
	return sum, nil
}

// abort ends the run with err (the first one wins).
func (r *run) abort(err error) {
	r.failOnce.Do(func() {
		r.fail(err)
		r.cancelReqs()
	})
}

func (r *run) stopping() bool { return r.stop.Err() != nil }

func (r *run) logf(format string, a ...any) {
	fmt.Fprintf(r.cfg.Log, format+"\n", a...)
}

// once logs a message the first time key is seen.
func (r *run) once(key, format string, a ...any) {
	if _, seen := r.saidOnce.LoadOrStore(key, true); !seen {
		r.logf(format, a...)
	}
}

func (r *run) settings() string {
	b, _ := json.Marshal(r.cfg.Sampling)
	return fmt.Sprintf("api %s, concurrency %d, sampling %s (unset keys: server defaults)", r.cfg.API, r.cfg.Concurrency, b)
}

// reconcile brings the index level with the dataset's files before the
// first request: prompts and outputs indexed to their ends, a torn last
// line of an output file cut off.
func (r *run) reconcile(d Dataset) (*dsRun, error) {
	ds := &dsRun{Dataset: d,
		raw:  ingest.Source{Path: d.Raw, Dataset: d.Name, Stage: store.Raw},
		errs: ingest.Source{Path: d.Errors, Dataset: d.Name, Stage: store.Errors}}
	for _, p := range d.Prompts {
		res, err := r.ix.IndexFile(context.Background(), ingest.Source{Path: p, Dataset: d.Name, Stage: store.Prompts})
		if err != nil {
			return ds, err
		}
		if res.Torn > 0 {
			r.logf("warning: %s:%d: last line has no newline; that prompt is left out until it has one", p, res.NextLine)
		}
	}
	if err := os.MkdirAll(filepath.Dir(d.Raw), 0o755); err != nil {
		return ds, fmt.Errorf("output folder: %w", err)
	}
	var err error
	if ds.rawFile, err = openOutput(d.Raw); err != nil {
		return ds, err
	}
	type output struct {
		src ingest.Source
		f   *os.File
	}
	outputs := []output{{ds.raw, ds.rawFile}}
	if _, err := os.Stat(d.Errors); err == nil { // else created with the first error
		if ds.errFile, err = openOutput(d.Errors); err != nil {
			return ds, err
		}
		outputs = append(outputs, output{ds.errs, ds.errFile})
	}
	for _, out := range outputs {
		res, err := r.ix.IndexFile(context.Background(), out.src)
		if err != nil {
			return ds, err
		}
		if res.Torn > 0 {
			fi, err := out.f.Stat()
			if err != nil {
				return ds, err
			}
			if err := out.f.Truncate(fi.Size() - int64(res.Torn)); err != nil {
				return ds, fmt.Errorf("cutting the torn last line of %s: %w", out.src.Path, err)
			}
			if err := out.f.Sync(); err != nil {
				return ds, err
			}
			r.logf("warning: %s:%d: cut an unfinished last line (%d bytes) left by an earlier run; its prompt will be answered again", out.src.Path, res.NextLine, res.Torn)
		}
	}
	err = r.db.View(func(v *store.View) error {
		s, err := v.Summary(d.Name)
		if err != nil {
			return err
		}
		ds.todo = int64(s.MissingRaw())
		if r.cfg.RetryErrors {
			ds.todo += int64(s.Overlap.ErrorsOpen) // an upper bound: errors whose prompt is gone are not sent
		}
		return nil
	})
	return ds, err
}

// openOutput opens an output file for appending, locked against a second
// gen writing it.
func openOutput(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is being written by another gen (lock: %v)", path, err)
	}
	return f, nil
}

func (ds *dsRun) close() {
	for _, f := range []*os.File{ds.rawFile, ds.errFile} {
		if f != nil {
			f.Close()
		}
	}
}

// connect waits for the servers and reads their context lengths.
func (r *run) connect() error {
	hc := r.cfg.HTTP
	if hc == nil {
		hc = &http.Client{Transport: sglang.NewTransport(r.cfg.Concurrency)}
	}
	var servers []*server
	for _, u := range r.cfg.Servers {
		c := sglang.New(u, sglang.Options{APIKey: r.cfg.APIKey, HTTP: hc, Model: r.cfg.Model})
		servers = append(servers, &server{url: c.BaseURL, client: c})
	}
	r.pool = newPool(servers)
	r.pool.probe = func(ctx context.Context, s *server) {
		r.logf("gen: %s stopped answering; waiting for it (the other servers go on)", s.url)
		start := time.Now()
		s.client.WaitReady(ctx, nil)
		if ctx.Err() == nil {
			r.logf("gen: %s is back after %s", s.url, time.Since(start).Round(time.Second))
		}
	}
	ctx, cancel := context.WithTimeout(r.stop, r.cfg.WaitReady)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	for i, s := range servers {
		wg.Go(func() {
			lastLog := time.Time{}
			errs[i] = s.client.WaitReady(ctx, func(rd sglang.Readiness) {
				if rd.State == sglang.StateReady {
					return
				}
				if time.Since(lastLog) >= r.cfg.LogEvery || lastLog.IsZero() {
					left := r.cfg.WaitReady - rd.Elapsed
					r.logf("gen: waiting for %s: %s for %s (giving up in %s; --wait-ready)", s.url, rd.State, rd.Elapsed.Round(time.Second), left.Round(time.Second))
					lastLog = time.Now()
				}
			})
			if errs[i] != nil {
				return
			}
			info, err := s.client.ServedModel(ctx)
			if err == nil {
				s.ctxLen = info.MaxModelLen
				if s.client.Model == "" {
					// The OpenAI-compatible endpoints of some servers (vLLM)
					// want "model"; send the one the server serves.
					s.client.Model = info.ID
				}
				r.logf("gen: %s is ready: model %s, context length %d", s.url, info.ID, info.MaxModelLen)
			} else if sglang.KindOf(err) == sglang.Auth {
				errs[i] = err
			} else {
				r.logf("gen: %s is ready; context length unknown (%v): max_new_tokens is not clipped", s.url, err)
			}
		})
	}
	wg.Wait()
	up := 0
	for i, err := range errs {
		switch {
		case err == nil:
			up++
		case sglang.KindOf(err) == sglang.Auth:
			return fmt.Errorf("%w (check --api-key or $SGLANG_API_KEY)", err)
		case r.stopping():
			return r.stop.Err()
		default:
			r.logf("gen: %s is not ready: %v", servers[i].url, err)
			r.pool.markDown(r.reqs, servers[i])
		}
	}
	if up == 0 {
		return fmt.Errorf("no server became ready within --wait-ready %s", r.cfg.WaitReady)
	}
	r.warm(servers)
	if r.cfg.OnMetrics != nil {
		r.cfg.OnMetrics(r.writeMetrics)
	}
	return nil
}

// writeMetrics writes the requests in flight and whether each server is up.
func (r *run) writeMetrics(w io.Writer) {
	fmt.Fprintf(w, "# HELP gendex_in_flight Requests in flight, by server.\n# TYPE gendex_in_flight gauge\n")
	for _, s := range r.pool.servers {
		fmt.Fprintf(w, "gendex_in_flight{server=%q} %d\n", s.url, s.inFlight.Load())
	}
	fmt.Fprintf(w, "# HELP gendex_server_up Whether a server answers (1) or is waited for (0).\n# TYPE gendex_server_up gauge\n")
	for _, s := range r.pool.servers {
		up := 0
		if s.up.Load() {
			up = 1
		}
		fmt.Fprintf(w, "gendex_server_up{server=%q} %d\n", s.url, up)
	}
	fmt.Fprintf(w, "# HELP gendex_answers_total Answers written by this run, by server.\n# TYPE gendex_answers_total counter\n")
	for _, s := range r.pool.servers {
		fmt.Fprintf(w, "gendex_answers_total{server=%q} %d\n", s.url, s.done.Load())
	}
}

// warm opens the connections the run will use before the first prompt is
// sent, so the server's slots fill at once rather than one dial at a time.
// It asks for /v1/models, which costs the server nothing.
func (r *run) warm(servers []*server) {
	var wg sync.WaitGroup
	for _, s := range servers {
		if !s.up.Load() {
			continue
		}
		for range max(1, r.cfg.Concurrency/len(servers)) {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(r.stop, 5*time.Second)
				defer cancel()
				s.client.ServedModel(ctx)
			})
		}
	}
	wg.Wait()
}

// feed sends every dataset's unanswered prompts, in file order, dataset
// after dataset without a pause between them.
func (r *run) feed() {
	defer close(r.jobs)
	for _, ds := range r.sets {
		for _, path := range ds.Prompts {
			if err := r.feedFile(ds, path); err != nil {
				if !r.stopping() {
					r.abort(fmt.Errorf("reading %s: %w", path, err))
				}
				return
			}
		}
		ds.fed.Store(true)
	}
}

var errStop = errors.New("stop")

func (r *run) feedFile(ds *dsRun, path string) error {
	var state store.FileState
	if err := r.db.View(func(v *store.View) (err error) {
		state, _, err = v.File(path)
		return err
	}); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = ingest.ReadLines(io.LimitReader(f, state.Offset), func(line []byte, n int64) error {
		if r.stopping() {
			return errStop
		}
		var rec store.Record
		_, err := ingest.Normalize(line, store.Prompts, &rec)
		switch {
		case errors.Is(err, ingest.ErrNoID):
			rec.ID = ingest.LineID(path, n)
		case err != nil:
			return nil // invalid: the indexer has reported it
		}
		send := false
		if err := r.db.View(func(v *store.View) error {
			p, ok, err := v.Get(ds.Name, store.Prompts, rec.ID)
			if err != nil || !ok || p.File != state.ID || p.Line != n {
				return err // not the first line with this id
			}
			if _, done, _ := v.Get(ds.Name, store.Raw, rec.ID); done {
				return nil
			}
			if _, failed, _ := v.Get(ds.Name, store.Errors, rec.ID); failed && !r.cfg.RetryErrors {
				return nil
			}
			send = true
			return nil
		}); err != nil {
			return err
		}
		if !send {
			return nil
		}
		p, err := ParsePrompt(line, rec.ID, n)
		if err != nil {
			r.results <- r.errorLine(ds, rec.ID, 0, fmt.Sprintf("%s:%d: %v", path, n, err), "", 0)
			return nil
		}
		select {
		case r.jobs <- job{ds: ds, p: p}:
			return nil
		case <-r.stop.Done():
			return errStop
		}
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// work answers jobs until there are none, or the run stops.
func (r *run) work() {
	for j := range r.jobs {
		if r.stopping() {
			continue // not started: answered by the next run
		}
		r.answer(j)
	}
}

// answer sends one prompt until it has an answer or a final error. One
// prompt is never in flight twice: retries happen here, one after another,
// each under a fresh rid.
func (r *run) answer(j job) {
	serverErrors := 0
	for attempt := 0; ; attempt++ {
		s, err := r.pool.pick(r.reqs)
		if err != nil {
			return // abandoned; answered by the next run
		}
		ctx, cancel := r.reqs, context.CancelFunc(func() {})
		if r.cfg.RequestTimeout > 0 {
			ctx, cancel = context.WithTimeout(r.reqs, r.cfg.RequestTimeout)
		}
		res, err := r.send(ctx, s, j)
		timedOut := errors.Is(ctx.Err(), context.DeadlineExceeded)
		cancel()
		r.pool.release(s)
		if err == nil {
			s.done.Add(1)
			var tokens int64
			if res.CompletionTokens != nil {
				tokens = int64(*res.CompletionTokens)
			}
			line := res.AppendJSONL(make([]byte, 0, 256+8*len(res.OutputIDs)), j.p.ID)
			r.results <- result{ds: j.ds, line: line, tokens: tokens}
			return
		}
		var e *sglang.Error
		errors.As(err, &e)
		if timedOut { // the server is there but slow: an error, not an outage
			e = &sglang.Error{Kind: sglang.Transient, Server: s.url,
				Message: fmt.Sprintf("no answer within --request-timeout %s", r.cfg.RequestTimeout)}
			err = e
		}
		switch sglang.KindOf(err) {
		case sglang.Canceled:
			return
		case sglang.Auth:
			r.abort(fmt.Errorf("%w (check --api-key or $SGLANG_API_KEY)", err))
			return
		case sglang.Permanent:
			status, msg := 0, err.Error()
			if e != nil {
				status, msg = e.Status, e.Message
			}
			r.results <- r.errorLine(j.ds, j.p.ID, status, msg, s.url, attempt+1)
			return
		}
		if e != nil && e.Status == 0 && !timedOut {
			r.pool.markDown(r.reqs, s) // no answer at all: wait for the server
		} else if serverErrors++; serverErrors >= r.cfg.MaxAttempts {
			status, msg := 0, err.Error()
			if e != nil {
				status, msg = e.Status, e.Message
			}
			r.results <- r.errorLine(j.ds, j.p.ID, status, fmt.Sprintf("gave up after %d attempts: %s", serverErrors, msg), s.url, attempt+1)
			return
		}
		if r.stopping() {
			return
		}
		select {
		case <-time.After(r.cfg.Backoff.DelayFor(err, min(attempt, 6))):
		case <-r.stop.Done():
			return
		}
	}
}

// send makes one request for j on s, by the run's API and the prompt's shape.
func (r *run) send(ctx context.Context, s *server, j job) (*sglang.Result, error) {
	p := j.p
	sp := r.cfg.Sampling.Merge(p.Sampling)
	api := r.cfg.API
	ids := p.InputIDs
	if api == sglang.APIGenerate && p.Messages != nil && s.tokenize.Load() >= 0 {
		t, err := s.client.TokenizeMessages(ctx, p.Messages)
		switch {
		case errors.Is(err, sglang.ErrTokenizeUnsupported):
			s.tokenize.Store(-1)
			r.once("tokenize "+s.url, "gen: %s cannot turn messages into token ids (/v1/tokenize with messages); sending chat prompts to its /v1/chat/completions instead", s.url)
		case err != nil:
			return nil, err
		default:
			s.tokenize.Store(1)
			ids = t
		}
	}
	if len(ids) > 0 && s.ctxLen > 0 && sp.MaxNewTokens != nil {
		if room := s.ctxLen - len(ids); room > 0 && room < *sp.MaxNewTokens {
			sp.MaxNewTokens = &room
		}
	}
	switch {
	case api == sglang.APIGenerate && (ids != nil || p.Messages == nil):
		return s.client.Generate(ctx, sglang.GenerateRequest{InputIDs: ids, Text: p.Text, Sampling: sp})
	case api == sglang.APICompletions && p.Messages == nil:
		return s.client.Complete(ctx, sglang.CompletionRequest{Prompt: p.Text, PromptIDs: ids, Sampling: sp})
	}
	req := sglang.ChatRequest{Messages: p.Messages, Sampling: sp}
	switch {
	case p.Messages == nil && ids != nil:
		req.Messages = []sglang.Message{{Role: "user", Content: ""}}
		req.Extra = map[string]any{"input_ids": ids} // SGLang: pre-tokenized, no template
	case p.Messages == nil:
		req.Messages = []sglang.Message{{Role: "user", Content: p.Text}}
	}
	if api == sglang.APICompletions {
		r.once("completions chat", "gen: chat prompts (messages) go to /v1/chat/completions: /v1/completions has no chat template")
	}
	return s.client.Chat(ctx, req)
}

// errorLine builds an errors.jsonl line.
func (r *run) errorLine(ds *dsRun, id string, status int, msg, server string, attempts int) result {
	rec := struct {
		ID       string `json:"id"`
		Status   int    `json:"status,omitempty"`
		Error    string `json:"error"`
		Server   string `json:"server,omitempty"`
		Attempts int    `json:"attempts,omitempty"`
		FailedAt string `json:"failed_at"`
	}{id, status, msg, server, attempts, time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(rec) // ends in \n
	return result{ds: ds, line: b.Bytes(), isErr: true}
}

// write appends answers to their files: every FlushEvery (or 4 MiB), one
// write and an fsync per file, then the new lines are indexed.
func (r *run) write() error {
	type bufs struct {
		raw, errs          []byte
		ok, failed, tokens int64
	}
	pending := map[*dsRun]*bufs{}
	size := 0
	tick := time.NewTicker(r.cfg.FlushEvery)
	defer tick.Stop()
	var failed error
	flush := func() {
		for ds, b := range pending {
			if failed == nil {
				failed = r.flushFile(ds.rawFile, ds.raw, b.raw)
			}
			if failed == nil && len(b.errs) > 0 && ds.errFile == nil {
				ds.errFile, failed = openOutput(ds.Errors)
			}
			if failed == nil {
				failed = r.flushFile(ds.errFile, ds.errs, b.errs)
			}
			if failed == nil {
				now := time.Now()
				ds.ok.Add(b.ok)
				ds.failed.Add(b.failed)
				ds.tokens.Add(b.tokens)
				ds.rate.add(now, b.ok, b.tokens)
				r.all.add(now, b.ok, b.tokens)
			}
			delete(pending, ds)
		}
		size = 0
		if failed != nil {
			r.abort(failed)
		}
	}
	for {
		select {
		case res, ok := <-r.results:
			if !ok {
				flush()
				return failed
			}
			b := pending[res.ds]
			if b == nil {
				b = &bufs{}
				pending[res.ds] = b
			}
			if res.isErr {
				b.errs = append(b.errs, res.line...)
				b.failed++
			} else {
				b.raw = append(b.raw, res.line...) // AppendJSONL ends it with \n
				b.ok++
				b.tokens += res.tokens
			}
			size += len(res.line)
			if size >= 4<<20 {
				flush()
			}
		case <-tick.C:
			flush()
		}
	}
}

// flushFile writes data in one write, fsyncs, and indexes it.
func (r *run) flushFile(f *os.File, src ingest.Source, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("writing %s: %w (the answers not written will be asked for again on the next run)", src.Path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", src.Path, err)
	}
	if _, err := r.ix.IndexFile(context.Background(), src); err != nil {
		return err
	}
	return nil
}

// sortedSets returns the datasets by name (for stable output).
func (r *run) sortedSets() []*dsRun {
	out := append([]*dsRun(nil), r.sets...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
