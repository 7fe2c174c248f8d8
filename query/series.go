package query

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"gendex/store"
)

// SeriesSteps is how many steps at most `series` cuts its span into when
// no --step is asked for: the smallest round step (SeriesStep) that gives
// no more.
const SeriesSteps = 120

// SeriesMaxRows bounds the rows of one series answer, whoever asks (the
// CLI, the shell, plot, the web view, the writer's socket): a --step that
// would cut the span into more steps than SeriesMaxRows over the datasets
// (or servers) asked about, and more than SeriesSteps, is widened to the
// smallest round step that gives no more, and the answer says so in a
// note. One question's work (seconds, megabytes) is then bounded, never
// set by a step and a span (a 1 s step over a year is 31 M rows a
// dataset); the default step's SeriesSteps rows a dataset are never cut.
const SeriesMaxRows = 60_000

// seriesMaxSteps is how many steps a series of n datasets or servers
// may have (see SeriesMaxRows).
func seriesMaxSteps(n int) int64 {
	return max(SeriesMaxRows/int64(max(n, 1)), SeriesSteps+1)
}

// roundSteps are the steps `series` picks from, in seconds; past a day it
// takes whole days.
var roundSteps = []int64{1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400}

// SeriesStep returns the smallest round step that cuts span seconds into
// at most steps steps.
func SeriesStep(span int64, steps int) time.Duration {
	steps = max(steps, 1)
	for _, s := range roundSteps {
		if (span+s-1)/s <= int64(steps) {
			return time.Duration(s) * time.Second
		}
	}
	days := (span + 86400*int64(steps) - 1) / (86400 * int64(steps))
	return time.Duration(days) * 24 * time.Hour
}

// parseSeries reads series' flags: --step (whole seconds, at least one),
// --since and --servers, after which the names are servers.
func parseSeries(q *Query, pos []string, step, since string, perServer bool) ([]string, error) {
	if step != "" {
		d, err := time.ParseDuration(step)
		if err != nil || d < time.Second {
			return nil, usageErr("bad --step %q (want a duration of at least the index's one second, such as 10s, 1m, 1h)", step)
		}
		q.Step = d.Truncate(time.Second)
	}
	if since != "" {
		d, err := time.ParseDuration(since)
		if err != nil || d < time.Second {
			return nil, usageErr("bad --since %q (want a duration such as 10m, 24h)", since)
		}
		q.Since = d.Truncate(time.Second)
	}
	q.PerServer = perServer
	if perServer {
		q.Servers = pos
		return nil, nil
	}
	return pos, nil
}

// seriesSpan is the seconds [from, to) a series covers, cut into rows at
// the multiples of step (Unix seconds: a 1m step starts its rows at whole
// minutes); the first and last rows may be shorter. The span ends with the
// current second (to is the one after it), so every answer up to the
// moment asked is in a row, the last covering the part of its second gone
// by (store.Span).
type seriesSpan struct{ from, to, step int64 }

func newSpan(q Query, now time.Time, first int64, hasFirst bool) seriesSpan {
	sp := seriesSpan{to: store.EndOf(now)}
	switch {
	case q.Since > 0:
		sp.from = now.Unix() - int64(q.Since/time.Second)
	case hasFirst:
		sp.from = min(first, sp.to)
	default:
		sp.from = sp.to
	}
	sp.from = max(sp.from, 0)
	sp.step = int64(q.Step / time.Second)
	if sp.step <= 0 {
		sp.step = int64(SeriesStep(sp.to-sp.from, SeriesSteps) / time.Second)
	}
	return sp
}

// rows is how many rows sp cuts its span into.
func (sp seriesSpan) rows() int64 {
	if sp.to <= sp.from {
		return 0
	}
	return (sp.to-1)/sp.step - sp.from/sp.step + 1
}

// bound widens sp's step when it would make more rows than a series of
// n datasets or servers may have (seriesMaxSteps), and says so in a note
// to out.
func (sp *seriesSpan) bound(n int, out Sink) error {
	rows, most := sp.rows(), seriesMaxSteps(n)
	if rows <= most {
		return nil
	}
	asked := time.Duration(sp.step) * time.Second
	sp.step = int64(SeriesStep(sp.to-sp.from, int(most-1)) / time.Second) // the first row may start early
	return out.Note(fmt.Sprintf("series: --step %s would make %d rows for each of %d, more than the %d rows a series holds: "+
		"the step is widened to %s (ask for a shorter --since, or fewer datasets or servers, for a finer step)",
		StepString(asked), rows, max(n, 1), SeriesMaxRows, StepString(time.Duration(sp.step)*time.Second)))
}

// StepString is a step as --step is written: 1s, 5m, 2h, 3h30m, 48h.
func StepString(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// each calls fn with every row's seconds [a, b), in order.
func (sp seriesSpan) each(fn func(a, b int64) error) error {
	for a := sp.from; a < sp.to; {
		b := min((a/sp.step+1)*sp.step, sp.to)
		if err := fn(a, b); err != nil {
			return err
		}
		a = b
	}
	return nil
}

func unixTime(sec int64) string { return time.Unix(sec, 0).UTC().Format(timeFormat) }

// series: the datasets' answers over time, one row per step and dataset,
// from the per-second buckets `throughput` reads (never the records):
// time is the row's first second, seconds how many it covers (a round
// step, except the first and last rows, cut at the span's ends); answers,
// completion_tokens and unknown_tokens are the answers that finished in
// those seconds, as throughput counts them, with their rates over the
// row's seconds; a step without answers is a row of zeros, never left out.
// accept_length is as throughput's. The span is --since ending now, or
// from the first answer of the datasets asked, and ends with the current
// second: the last row counts every answer up to the moment asked, its
// seconds the part of its second gone by (store.Span). The step is --step,
// or the smallest round step that makes at most SeriesSteps rows per
// dataset. TOTAL sums the whole span by throughput's rule (each dataset
// from its first answer on, the total from the earliest of those): it
// equals `throughput --window SINCE`.
//
// With --servers: one row per step and server, from the samples gen took
// of each server's /metrics (see serverList): samples is how many fall in
// the row's seconds, up the share of them in which gen had the server in
// rotation, running, queued, token_usage and cache_hit_rate the mean of
// the server's own values over the samples that have them, limit and
// in_flight the mean of gen's (see serverList) over the samples that keep
// them, accept_length
// the row's (acceptSpan, over the pairs whose later sample falls in it),
// and the token rates as server's, over the pairs of consecutive samples
// of one gen run whose later sample falls in the row.
// A row without samples has samples 0 and the rest unknown.
func series(v *store.View, q Query, now time.Time, out Sink) error {
	if q.PerServer {
		return serverSeries(v, q, now, out)
	}
	names, err := datasets(v, q.Datasets)
	if err != nil {
		return err
	}
	var first int64
	hasFirst := false
	for _, n := range names {
		if f, ok := v.FirstSecond(n); ok && (!hasFirst || f < first) {
			first, hasFirst = f, true
		}
	}
	sp := newSpan(q, now, first, hasFirst)
	if err := sp.bound(len(names), out); err != nil {
		return err
	}
	out.Columns([]string{"time", "dataset", "seconds", "answers", "completion_tokens", "answers_per_s", "tokens_per_s", "unknown_tokens", "accept_length"})
	// Each dataset's sums over the whole span, for TOTAL: throughput's
	// rule, each starting at its first answer.
	sums := make([]store.Rate, len(names))
	for i, n := range names {
		f, ok := v.FirstSecond(n)
		if !ok || f < sp.from {
			f = sp.from
		}
		sums[i] = store.Span(min(f, sp.to), sp.to, now)
	}
	var specTokens, specVerify int64
	err = sp.each(func(a, b int64) error {
		for i, n := range names {
			r := store.Span(a, b, now)
			r.Records, r.Tokens, r.Unknown = v.Window(n, a, b)
			_, st, sv := v.SpecWindow(n, a, b)
			sums[i].Records += r.Records
			sums[i].Tokens += r.Tokens
			sums[i].Unknown += r.Unknown
			specTokens += st
			specVerify += sv
			if err := out.Row(append([]any{unixTime(a)}, rateRow(n, r, st, sv)...)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	tot := store.TotalRate(now, time.Duration(now.Unix()-sp.from)*time.Second, sums)
	return out.Total(append([]any{"TOTAL"}, rateRow("", tot, specTokens, specVerify)...))
}

var errFirstOnly = errors.New("first sample only")

// serverSeries: series --servers (see series).
func serverSeries(v *store.View, q Query, now time.Time, out Sink) error {
	names, err := servers(v, q.Servers)
	if err != nil {
		return err
	}
	var first int64
	hasFirst := false
	for _, n := range names {
		err := v.ServerSamples(n, 0, now.Unix(), func(s *store.ServerSample) error {
			if sec := s.Time / 1000; !hasFirst || sec < first {
				first, hasFirst = sec, true
			}
			return errFirstOnly
		})
		if err != nil && !errors.Is(err, errFirstOnly) {
			return err
		}
	}
	sp := newSpan(q, now, first, hasFirst)
	if err := sp.bound(len(names), out); err != nil {
		return err
	}
	out.Columns([]string{"time", "server", "seconds", "samples", "up", "running", "queued", "limit", "in_flight", "token_usage", "cache_hit_rate",
		"accept_length", "server_tokens_per_s", "client_tokens_per_s"})
	// Each server's samples are read once, from a minute before the span
	// (so that its first row has the pair its first sample closes), and
	// added to the row they fall in.
	rows := make([][]stepSamples, len(names))
	nrows := 0
	sp.each(func(a, b int64) error { nrows++; return nil })
	for i, n := range names {
		rows[i] = make([]stepSamples, nrows)
		var prev store.ServerSample
		havePrev := false
		err := v.ServerSamples(n, sp.from-60, sp.to-1, func(s *store.ServerSample) error {
			sec := s.Time / 1000
			if sec >= sp.from && sec < sp.to {
				rows[i][sp.index(sec)].add(s, &prev, havePrev, sp.from*1000)
			}
			prev, havePrev = *s, true
			return nil
		})
		if err != nil {
			return err
		}
	}
	k := 0
	return sp.each(func(a, b int64) error {
		for i, n := range names {
			if err := out.Row(rows[i][k].row(unixTime(a), n, Seconds(store.Span(a, b, now).Secs))); err != nil {
				return err
			}
		}
		k++
		return nil
	})
}

// index returns the row of second sec, from <= sec < to.
func (sp seriesSpan) index(sec int64) int {
	firstEnd := (sp.from/sp.step + 1) * sp.step
	if sec < firstEnd {
		return 0
	}
	return 1 + int((sec-firstEnd)/sp.step)
}

// stepSamples sums one row's samples of one server.
type stepSamples struct {
	samples, up int64
	gauges      [store.NumMetrics]struct {
		sum float64
		n   int64
	}
	server, client tokenSpan
	paired         bool // a pair had the server's counter: server's rate is known
	accept         acceptSpan
	// gen's limit and its requests in flight, summed over the samples
	// that keep them (limited of them).
	limit, inFlight, limited int64
}

var seriesGauges = []store.Metric{store.MetricRunning, store.MetricQueued, store.MetricTokenUsage, store.MetricCacheHitRate}

func (st *stepSamples) add(s, prev *store.ServerSample, havePrev bool, from int64) {
	st.samples++
	st.accept.add(s, prev, havePrev, from)
	if s.Up {
		st.up++
	}
	if s.Limit > 0 {
		st.limit += s.Limit
		st.inFlight += max(s.InFlight, 0)
		st.limited++
	}
	if s.Scraped {
		for _, m := range seriesGauges {
			if x, ok := s.Get(m); ok {
				st.gauges[m].sum += x
				st.gauges[m].n++
			}
		}
	}
	if !havePrev || prev.Run != s.Run || s.Time <= prev.Time {
		return
	}
	ms := s.Time - prev.Time
	client := tokenSpan{float64(s.ClientTokens - prev.ClientTokens), s.ClientUnknown - prev.ClientUnknown, ms}
	st.client.add(client)
	a, ok1 := prev.Get(store.MetricGenTokens)
	b, ok2 := s.Get(store.MetricGenTokens)
	if ok1 && ok2 {
		st.server.add(tokenSpan{counterIncrease(a, b), 0, ms})
		st.paired = true
	}
}

func (st *stepSamples) row(t, name string, seconds any) []any {
	row := []any{t, name, seconds, uint64(st.samples), nil, nil, nil, nil, nil, nil, nil, nil, nil, nil}
	if st.samples == 0 {
		return row
	}
	row[4] = Fixed{float64(st.up) / float64(st.samples), 2}
	gauge := func(m store.Metric, prec int) any {
		if g := st.gauges[m]; g.n > 0 {
			return Fixed{g.sum / float64(g.n), prec}
		}
		return nil
	}
	row[5], row[6] = gauge(store.MetricRunning, 1), gauge(store.MetricQueued, 1)
	if st.limited > 0 {
		n := float64(st.limited)
		row[7], row[8] = Fixed{float64(st.limit) / n, 1}, Fixed{float64(st.inFlight) / n, 1}
	}
	row[9], row[10] = gauge(store.MetricTokenUsage, 3), gauge(store.MetricCacheHitRate, 3)
	row[11] = st.accept.fixed()
	if r, ok := st.server.perSecond(); ok && st.paired {
		row[12] = Fixed{r, 1}
	}
	if r, ok := st.client.perSecond(); ok {
		row[13] = Fixed{r, 1}
	}
	return row
}
