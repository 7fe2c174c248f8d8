package web

import (
	"net/http"
	"slices"

	"gendex/query"
)

// progressCols are the run page's progress columns, README's words as
// headings.
var progressCols = []col{
	{"dataset", "dataset", ""},
	{"prompts", "prompts", "prompts indexed"},
	{"answered", "answered", "prompts with an answer (but those a redo is asking again); a failed prompt is not answered; with several samples per prompt, each sample counts"},
	{"failed", "failed", "prompts that failed for good, with no answer since (each sample, with several)"},
	{"raw", "answers", "answers indexed, one per id (also those whose prompt is gone)"},
	{"tokenized", "records", "training records written by export"},
	{"excluded", "excluded", "answers export left out, with a reason"},
	{"missing_raw", "missing", "prompts with neither an answer nor a final error (each sample, with several)"},
	{"redo", "asked again", "answers a redo is asking again (to go, with missing)"},
	{"missing_tokenized", "no record", "prompts or answers without a training record, or with one built from an answer a redo replaced (gendex export makes it again)"},
	{"truncated", "cut", "answers cut at the token limit (finish reason length)"},
	{"done_pct", "done %", "answered or failed for good, out of prompts (times their samples)"},
	{"samples", "samples", "answers asked per prompt (gen --samples); shown when a dataset has several"},
	{"prompts_done", "prompts done", "prompts every sample of which is answered or failed for good"},
	{"skipped", "skipped", "lines that could not be read"},
	{"tool_stops", "tool stops", "tool conversations gen stopped where the model departed from the data (the dataset's tool stops view lists them)"},
}

// progressColsOf is progressCols for the answer prog: the answers asked
// again only while a redo asks some, the tool stops only when there are.
func progressColsOf(prog *query.Result) []col {
	total := prog.Total
	if total == nil && len(prog.Rows) > 0 {
		total = prog.Rows[0]
	}
	return slices.DeleteFunc(slices.Clone(progressCols), func(c col) bool {
		if c.name != "redo" && c.name != "tool_stops" {
			return false
		}
		n, _ := query.AsFloat(prog.Get(total, c.name))
		return n == 0
	})
}

var tokenCols = []col{
	{"dataset", "dataset", ""},
	{"records", "answers", ""},
	{"prompt_tokens", "prompt tokens", ""},
	{"completion_tokens", "completion tokens", ""},
	{"reasoning_tokens", "reasoning tokens", ""},
	{"avg_completion_tokens", "avg", "average completion tokens"},
	{"p50_completion_tokens", "p50", "median completion tokens (exact)"},
	{"p90_completion_tokens", "p90", ""},
	{"p99_completion_tokens", "p99", ""},
	{"unknown_tokens", "unknown", "answers without a completion token count"},
}

var rateCols = []col{
	{"dataset", "dataset", ""},
	{"records_per_s", "answers/s", ""},
	{"tokens_per_s", "tokens/s", "completion tokens per second"},
	{"records", "answers", "answers in the window"},
}

var serverCols = []col{
	{"server", "server", ""},
	{"up", "up", ""},
	{"running", "running", "requests the server is running"},
	{"queued", "queued", "requests waiting in the server's queue"},
	{"limit", "limit", "gen's limit on its requests in flight on the server: the capacity gen found for it (or its share of --concurrency)"},
	{"in_flight", "gen's in flight", "gen's requests in flight on the server"},
	{"preemptions", "preempted", "requests the server preempted in the last 30 s (their work is done again)"},
	{"token_usage", "KV use", "the server's KV cache use"},
	{"server_tokens_per_s", "its tokens/s", "the server's own generation throughput"},
	{"client_tokens_per_s", "gendex's tokens/s", "what gendex counted from this server"},
	{"retries", "retries", ""},
	{"last_error", "last error", ""},
	{"note", "note", ""},
}

// serverColsOf is serverCols for the answer srv: without gen's limit,
// its in flight and the preemptions when no server knows them (an index
// a gen older than the limit wrote; servers that count no preemptions).
func serverColsOf(srv *query.Result) []col {
	return slices.DeleteFunc(slices.Clone(serverCols), func(c col) bool {
		if c.name != "limit" && c.name != "in_flight" && c.name != "preemptions" {
			return false
		}
		for _, row := range srv.Rows {
			if srv.Get(row, c.name) != nil {
				return false
			}
		}
		return true
	})
}

var eventCols = []col{{"time", "time", ""}, {"server", "server", ""}, {"event", "event", ""}, {"detail", "detail", ""}}

// runView is the run page's live part.
type runView struct {
	Progress, Tokens, Rate30s, Rate30m, Servers, Events *table
	ShortWindow                                         string // the short rates' window: 30s, or the run's seconds when it is younger
	Errors                                              []string
	HasAnswers                                          bool
	// HasLimit: a server's sample keeps gen's limit (the page charts it).
	HasLimit bool
	// RunLine is the last run's state (query.RunLine), "" for none.
	RunLine string
}

var checkCols = []col{
	{"dataset", "dataset", ""},
	{"ready", "ready", "fit to train on: no reason below blocks it"},
	{"reason", "reason", "why not (a note does not block)"},
	{"count", "count", ""},
	{"tokens", "tokens", "the tokens of the records over --max-length"},
	{"detail", "detail", ""},
	{"fix", "fix", "the command that fixes it"},
}

// run is the run page: the live part in the page's frame, and the check's
// verdicts (gendex check's, read once per page: the check reads every
// answer with a record).
func (s *server) run(w http.ResponseWriter, r *http.Request) {
	check, err := s.ask(r.Context(), "check")
	var checkErr string
	if err != nil {
		check, checkErr = &query.Result{}, "query check: "+err.Error()
	}
	t := newTable(check, checkCols, func(row []any) string {
		name, _ := row[0].(string)
		return link("/dataset", "d", name)
	})
	t.Empty = "nothing indexed yet"
	s.render(w, "run.html", map[string]any{"Page": s.page("the run"), "Run": s.runView(r), "Check": t, "CheckError": checkErr})
}

// runLive is the run page's live part alone, which the page asks for
// every few seconds.
func (s *server) runLive(w http.ResponseWriter, r *http.Request) {
	s.render(w, "runlive", s.runView(r))
}

func (s *server) runView(r *http.Request) *runView {
	ctx := r.Context()
	v := &runView{}
	get := func(args ...string) *query.Result {
		res, err := s.ask(ctx, args...)
		if err != nil {
			v.Errors = append(v.Errors, "query "+args[0]+": "+err.Error())
			return &query.Result{}
		}
		return res
	}
	toDataset := func(row []any) string {
		name, _ := row[0].(string)
		return link("/dataset", "d", name)
	}
	prog := get("progress")
	if runs, err := s.ask(ctx, "runs"); err == nil {
		v.RunLine = query.RunLine(runs)
	}
	// The run's windows (30 s and 5 m, cut to the run's start) give the
	// ETA, by watch's and gen's one rule; the short one is shown, with the
	// last 30 minutes.
	ask := func(args ...string) (*query.Result, error) { return s.ask(ctx, args...) }
	shortWin, etaLong := query.RunWindows(ask, s.Now())
	short, long := get("throughput", "--window", shortWin), get("throughput", "--window", "30m")
	v.ShortWindow = shortWin
	v.Progress = newTable(prog, progressColsOf(prog), toDataset)
	addETA(v.Progress, prog, query.ETAs(prog, short, get("throughput", "--window", etaLong)))
	v.Progress.Empty = "nothing indexed yet: run gendex gen or gendex ingest"
	v.Tokens = newTable(get("tokens"), tokenCols, toDataset)
	v.Rate30s = newTable(short, rateCols, toDataset)
	v.Rate30m = newTable(long, rateCols, toDataset)
	srv := get("server")
	v.Servers = newTable(srv, serverColsOf(srv), nil)
	for _, row := range srv.Rows {
		v.HasLimit = v.HasLimit || srv.Get(row, "limit") != nil
	}
	v.Servers.Empty = "no server seen in this run or the last hour (gen reads each server's /metrics while it runs)"
	ev := get("events")
	if n := len(ev.Rows); n > 20 {
		ev.Rows = ev.Rows[n-20:]
	}
	slices.Reverse(ev.Rows)
	v.Events = newTable(ev, eventCols, nil)
	v.Events.Empty = "no events yet"
	for _, row := range prog.Rows {
		if n, _ := query.AsFloat(prog.Get(row, "raw")); n > 0 {
			v.HasAnswers = true
		}
	}
	return v
}

// addETA adds the ETA column to the progress table (query.ETAs, the one
// rule of gen's lines and watch).
func addETA(t *table, prog *query.Result, etas map[string]string) {
	t.Cols = append(t.Cols, column{Name: "eta", Head: "ETA", Title: "when the prompts left are answered at the run's rate, after the datasets before them; unknown for a dataset not being answered"})
	cell := func(row []any) cell {
		name, _ := row[0].(string)
		eta, ok := etas[name]
		if !ok || eta == "unknown" {
			return valueCell("eta", nil)
		}
		return valueCell("eta", eta)
	}
	for i, row := range prog.Rows {
		t.Rows[i] = append(t.Rows[i], cell(row))
	}
	if prog.Total != nil && t.Total != nil {
		t.Total = append(t.Total, cell(prog.Total))
	}
}
