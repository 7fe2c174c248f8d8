// Package plot is gendex's plot command, in `gendex plot` and in the
// shell: it asks the series and events questions, as any question is
// asked (of the gen that writes the index, or of the file), and draws the
// answer with package chart, in the terminal or as an SVG file.
package plot

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"gendex/query"
	"gendex/query/chart"
	"gendex/query/format"
	"gendex/store/terminal"
)

// Usage is plot's usage line, without "gendex ".
const Usage = "plot [tokens|answers|queue|kv|limit|accept] [FLAGS] [DATASET...|SERVER...]"

// Summary says what plot does, in one line.
const Summary = "draw tokens/s (answers/s, queue, KV use, limit, accept) over the run, or an SVG"

// A metric is what one word of plot draws.
type metric struct {
	word, title, unit string
	servers           bool    // from series --servers, per server
	column            string  // the series column drawn
	scale             float64 // shown values are the column's times scale
	total             bool    // the first panel is the sum over datasets or servers
	yMax              float64
}

var metrics = []metric{
	{word: "tokens", title: "completion tokens/s", unit: "tokens/s", column: "tokens_per_s", scale: 1, total: true},
	{word: "answers", title: "answers/s", unit: "answers/s", column: "answers_per_s", scale: 1, total: true},
	{word: "queue", title: "requests queued (the server's own count)", unit: "requests", servers: true, column: "queued", scale: 1, total: true},
	{word: "kv", title: "KV cache use (the server's token_usage)", unit: "%", servers: true, column: "token_usage", scale: 100, yMax: 100},
	{word: "limit", title: "gen's in-flight limit", unit: "requests", servers: true, column: "limit", scale: 1, total: true},
	{word: "accept", title: "accept length (tokens per verify step)", unit: "tokens/step", column: "accept_length", scale: 1},
}

// acceptServers is what plot accept draws when no dataset's answers carry
// per-request speculative counts (vLLM, llama.cpp, SGLang's chat
// endpoint): each server's own figure, from series --servers.
var acceptServers = metric{word: "accept", title: "accept length, server-wide (the answers carry no per-request counts)",
	unit: "tokens/step", servers: true, column: "accept_length", scale: 1}

// Args is a parsed plot command.
type Args struct {
	metric        metric
	since, step   time.Duration
	svg           string
	width, height int
	names         []string
}

// flagValues are where plot's flags go.
type flagValues struct {
	since, step   *time.Duration
	svg           *string
	width, height *int
}

// Flags defines plot's flags on fs (for its help, and for Parse).
func Flags(fs *flag.FlagSet) *flagValues {
	return &flagValues{
		since:  fs.Duration("since", 0, "draw the last DURATION of the run (default: all of it)"),
		step:   fs.Duration("step", 0, "one point per DURATION (default: as many points as the width holds)"),
		svg:    fs.String("svg", "", "write the chart to FILE as a self-contained SVG instead of drawing it (default: draw it)"),
		width:  fs.Int("width", 0, "columns (default: the terminal's, else 80)"),
		height: fs.Int("height", 0, "lines (default: the terminal's less one, else 24)"),
	}
}

// Parse reads plot's arguments, flags anywhere: an optional first word
// saying what to draw (tokens, the default, answers, queue, kv, limit or
// accept), then datasets (servers for queue, kv and limit).
func Parse(args []string) (*Args, error) {
	fs := flag.NewFlagSet("plot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := Flags(fs)
	pos, err := query.ParseFlags(fs, args)
	if err != nil {
		return nil, usage("%v", err)
	}
	a := &Args{metric: metrics[0]}
	if len(pos) > 0 {
		for _, m := range metrics {
			if m.word == pos[0] {
				a.metric, pos = m, pos[1:]
				break
			}
		}
	}
	a.names = pos
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"since", *f.since}, {"step", *f.step}} {
		if d.v != 0 && d.v < time.Second {
			return nil, usage("bad --%s %s (want a duration of a second or more, such as 10m, 24h)", d.name, d.v)
		}
	}
	a.since, a.step = f.since.Truncate(time.Second), f.step.Truncate(time.Second)
	a.svg, a.width, a.height = *f.svg, *f.width, *f.height
	if a.width < 0 || a.height < 0 {
		return nil, usage("--width and --height must not be negative")
	}
	return a, nil
}

// Metrics returns the words plot draws, the first the default.
func Metrics() []string {
	out := make([]string, len(metrics))
	for i, m := range metrics {
		out[i] = m.word
	}
	return out
}

// New returns the plot of metric (one of Metrics) over the run's last
// since (0: all of it), for every dataset or server, as Parse would for
// those words, but from values already checked, never parsed as flags:
// a web page's parameters.
func New(metric string, since time.Duration) (*Args, error) {
	for _, m := range metrics {
		if m.word == metric {
			if since != 0 && since < time.Second {
				return nil, usage("bad since %s (want a duration of a second or more)", since)
			}
			return &Args{metric: m, since: since.Truncate(time.Second)}, nil
		}
	}
	return nil, usage("no metric %q (want one of %s)", metric, strings.Join(Metrics(), ", "))
}

func usage(format string, a ...any) error {
	return fmt.Errorf("%w: plot: %s", query.ErrUsage, fmt.Sprintf(format, a...))
}

// Options says where plot draws.
type Options struct {
	// Out gets the chart (or, with --svg, the line saying where it went);
	// its terminal's size is the chart's unless --width and --height say.
	Out io.Writer
	// Location is the time zone of the time axis (nil: time.Local).
	Location *time.Location
}

// Run draws a's chart of the run as of now, asking ask.
func (a *Args) Run(ctx context.Context, ask query.Asker, now time.Time, o Options) error {
	width, height := a.width, a.height
	if w, h, ok := terminalSize(o.Out); ok {
		width, height = cmp(width, w), cmp(height, h-1) // a line for the prompt after it
	}
	width, height = cmp(width, 80), cmp(height, 24)
	c, err := a.Chart(ctx, ask, now, a.points(width))
	if err != nil {
		return err
	}
	c.Location = o.Location
	if c.Location == nil {
		c.Location = time.Local
	}
	if a.svg != "" {
		if err := os.WriteFile(a.svg, c.SVG(1000), 0o644); err != nil {
			return err
		}
		_, err := fmt.Fprintf(o.Out, "wrote %s\n", a.svg)
		return err
	}
	fitNames(c, width)
	_, err = io.WriteString(o.Out, c.Text(width, height))
	return err
}

// cmp returns a, or b when a is 0.
func cmp(a, b int) int {
	if a > 0 {
		return a
	}
	return b
}

// points is how many steps the chart wants: a point per braille dot
// column of a terminal width columns wide, or some 450 for the SVG.
func (a *Args) points(width int) int {
	if a.svg != "" {
		return 450
	}
	return max(2*(max(width, chart.MinWidth)-8), 10)
}

// Chart asks the questions and returns the chart, at most points steps
// unless --step says otherwise. Per server, the servers are named in the
// shortest form that tells them apart (format.ShortURLs), in the panels
// and the marks alike; what that leaves out is said in the title.
func (a *Args) Chart(ctx context.Context, ask query.Asker, now time.Time, points int) (*chart.Chart, error) {
	collect := func(args ...string) (*query.Result, error) { return query.AskWords(ctx, ask, now, args...) }
	base := []string{"series"}
	if a.metric.servers {
		base = append(base, "--servers")
	}
	step := a.step
	to := now.Unix()
	from := to - int64(a.since/time.Second)
	if a.since > 0 {
		base = append(base, "--since", a.since.String())
	} else {
		// The whole run: its first second, from a first, coarse answer.
		r, err := collect(append(slices.Clone(base), append([]string{"--"}, a.names...)...)...)
		if err != nil {
			return nil, err
		}
		from = to
		if len(r.Rows) > 0 {
			if t, err := parseTime(r.Rows[0][0]); err == nil {
				from = t.Unix()
			}
		}
	}
	if step == 0 {
		step = query.SeriesStep(to-from, points)
	}
	r, err := collect(append(base, append([]string{"--step", step.String(), "--"}, a.names...)...)...)
	if err != nil {
		return nil, err
	}
	// A --step finer than a series holds (query.SeriesMaxRows) is widened
	// by series, which says so; so does the title.
	widened := ""
	for _, n := range r.Notes {
		if _, rest, ok := strings.Cut(n, "the step is widened to "); ok {
			step, _, _ := strings.Cut(rest, " ")
			widened = " (--step widened to " + step + ")"
		}
	}
	c, err := a.seriesChart(r, now)
	if err != nil {
		return nil, err
	}
	c.Title += widened
	if a.metric.column == "accept_length" && len(c.Series) > 0 && allUnknown(c.Series) {
		if !a.metric.servers {
			b := *a
			b.metric, b.names = acceptServers, nil
			return b.Chart(ctx, ask, now, points)
		}
		return nil, fmt.Errorf("nothing to plot: no accept length in the index: no answer carries SGLang's per-request speculative counts, and no server's /metrics reports a drafter (a server without one has no accept length; SGLang's /metrics needs --enable-metrics)")
	}
	if a.metric.column == "limit" && len(c.Series) > 0 && allUnknown(c.Series) {
		return nil, fmt.Errorf("nothing to plot: no server sample in the index keeps gen's limit on its requests in flight (an older gen's samples have none)")
	}
	if len(c.Series) == 0 {
		what := "answer"
		if a.metric.servers {
			what = "server sample (gen reads each server's /metrics while it runs)"
		}
		return nil, fmt.Errorf("nothing to plot: no %s in the index", what)
	}
	// The servers' downs, ups, restarts and limit changes within the span.
	ev, err := collect("events", "--since", (time.Duration(to-from+1) * time.Second).String())
	if err != nil {
		return nil, err
	}
	servers, err := a.addMarks(c, ev)
	if err != nil {
		return nil, err
	}
	a.shortServers(c, servers)
	return c, nil
}

// seriesChart returns the chart of r, the answer to series: a series per
// dataset (or server), and the total first when the metric has one. The
// last step is the current one, up to now (series counts every answer up
// to the moment asked).
func (a *Args) seriesChart(r *query.Result, now time.Time) (*chart.Chart, error) {
	c := &chart.Chart{Title: a.metric.title, Unit: a.metric.unit, End: now, YMax: a.metric.yMax}
	col := slices.Index(r.Columns, a.metric.column)
	if col < 0 {
		return nil, fmt.Errorf("plot: the answer to series has no %s column (is the gen that answers older than this gendex?)", a.metric.column)
	}
	byName := map[string]int{}
	var totals []float64
	for _, row := range r.Rows {
		t, err := parseTime(row[0])
		if err != nil {
			return nil, err
		}
		if n := len(c.Times); n == 0 || !c.Times[n-1].Equal(t) {
			c.Times = append(c.Times, t)
			totals = append(totals, math.NaN())
		}
		name, _ := row[1].(string)
		i, ok := byName[name]
		if !ok {
			i = len(c.Series)
			byName[name] = i
			c.Series = append(c.Series, chart.Series{Name: name})
		}
		s := &c.Series[i]
		for len(s.Values) < len(c.Times)-1 {
			s.Values = append(s.Values, math.NaN())
		}
		v := number(row[col]) * a.metric.scale
		s.Values = append(s.Values, v)
		if k := len(totals) - 1; !math.IsNaN(v) {
			if math.IsNaN(totals[k]) {
				totals[k] = 0
			}
			totals[k] += v
		}
	}
	for i := range c.Series {
		for len(c.Series[i].Values) < len(c.Times) {
			c.Series[i].Values = append(c.Series[i].Values, math.NaN())
		}
	}
	per := "dataset"
	if a.metric.servers {
		per = "server"
	}
	switch {
	case a.metric.total && len(c.Series) > 1:
		c.Series = append([]chart.Series{{Name: "TOTAL", Values: totals}}, c.Series...)
		c.Title += ", total and per " + per
	case len(c.Series) > 1:
		c.Title += ", per " + per
	}
	return c, nil
}

// addMarks adds to c the servers' downs, ups, restarts and limit changes
// of ev, the answer to events (only the servers asked for, when a.names
// names servers), and returns each mark's server.
func (a *Args) addMarks(c *chart.Chart, ev *query.Result) (servers []string, err error) {
	for _, row := range ev.Rows {
		kind, _ := row[2].(string)
		server, _ := row[1].(string)
		if kind != "down" && kind != "up" && kind != "restarted" && kind != "limit" {
			continue
		}
		if a.metric.servers && len(a.names) > 0 && !slices.Contains(a.names, server) {
			continue
		}
		t, err := parseTime(row[0])
		if err != nil {
			return nil, err
		}
		detail, _ := row[3].(string)
		c.Marks = append(c.Marks, chart.Mark{Time: t, Kind: kind, Label: server + " " + markWhat(kind, detail), Detail: detail})
		servers = append(servers, server)
	}
	return servers, nil
}

// markWhat is what a mark's label says after its server: its kind, and
// for a limit change the change itself ("limit 128→512", from gen's detail
// "128 -> 512: room (...)"), which the terminal's legend has room for.
func markWhat(kind, detail string) string {
	if kind != "limit" {
		return kind
	}
	change, _, _ := strings.Cut(detail, ":")
	from, to, ok := strings.Cut(change, "->")
	if !ok {
		return kind
	}
	return kind + " " + strings.TrimSpace(from) + "→" + strings.TrimSpace(to)
}

// shortServers names the servers of c's panels (per server) and of its
// marks (servers, one a mark) in the shortest form that tells them apart
// and still names the host (format.ShortURLs, the scheme left out:
// "gpu1:30000"; servers on one host keep it: "127.0.0.1:30001").
func (a *Args) shortServers(c *chart.Chart, servers []string) {
	var rows [][]string
	if a.metric.servers {
		for _, s := range c.Series {
			if s.Name != "TOTAL" {
				rows = append(rows, []string{s.Name})
			}
		}
	}
	for _, s := range servers {
		rows = append(rows, []string{s})
	}
	short := make(map[string]string, len(rows))
	orig := make([]string, len(rows))
	for i, r := range rows {
		orig[i] = r[0]
	}
	if format.ShortURLs(rows, 0) != "" {
		// The servers share a host: a chart keeps it (host:port), its
		// title having no room to say it; only the scheme goes.
		for i, r := range rows {
			if scheme, rest, ok := strings.Cut(orig[i], "://"); ok && strings.HasSuffix(orig[i], r[0]) && scheme != "" {
				r[0] = rest
			}
		}
	}
	for i, r := range rows {
		short[orig[i]] = r[0]
	}
	if a.metric.servers {
		for i := range c.Series {
			if n, ok := short[c.Series[i].Name]; ok {
				c.Series[i].Name = n
			}
		}
	}
	for i, s := range servers {
		m := &c.Marks[i]
		m.Label = short[s] + " " + markWhat(m.Kind, m.Detail)
	}
}

// fitNames cuts, in the middle, each panel's name wider than half of
// width columns (at least 12), so that its figures stay on its line; a
// server's port and a path's end are kept (see terminal.CutMiddle).
func fitNames(c *chart.Chart, width int) {
	room := max(width/2, 12)
	for i := range c.Series {
		name := c.Series[i].Name
		keep := strings.LastIndexByte(name, ':')
		if slash := strings.LastIndexByte(name, '/'); slash > keep {
			keep = slash
		}
		c.Series[i].Name = terminal.CutMiddle(name, room, keep)
	}
}

// allUnknown reports whether no series has a known value.
func allUnknown(series []chart.Series) bool {
	for _, s := range series {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				return false
			}
		}
	}
	return true
}

// timeFormat is how questions write a moment (query's timeFormat).
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func parseTime(v any) (time.Time, error) {
	s, _ := v.(string)
	t, err := time.Parse(timeFormat, s)
	if err != nil {
		return t, errors.New("plot: the answer's time " + strconv.Quote(s) + " is not a time")
	}
	return t, nil
}

// number returns a value of an answer as a float64: NaN when it is not
// known.
func number(v any) float64 {
	switch x := v.(type) {
	case uint64:
		return float64(x)
	case int64:
		return float64(x)
	case query.Fixed:
		return x.V
	case float64:
		return x
	case string:
		if f, err := strconv.ParseFloat(strings.TrimSpace(x), 64); err == nil {
			return f
		}
	}
	return math.NaN()
}

// terminalSize returns the columns and lines of the terminal w writes to;
// ok is false when w is not a terminal.
func terminalSize(w io.Writer) (width, height int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile {
		return 0, 0, false
	}
	width, height = terminal.Size(f.Fd())
	return width, height, width > 0 && height > 0
}
