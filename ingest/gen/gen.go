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
		var failed uint64
		r.db.View(func(v *store.View) error {
			for _, ds := range r.sets {
				if s, err := v.Summary(ds.Name); err == nil {
					failed += s.Overlap.ErrorsOpen
				}
			}
			return nil
		})
		if failed > 0 {
			r.logf("gen: nothing to do: every prompt has an answer or a final error (%d errors: 'gendex query errors' lists them, --retry-errors sends them again)", failed)
		} else {
			r.logf("gen: nothing to do: every prompt has an answer (see 'gendex query progress')")
		}
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

// sortedSets returns the datasets by name (for stable output).
func (r *run) sortedSets() []*dsRun {
	out := append([]*dsRun(nil), r.sets...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
