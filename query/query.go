// Package query answers questions about the index: progress, token sums,
// missing ids, throughput over a window, finish reasons, errors, and single
// stored lines. Every answer comes from counters and keys in the store,
// never from a scan of the data files (show reads one line at its offset).
// The shell and the query command both go through Parse and Run, so they
// give the same answer to the same question.
package query

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"gendex/store"
)

// Questions lists every question with a one-line description, in help order.
var Questions = []struct{ Name, Usage, Help string }{
	{"progress", "progress [DATASET...]", "prompts, responses, tokenized records, errors, exclusions, what is missing (a redo's answers asked again and stale records too) and lines skipped, per dataset; with several samples per prompt (gen --samples), raw, errors, missing_raw, answered, failed and done_pct count answers (each sample), and samples and prompts_done (prompts with every sample answered or failed) are added"},
	{"tokens", "tokens [DATASET...]", "token sums, average and percentiles of completion tokens, unknown counts, lines skipped; prompt tokens as the server counted them per request (with several samples per prompt, each sample's request counts its prompt)"},
	{"throughput", "throughput [--window 30s|5m|1h|DURATION] [DATASET...]", "responses and tokens per second over the window ending now"},
	{"series", "series [--step DURATION] [--since DURATION] [--servers] [DATASET...]", "answers, tokens and tokens/s per step over time, a step without answers as a zero row (--servers: each server's samples per step)"},
	{"spec", "spec [DATASET...]", "speculative decoding: accept length (tokens per verify step), accept rate and accept length percentiles"},
	{"missing", "missing DATASET [--stage raw|tokenized] [--limit N]", "ids without a response (raw), or without a tokenized record and why (tokenized); with several samples per prompt (gen --samples), each missing (id, sample): columns id and sample; --limit: the first N"},
	{"finish", "finish [DATASET...]", "response counts per finish reason"},
	{"mix", "mix [DATASET...]", "gen --mix: each value's share of the answers beside its spec's weight, and whether it is beyond sampling noise (off)"},
	{"stops", "stops [DATASET...]", "tool conversations gen stopped where the model departed from the data, per reason (list --tool-stop lists them)"},
	{"errors", "errors [DATASET...]", "requests that failed for good and have no response since, with the reason; with several samples per prompt (gen --samples), columns id and sample"},
	{"datasets", "datasets", "the indexed datasets, their files and records per stage"},
	{"files", "files [DATASET...]", "every indexed file: how far it is read, its records, duplicates and skipped lines"},
	{"shards", "shards [--quiet 5m] [DATASET...]", "a sharded run (gen --shard), every shard: its state, prompts, answers and missing answers (with gen --samples, each sample of a prompt)"},
	{"server", "server [--window 30s|DURATION] [--all-servers] [SERVER...]", "each server's own view from its /metrics (read by gen): up, load, KV use, preemptions, its tokens/s against gendex's; gen's limit on its requests in flight there and those in flight; gen's retries on it and their last error"},
	{"runs", "runs", "every run of gen and ingest --follow on this index, newest last: its state (running, waiting, stalled, finished, interrupted, failed, lost), what it still owes (to_go), its answers and errors (a killed run's read from the index: counts), its last answer"},
	{"events", "events [--since DURATION] [--kind KIND,...] [SERVER...]", "what happened to gen runs and their servers: start, stop, interrupt, down, up, restarted, errors, retries, isolated, given-up, stalled, recovered, limit (gen's limit on a server's requests in flight changed, and why); --kind: only those"},
	{"list", "list DATASET [--stage raw|errors|excluded|...] [--after ID [--after-sample S]|--before ID [--before-sample S]] [--limit 50] [--finish REASON] [--tool-stop REASON|any] [--sample N] [--sort accept]", "a page of a stage's records in id order (--finish: only those that ended so; --tool-stop: only tool conversations gen stopped so; --sample: N at random; --sort accept: the answers the drafter predicts worst first, lowest accept length), from the index's keys; with several samples per prompt (gen --samples), columns id and sample, and a page after (--after-sample) or before (--before-sample) that sample of the id"},
	{"check", "check [--max-length N] [--include-truncated] [--allow-mixed] [--allow-simulated] [--allow-no-prompt] [--ids REASON] [DATASET...]", "is each dataset fit to train on: every reason it is not, with its count and the command that fixes it; --ids: the ids of the answers it counts for REASON (see 'gendex check')"},
	{"show", "show DATASET ID [--sample S] [--stage raw|prompts|tokenized|errors|turns|excluded]", "the stored line of one record, read at its offset (a turn's id is ID#TURN); --sample: that sample of the id (gen --samples; a prompt's line is the same for each)"},
}

// Query is a parsed question.
type Query struct {
	Question string
	Datasets []string
	Window   time.Duration // throughput, server
	Since    time.Duration // events: how far back (0: all)
	Quiet    time.Duration // shards: a shard with no answer for longer has gone quiet
	// AllServers lists, in server, the servers of earlier runs not seen in
	// the last hour too.
	AllServers bool
	Servers    []string    // server, events
	Kinds      []string    // events: the kinds kept (none: all)
	Stage      store.Stage // missing (Raw or Tokenized), show
	StageSet   bool        // show: --stage given
	ID         string      // show
	Format     Format
	NoHeader   bool
	Bare       bool // missing: ids only (see Resolve)
	// Args are the words Parse read, to ask the same question elsewhere.
	Args []string
	// list: the page's start, its length, a finish reason to keep, or a
	// sample of Sample records at random. With several samples per prompt
	// (gen --samples) the page's start is a unit: After and its sample
	// AfterSample (Before, BeforeSample). show: Sample is ID's sample.
	After, Before             string
	AfterSample, BeforeSample int
	Limit                     int
	Finish                    string
	Sample                    int
	// ToolStop keeps, in list, the answers of tool conversations gen
	// stopped for this reason ("any": every one).
	ToolStop string
	Sort     string // list: "" (id order) or SortAccept
	// check: what the check accepts and the drafter's length.
	Check CheckOptions
	// series: a row's length (0: chosen for the span), and --servers (--since: as events).
	Step      time.Duration
	PerServer bool
}

// Format is the output format a question asks for (--format); package
// query/format writes it.
type Format int

// The formats. Auto is decided by the caller: Table on a terminal, TSV when piped.
const (
	Auto Format = iota
	Table
	TSV
	CSV
	JSON
)

// ParseFormat reads a --format value.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "", "auto":
		return Auto, nil
	case "table":
		return Table, nil
	case "tsv":
		return TSV, nil
	case "csv":
		return CSV, nil
	case "json":
		return JSON, nil
	}
	return Auto, fmt.Errorf("unknown format %q (want table, tsv, csv or json)", s)
}

func (f Format) String() string {
	return [...]string{"auto", "table", "tsv", "csv", "json"}[f]
}

// ErrUsage marks errors in how a question was asked.
var ErrUsage = errors.New("usage")

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", ErrUsage, fmt.Sprintf(format, a...))
}

// Parse reads a question and its arguments, e.g.
// ["throughput", "--window", "5m", "B1"]. Flags may come anywhere; "--"
// ends them (so an id such as -1 can be asked for).
func Parse(args []string) (Query, error) {
	q := Query{Args: append([]string(nil), args...)}
	fs := flag.NewFlagSet("query", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	format := fs.String("format", "", "table, tsv, csv or json")
	fs.BoolVar(&q.NoHeader, "no-header", false, "TSV/CSV without the header line")
	window := fs.String("window", "30s", "throughput window")
	stage := fs.String("stage", "", "stage")
	since := fs.String("since", "", "events: how far back")
	quiet := fs.Duration("quiet", 5*time.Minute, "shards: no answer for longer than this is quiet")
	step := fs.String("step", "", "series: a row's length")
	perServer := fs.Bool("servers", false, "series: rows per server")
	fs.StringVar(&q.After, "after", "", "list: start after this id")
	fs.StringVar(&q.Before, "before", "", "list: the page before this id")
	fs.IntVar(&q.Limit, "limit", 0, "list: records in a page (default 50)")
	fs.StringVar(&q.Finish, "finish", "", "list: only records with this finish reason (length: cut at the token limit)")
	fs.IntVar(&q.Sample, "sample", 0, "list: N records at random; show: which of the id's samples (gen --samples)")
	fs.IntVar(&q.AfterSample, "after-sample", 0, "list: the sample of --after's id (gen --samples)")
	fs.IntVar(&q.BeforeSample, "before-sample", 0, "list: the sample of --before's id (gen --samples)")
	fs.StringVar(&q.ToolStop, "tool-stop", "", "list: only tool conversations gen stopped for this reason (any: every one)")
	fs.StringVar(&q.Sort, "sort", "", "list: accept: the answers with the lowest accept length first")
	maxLength := fs.String("max-length", "", "check: the drafter's training length in tokens")
	fs.BoolVar(&q.Check.IncludeTruncated, "include-truncated", false, "check: accept records of answers cut at the token limit")
	fs.BoolVar(&q.Check.AllowMixed, "allow-mixed", false, "check: accept answers of more than one model")
	fs.BoolVar(&q.Check.AllowSimulated, "allow-simulated", false, "check: accept answers made by the simulator")
	fs.StringVar(&q.Check.IDs, "ids", "", "check: the ids of the answers the check counts for this reason, instead of the verdicts")
	fs.BoolVar(&q.Check.AllowNoPrompt, "allow-no-prompt", false, "check: accept answers whose id matches no prompt (no record is made of them)")
	kinds := fs.String("kind", "", "events: only events of these kinds, comma-separated")
	fs.BoolVar(&q.AllServers, "all-servers", false, "server: every server the index holds, not only the last run's and the last hour's")
	pos, err := ParseFlags(fs, args)
	if err != nil {
		return q, usageErr("%v", err)
	}
	if len(pos) == 0 {
		return q, usageErr("no question (want one of %s)", strings.Join(Names(), ", "))
	}
	q.Question, pos = pos[0], pos[1:]
	if !known(q.Question) {
		return q, usageErr("unknown question %q (want one of %s)", q.Question, strings.Join(Names(), ", "))
	}
	if q.Format, err = ParseFormat(*format); err != nil {
		return q, usageErr("%v", err)
	}
	if *stage != "" {
		if q.Stage, err = store.ParseStage(*stage); err != nil {
			return q, usageErr("%v", err)
		}
		q.StageSet = true
	}
	switch q.Question {
	case "series":
		if pos, err = parseSeries(&q, pos, *step, *since, *perServer); err != nil {
			return q, err
		}
	case "events":
		if err := parseEvents(&q, pos, *since, *kinds); err != nil {
			return q, err
		}
		pos = nil
	case "server":
		q.Servers, pos = pos, nil
		fallthrough
	case "throughput":
		d, err := parseWindow(*window)
		if err != nil {
			return q, usageErr("%v", err)
		}
		q.Window = d
	case "missing":
		if !q.StageSet {
			q.Stage = store.Raw
		}
		if q.Stage != store.Raw && q.Stage != store.Tokenized {
			return q, usageErr("missing --stage must be raw or tokenized")
		}
		if len(pos) != 1 {
			return q, usageErr("usage: missing DATASET [--stage raw|tokenized] [--limit N]")
		}
		if q.Limit < 0 {
			return q, usageErr("missing --limit %d: want a positive count (0 or none: every id)", q.Limit)
		}
	case "show":
		if len(pos) != 2 {
			return q, usageErr("usage: show DATASET ID [--sample S] [--stage raw|prompts|tokenized|errors|turns|excluded]")
		}
		if q.Sample < 0 || q.Sample >= store.MaxSamples {
			return q, usageErr("show --sample %d: want the id's sample, 0 to %d", q.Sample, store.MaxSamples-1)
		}
		q.ID = pos[1]
		pos = pos[:1]
	case "list":
		if err := checkList(&q, pos); err != nil {
			return q, err
		}
	case "check":
		if *maxLength != "" {
			n, err := strconv.Atoi(*maxLength)
			if err != nil || n <= 0 {
				return q, usageErr("--max-length %q: want a positive number of tokens (the drafter's training length)", *maxLength)
			}
			q.Check.MaxLength = n
		}
		if q.Check.IDs != "" {
			if err := checkIDsAsked(q.Check); err != nil {
				return q, err
			}
		}
	case "datasets", "runs":
		if len(pos) != 0 {
			return q, usageErr("usage: %s (it takes no dataset)", q.Question)
		}
	case "shards":
		if *quiet <= 0 {
			return q, usageErr("--quiet %s: want a positive duration such as 5m", *quiet)
		}
		q.Quiet = *quiet
	}
	q.Datasets = pos
	return q, nil
}

// Resolve fixes the output format: Auto becomes a table on a terminal and
// TSV otherwise. `missing` as headerless TSV prints bare ids (with their
// sample, tab-separated, in a dataset of several samples), one per line,
// for xargs and friends.
func (q *Query) Resolve(terminal bool) {
	if q.Format == Auto {
		q.Format = TSV
		if terminal {
			q.Format = Table
		}
	}
	q.Bare = q.Question == "missing" && q.Format == TSV && q.NoHeader
}

// ParseFlags parses fs's flags anywhere among the positional arguments,
// which it returns; every argument after "--" is positional. (The flag
// package alone stops at the first positional argument.)
func ParseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for i, a := range args {
		if a == "--" {
			args, rest = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, withClosestFlag(fs, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return append(pos, rest...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseEvents reads events' flags, --since and --kind, after which the
// names are servers.
func parseEvents(q *Query, pos []string, since, kinds string) error {
	if since != "" {
		d, err := time.ParseDuration(since)
		if err != nil || d <= 0 {
			return usageErr("bad --since %q (want a duration such as 10m, 24h)", since)
		}
		q.Since = d
	}
	for k := range strings.SplitSeq(kinds, ",") {
		if k = strings.TrimSpace(k); k != "" {
			q.Kinds = append(q.Kinds, k)
		}
	}
	q.Servers = pos
	return nil
}

func parseWindow(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad --window %q (want a duration such as 30s, 5m, 1h)", s)
	}
	if d < time.Second {
		return 0, fmt.Errorf("--window %s is shorter than the index's one-second resolution", s)
	}
	return d.Truncate(time.Second), nil
}

// Names returns the question names.
func Names() []string {
	out := make([]string, len(Questions))
	for i, q := range Questions {
		out[i] = q.Name
	}
	return out
}

func known(name string) bool {
	for _, q := range Questions {
		if q.Name == name {
			return true
		}
	}
	return false
}

// Source is what questions are asked of: a *store.DB, or (for live reads)
// anything that can give a read snapshot.
type Source interface {
	View(func(*store.View) error) error
}

// Run answers q from src at time now (throughput windows end at now),
// sending the answer to out.
func Run(src Source, q Query, now time.Time, out Sink) error {
	return src.View(func(v *store.View) error {
		switch q.Question {
		case "server":
			return serverList(v, q, now, out)
		case "events":
			return eventList(v, q, now, out)
		case "runs":
			return runList(v, out)
		case "series":
			return series(v, q, now, out)
		}
		names, err := datasets(v, q.Datasets)
		if err != nil {
			return err
		}
		switch q.Question {
		case "progress":
			return progress(v, names, out)
		case "tokens":
			return tokens(v, names, out)
		case "throughput":
			return throughput(v, names, q.Window, now, out)
		case "spec":
			return spec(v, names, out)
		case "missing":
			return missing(v, names[0], q.Stage, q.Bare, limitRows(out, q.Limit))
		case "finish":
			return finish(v, names, out)
		case "mix":
			return mixList(v, names, out)
		case "stops":
			return stops(v, names, out)
		case "errors":
			return errorList(v, names, out)
		case "datasets":
			return datasetList(v, names, out)
		case "files":
			return fileList(v, names, out)
		case "shards":
			return shardList(v, names, q.Quiet, now, out)
		case "list":
			return list(v, names[0], q, now, out)
		case "show":
			return show(v, names[0], q, out)
		case "check":
			return check(v, names, q.Check, out)
		}
		return usageErr("unknown question %q", q.Question)
	})
}

// Answer runs q and collects the whole answer.
func Answer(src Source, q Query, now time.Time) (*Result, error) {
	var c Collect
	if err := Run(src, q, now, &c); err != nil {
		return nil, err
	}
	return &c.Result, nil
}

// datasets checks the asked names, or returns all datasets when none are asked.
func datasets(v *store.View, asked []string) ([]string, error) {
	if len(asked) == 0 {
		return v.Datasets(), nil
	}
	var names []string
	seen := map[string]bool{}
	for _, name := range asked {
		if seen[name] {
			continue
		}
		seen[name] = true
		names = append(names, name)
		if !v.HasDataset(name) {
			all := v.Datasets()
			if len(all) == 0 {
				return nil, store.NotFound("no dataset %q: the index is empty (run 'gendex ingest ROOT' or 'gendex gen')", name)
			}
			return nil, store.NotFound("no dataset %q in the index (have: %s)", name, strings.Join(all, ", "))
		}
	}
	return names, nil
}

func sortedKeys(m map[string]uint64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	return keys
}

// withClosestFlag adds to an undefined flag's error the flag of fs
// nearest it: "flag provided but not defined: -max-new-token (did you
// mean --max-new-tokens?)".
func withClosestFlag(fs *flag.FlagSet, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if c := store.Closest(strings.TrimLeft(name, "-"), names); c != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, c)
	}
	return err
}
