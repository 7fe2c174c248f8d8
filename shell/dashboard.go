package shell

import (
	"context"
	"io"
	"slices"
	"strings"

	"gendex/query"
	"gendex/query/format"
	"gendex/query/live"
)

// dashboard writes, per dataset: answered/prompts (the prompts with an
// answer; done_pct is those answered or failed for good), failed, the
// answers cut at the token limit (truncated) when any dataset has some,
// the turns answered of
// multi-turn conversations, the training records and exclusions when any
// dataset has some (export, gen --export), answers and tokens per second over the last
// 30 s and 5 m, the ETA (see eta) and, in a table only, a sparkline of the
// last 30 minutes (see sparklines). Both windows count only seconds in
// which the run was running: they start no earlier than the last gen run's
// start event, so a resumed run is not diluted by the idle time before it
// (and, by throughput's own rule, no earlier than a dataset's first
// answer). The three answers are joined
// by dataset name, and the rates are asked for exactly the datasets progress
// listed, so a dataset indexed between the questions shifts nothing and
// TOTAL covers the rows shown. Below it, when gen has read any server's
// /metrics, a line per server (see serverLines).
func (s *Shell) dashboard(ctx context.Context, w io.Writer) (err error) {
	// A writer that is not answering is shown, and watch goes on.
	defer func() { err = live.ShowNotAnswering(w, err) }()
	collect := s.collector(ctx)
	prog, err := collect("progress")
	if err != nil {
		return err
	}
	// The last run's state line first (none from a writer too old to
	// know runs).
	if runs, err := collect("runs"); err == nil {
		if l := query.RunLine(runs); l != "" {
			// Within the terminal: a failed run's detail is gen's whole error.
			if _, err := io.WriteString(w, runLines(l, s.width())); err != nil {
				return err
			}
		}
	}
	shortWin, longWin := query.RunWindows(collect, s.Now())
	names := make([]string, 0, len(prog.Rows))
	for _, row := range prog.Rows {
		if name, ok := row[0].(string); ok {
			names = append(names, name)
		}
	}
	rates := func(window string) (*query.Result, map[string][]any, error) {
		return ratesByName(collect, window, names)
	}
	// Turns answered of multi-turn conversations: they move while done
	// waits for a conversation's last turn.
	sets, err := collect("datasets")
	if err != nil {
		return err
	}
	turns := map[string]any{}
	var turnsTotal uint64
	for _, row := range sets.Rows {
		name, _ := row[0].(string)
		turns[name] = sets.Get(row, "turns")
	}
	short, shortBy, err := rates(shortWin)
	if err != nil {
		return err
	}
	long, longBy, err := rates(longWin)
	if err != nil {
		return err
	}
	res, truncated, records, sampled := watchColumns(prog)
	etas := query.ETAs(prog, short, long) // the one ETA rule
	line := func(p, sh, lo []any, turns any) []any {
		prompts := prog.Get(p, "prompts")
		eta := any("unknown")
		if _, ok := query.AsFloat(prompts); ok {
			name, _ := p[0].(string)
			eta = etas[name]
		}
		// answered and failed as progress counts them (unknown from a
		// writer older than them): a failed prompt is not answered.
		row := []any{p[0], prog.Get(p, "answered"), prompts, prog.Get(p, "done_pct"), prog.Get(p, "failed"), turns,
			short.Get(sh, "records_per_s"), short.Get(sh, "tokens_per_s"), long.Get(lo, "records_per_s"), long.Get(lo, "tokens_per_s"), eta}
		if records {
			row = slices.Insert(row, 6, prog.Get(p, "tokenized"), prog.Get(p, "excluded"))
		}
		if truncated {
			row = slices.Insert(row, 5, prog.Get(p, "truncated"))
		}
		if sampled { // beside prompts: answered and done_pct count answers
			row = slices.Insert(row, 3, prog.Get(p, "samples"))
		}
		return row
	}
	for _, row := range prog.Rows {
		name, _ := row[0].(string)
		sh, lo := shortBy[name], longBy[name]
		if sh == nil || lo == nil {
			continue // not in the rates' answers
		}
		n, _ := turns[name].(uint64)
		turnsTotal += n
		res.Rows = append(res.Rows, line(row, sh, lo, turns[name]))
	}
	if prog.Total != nil && short.Total != nil && long.Total != nil {
		res.Total = line(prog.Total, short.Total, long.Total, turnsTotal)
	}
	f := s.format
	if f == query.Auto {
		f = query.Table
	}
	opts := format.Options{Format: f, Width: s.width(), Layout: "watch"}
	if records { // a run for training records: they stay before the cut answers
		opts.Layout = "watch-export"
	}
	// The table (only) ends with each line's sparkline of the last 30
	// minutes; none when the writer asked does not know series. It goes
	// before anything else: shown only when every other column is shown
	// as it is without it (none dropped, no header shortened), so a
	// narrow terminal loses it first, and the note of the columns hidden
	// never names it (--format tsv has it not).
	var plain strings.Builder
	if err := format.Write(&plain, res, opts); err != nil {
		return err
	}
	out := plain.String()
	if f == query.Table && len(names) > 0 {
		if out, err = s.withSparklines(collect, names, res, opts, out); err != nil {
			return err
		}
	}
	if _, err := io.WriteString(w, out); err != nil {
		return err
	}
	return s.serverLines(w, collect, f)
}

// watchColumns returns the dashboard's table, its columns only, for the
// answer to progress: truncated, and records and excluded, are shown only
// when some dataset has a count in them; samples (after prompts) when
// progress has it, a dataset of several samples per prompt (gen
// --samples), whose answered and done_pct count answers.
func watchColumns(prog *query.Result) (res *query.Result, truncated, records, sampled bool) {
	some := func(cols ...string) bool {
		for _, row := range append(slices.Clone(prog.Rows), prog.Total) {
			for _, col := range cols {
				if n, ok := prog.Get(row, col).(uint64); ok && n > 0 {
					return true
				}
			}
		}
		return false
	}
	truncated, records = some("truncated"), some("tokenized", "excluded")
	res = &query.Result{Columns: []string{"dataset", "answered", "prompts", "done_pct", "failed", "turns",
		"answers/s 30s", "tokens/s 30s", "answers/s 5m", "tokens/s 5m", "eta"}}
	if records {
		res.Columns = slices.Insert(res.Columns, 6, "records", "excluded")
	}
	if truncated {
		res.Columns = slices.Insert(res.Columns, 5, "truncated")
	}
	if sampled = slices.Contains(prog.Columns, "samples"); sampled {
		res.Columns = slices.Insert(res.Columns, 3, "samples")
	}
	return res, truncated, records, sampled
}

// collector returns how the dashboard asks a question: parsed, asked at
// now, the whole answer collected.
func (s *Shell) collector(ctx context.Context) func(args ...string) (*query.Result, error) {
	return func(args ...string) (*query.Result, error) { return query.AskWords(ctx, s.Ask, s.Now(), args...) }
}

// ratesByName asks throughput over window for the datasets names, and
// returns its answer and its rows by dataset name.
func ratesByName(collect func(args ...string) (*query.Result, error), window string, names []string) (*query.Result, map[string][]any, error) {
	r, err := collect(append([]string{"throughput", "--window", window, "--"}, names...)...)
	if err != nil {
		return nil, nil, err
	}
	byName := make(map[string][]any, len(r.Rows))
	for _, row := range r.Rows {
		if name, ok := row[0].(string); ok {
			byName[name] = row
		}
	}
	return r, byName, nil
}

// withSparklines returns the dashboard's table res drawn with each line's
// sparkline of the last 30 minutes when that table extends out (the table
// without them) as it is, and out otherwise, or when the writer asked does
// not know series.
func (s *Shell) withSparklines(collect func(args ...string) (*query.Result, error), names []string, res *query.Result, opts format.Options, out string) (string, error) {
	lines, total, err := sparklines(collect, names, s.Now().Unix())
	if err != nil {
		return out, nil
	}
	spark := &query.Result{Columns: append(slices.Clone(res.Columns), sparkColumn)}
	blank := strings.Repeat(" ", sparkMinutes)
	for _, row := range res.Rows {
		l, ok := lines[row[0].(string)]
		if !ok {
			l = blank
		}
		spark.Rows = append(spark.Rows, append(slices.Clone(row), sparkCell(l)))
	}
	if res.Total != nil {
		spark.Total = append(slices.Clone(res.Total), sparkCell(total))
	}
	var b strings.Builder
	if err := format.Write(&b, spark, opts); err != nil {
		return "", err
	}
	if extends(b.String(), out) {
		return b.String(), nil
	}
	return out, nil
}

// extends reports whether the table wide, drawn with a column more than
// narrow, shows narrow's lines whole, each followed by the new column.
func extends(wide, narrow string) bool {
	w, n := strings.Split(wide, "\n"), strings.Split(narrow, "\n")
	if len(w) != len(n) || !strings.Contains(w[0], sparkColumn) {
		return false
	}
	for i := range n {
		if !strings.HasPrefix(w[i], strings.TrimRight(n[i], " ")) {
			return false
		}
	}
	return true
}

// serverLines writes, after the datasets, one line per server gen read in
// the last 30 s (servers of earlier runs are left out):
// up or down, the server's own running and queued requests, gen's limit
// on its requests in flight there and those in flight (unknown when gen
// did not keep them: query server's limit and in_flight), its KV use
// (token_usage, in percent as gen shows it) and its tokens/s over the last 30 s, with gendex's own
// tokens/s from it, gen's retries on it over the same 30 s with the last
// one's error, and the note of `query server`. Nothing when no
// server has a series, or when the writer asked is too old to know the
// question. The limit columns are left out when no server's is known (a
// gen older than the limit).
func (s *Shell) serverLines(w io.Writer, collect func(args ...string) (*query.Result, error), f query.Format) error {
	srv, err := collect("server", "--window", "30s")
	if err != nil || len(srv.Rows) == 0 {
		return nil
	}
	res := &query.Result{Columns: []string{"server", "up", "running", "queued", "limit", "in flight", "kv_pct", "tokens/s server 30s", "tokens/s gendex 30s",
		"retries 30s", "last error", "note"}}
	for _, row := range srv.Rows {
		if srv.Get(row, "up") == nil {
			continue // no reading in the last 30 s: not this run's
		}
		var kv any
		if u, ok := srv.Get(row, "token_usage").(query.Fixed); ok {
			kv = query.Fixed{V: 100 * u.V, Prec: 0}
		}
		res.Rows = append(res.Rows, []any{row[0], srv.Get(row, "up"), srv.Get(row, "running"), srv.Get(row, "queued"),
			srv.Get(row, "limit"), srv.Get(row, "in_flight"), kv, srv.Get(row, "server_tokens_per_s"), srv.Get(row, "client_tokens_per_s"),
			srv.Get(row, "retries"), srv.Get(row, "last_error"), srv.Get(row, "note")})
	}
	if len(res.Rows) == 0 {
		return nil
	}
	dropUnknownLimits(res)
	io.WriteString(w, "\n")
	return format.Write(w, res, format.Options{Format: f, Width: s.width(), Layout: "watch-servers"})
}

// dropUnknownLimits removes the limit and in flight columns of res, the
// server lines, when no row knows them.
func dropUnknownLimits(res *query.Result) {
	for _, row := range res.Rows {
		if res.Get(row, "limit") != nil {
			return
		}
	}
	i := slices.Index(res.Columns, "limit")
	res.Columns = slices.Delete(res.Columns, i, i+2)
	for k, row := range res.Rows {
		res.Rows[k] = slices.Delete(row, i, i+2)
	}
}
