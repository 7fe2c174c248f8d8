package format

import (
	"slices"
	"strings"

	"gendex/store/terminal"
)

// A Col says how a table shows one column on a terminal too narrow for
// all of them. Only the table format is fitted: TSV, CSV and JSON always
// have every column, whole.
type Col struct {
	Name string
	// Drop orders the dropping: a table too wide loses its columns of the
	// highest Drop first (the rightmost first among equals); 0 is never
	// dropped.
	Drop int
	// Short is the header shown when the table does not fit with the full
	// names ("" keeps Name).
	Short string
	// Text marks free text (a message, a note, a path): it is cut with …
	// to fit, down to this many columns, before any column is dropped.
	Text int
	// Left cuts the text's start instead of its end (a path's file name
	// says more than its first folders).
	Left bool
	// URL marks server URLs: a table shows them in the shortest form that
	// tells them apart (ShortURLs).
	URL bool
}

// A Layout is a table's columns in the order of what a person decides on
// first: Cols names the known ones; any other column (finish's reasons)
// gets Rest.
type Layout struct {
	Cols []Col
	Rest int
}

// Layouts holds each question's layout (by its name, query.Questions), and
// watch's tables ("watch", "watch-export", "watch-servers"): the one place that says
// which columns a narrow terminal keeps, for `gendex query`, the shell and
// watch alike.
var Layouts = map[string]Layout{
	"progress": {Cols: []Col{
		{Name: "dataset"}, {Name: "done_pct", Drop: 1, Short: "done%"}, {Name: "missing_raw", Drop: 1, Short: "to_go"},
		{Name: "prompts", Drop: 2}, {Name: "raw", Drop: 2}, {Name: "errors", Drop: 3, Short: "err"},
		{Name: "tokenized", Drop: 4, Short: "tok"}, {Name: "missing_tokenized", Drop: 5, Short: "miss_tok"},
		{Name: "excluded", Drop: 6, Short: "excl"}, {Name: "truncated", Drop: 6, Short: "trunc"},
		{Name: "redo", Drop: 2}, {Name: "stale", Drop: 5}, {Name: "skipped", Drop: 5, Short: "skip"},
		{Name: "tool_stops", Drop: 5, Short: "stops"}, {Name: "answered", Drop: 1, Short: "ans"},
		{Name: "failed", Drop: 3, Short: "fail"}, {Name: "no_prompt", Drop: 2, Short: "no_prompt"},
	}},
	"tokens": {Cols: []Col{
		{Name: "dataset"}, {Name: "records", Drop: 1, Short: "recs"}, {Name: "completion_tokens", Drop: 1, Short: "compl"},
		{Name: "avg_completion_tokens", Drop: 2, Short: "avg"}, {Name: "prompt_tokens", Drop: 3, Short: "prompt"},
		{Name: "p50_completion_tokens", Drop: 3, Short: "p50"}, {Name: "p90_completion_tokens", Drop: 4, Short: "p90"},
		{Name: "p99_completion_tokens", Drop: 4, Short: "p99"}, {Name: "unknown_tokens", Drop: 6, Short: "unk"},
		{Name: "unknown_prompt_tokens", Drop: 7, Short: "unk_prompt"}, {Name: "truncated", Drop: 5, Short: "trunc"},
		{Name: "reasoning_tokens", Drop: 6, Short: "reason"}, {Name: "skipped", Drop: 6, Short: "skip"},
	}},
	"throughput": {Cols: []Col{
		{Name: "dataset"}, {Name: "records_per_s", Drop: 1, Short: "recs/s"}, {Name: "tokens_per_s", Drop: 1, Short: "tok/s"},
		{Name: "records", Drop: 3, Short: "recs"}, {Name: "completion_tokens", Drop: 4, Short: "tokens"},
		{Name: "window_s", Drop: 4, Short: "win_s"}, {Name: "unknown_tokens", Drop: 5, Short: "unk"},
		{Name: "accept_length", Drop: 3, Short: "acc_len"},
	}},
	"spec": {Cols: []Col{
		{Name: "dataset"}, {Name: "accept_length", Drop: 1, Short: "acc_len"}, {Name: "accept_rate", Drop: 1, Short: "acc_rate"},
		{Name: "records", Drop: 3, Short: "recs"}, {Name: "verify_steps", Drop: 4, Short: "verify"},
		{Name: "p50_accept_length", Drop: 2, Short: "p50"}, {Name: "p10_accept_length", Drop: 3, Short: "p10"},
		{Name: "p90_accept_length", Drop: 3, Short: "p90"}, {Name: "unknown_spec", Drop: 5, Short: "unk"},
	}},
	"missing": {Cols: []Col{
		{Name: "id"}, {Name: "reason", Drop: 1, Text: 12}, {Name: "dataset", Drop: 2}, {Name: "stage", Drop: 3},
	}},
	"finish": {Cols: []Col{{Name: "dataset"}, {Name: "records", Drop: 1, Short: "recs"}, {Name: "unknown", Drop: 3, Short: "unk"}}, Rest: 2},
	"stops":  {Cols: []Col{{Name: "dataset"}, {Name: "tool_stops", Drop: 1, Short: "stops"}}, Rest: 2},
	"mix": {Cols: []Col{
		{Name: "dataset"}, {Name: "key"}, {Name: "value"}, {Name: "share", Drop: 1}, {Name: "weight", Drop: 1},
		{Name: "off", Drop: 1}, {Name: "answers", Drop: 2}, {Name: "z", Drop: 3}, {Name: "spec", Drop: 4, Text: 12},
	}},
	"errors": {Cols: []Col{
		{Name: "id"}, {Name: "dataset", Drop: 2}, {Name: "reason", Drop: 1, Text: 12},
		{Name: "message", Drop: 2, Text: 12}, {Name: "source", Drop: 3, Text: 16, Left: true},
	}},
	"datasets": {Cols: []Col{
		{Name: "dataset"}, {Name: "prompts", Drop: 1}, {Name: "raw", Drop: 1}, {Name: "errors", Drop: 2, Short: "err"},
		{Name: "tokenized", Drop: 2, Short: "tok"}, {Name: "files", Drop: 4}, {Name: "turns", Drop: 3},
		{Name: "excluded", Drop: 3, Short: "excl"},
	}},
	"files": {Cols: []Col{
		{Name: "path", Text: 16, Left: true}, {Name: "dataset", Drop: 3}, {Name: "stage", Drop: 2},
		{Name: "records", Drop: 1, Short: "recs"}, {Name: "pending_bytes", Drop: 1, Short: "pending"},
		{Name: "lines", Drop: 4}, {Name: "skipped", Drop: 3, Short: "skip"}, {Name: "duplicates", Drop: 5, Short: "dups"},
		{Name: "unknown_tokens", Drop: 6, Short: "unk"}, {Name: "indexed_bytes", Drop: 5, Short: "indexed"},
	}},
	// query/server.go's columns.
	"server": {Cols: []Col{
		{Name: "server", Text: 16, URL: true}, {Name: "up"}, {Name: "running", Drop: 1, Short: "run"},
		{Name: "token_usage", Drop: 1, Short: "kv"}, {Name: "queued", Drop: 2, Short: "queue"},
		{Name: "server_tokens_per_s", Drop: 2, Short: "srv_tok/s"}, {Name: "client_tokens_per_s", Drop: 3, Short: "gdx_tok/s"},
		{Name: "note", Drop: 2, Text: 12}, {Name: "retries", Drop: 3}, {Name: "last_error", Drop: 4, Text: 12, Short: "error"},
		{Name: "cache_hit_rate", Drop: 4, Short: "cache"}, {Name: "accept_length", Drop: 2, Short: "acc_len"},
		{Name: "in_backoff", Drop: 5, Short: "backoff"}, {Name: "agreement", Drop: 5, Short: "agree"},
		{Name: "last_seen", Drop: 6, Short: "seen"}, {Name: "last_error_at", Drop: 7, Short: "error_at"},
		{Name: "limit", Drop: 3}, {Name: "in_flight", Drop: 4}, {Name: "preemptions", Drop: 5},
	}, Rest: 6},
	"runs": {Cols: []Col{
		{Name: "start"}, {Name: "state"}, {Name: "to_go"}, {Name: "note", Drop: 1, Text: 20}, {Name: "pid", Drop: 2},
		{Name: "end", Drop: 2}, {Name: "answers", Drop: 3}, {Name: "errors", Drop: 3}, {Name: "last_answer", Drop: 4, Short: "last"},
		{Name: "kind", Drop: 4}, {Name: "host", Drop: 5}, {Name: "since", Drop: 5}, {Name: "counts", Drop: 5},
		{Name: "command", Drop: 6, Text: 16},
	}},
	"events": {Cols: []Col{
		{Name: "time"}, {Name: "event"}, {Name: "detail", Drop: 1, Text: 20}, {Name: "server", Drop: 2, Text: 12, URL: true},
	}},
	"series": {Cols: []Col{
		{Name: "time"}, {Name: "dataset", Drop: 1}, {Name: "server", Drop: 1, Text: 12, URL: true},
		{Name: "answers_per_s", Drop: 1, Short: "ans/s"}, {Name: "tokens_per_s", Drop: 1, Short: "tok/s"},
		{Name: "answers", Drop: 2, Short: "ans"}, {Name: "up", Drop: 2}, {Name: "running", Drop: 2, Short: "run"},
		{Name: "token_usage", Drop: 2, Short: "kv"}, {Name: "completion_tokens", Drop: 3, Short: "tokens"},
		{Name: "queued", Drop: 3, Short: "queue"}, {Name: "server_tokens_per_s", Drop: 3, Short: "srv_tok/s"},
		{Name: "client_tokens_per_s", Drop: 3, Short: "gdx_tok/s"}, {Name: "accept_length", Drop: 4, Short: "acc_len"},
		{Name: "limit", Drop: 3}, {Name: "in_flight", Drop: 4},
		{Name: "cache_hit_rate", Drop: 4, Short: "cache"}, {Name: "seconds", Drop: 5, Short: "secs"},
		{Name: "samples", Drop: 5}, {Name: "unknown_tokens", Drop: 6, Short: "unk"},
	}, Rest: 6},
	"shards": {Cols: []Col{
		{Name: "dataset"}, {Name: "shard"}, {Name: "state", Text: 13}, {Name: "missing", Drop: 1},
		{Name: "answers", Drop: 1}, {Name: "prompts", Drop: 2}, {Name: "errors", Drop: 2},
		{Name: "last_answer", Drop: 3, Short: "last"}, {Name: "turns", Drop: 4},
	}},
	"watch": {Cols: []Col{
		{Name: "dataset", Text: 24, Left: true}, {Name: "answered"}, {Name: "answers/s 30s", Drop: 1, Short: "ans/s"}, {Name: "eta"},
		{Name: "done_pct", Drop: 2, Short: "done%"}, {Name: "prompts", Drop: 3}, {Name: "samples", Drop: 3}, {Name: "tokens/s 30s", Drop: 3, Short: "tok/s"},
		{Name: "failed", Drop: 2, Short: "fail"}, {Name: "truncated", Drop: 4, Short: "trunc"}, {Name: "turns", Drop: 4},
		{Name: "records", Drop: 5, Short: "recs"}, {Name: "excluded", Drop: 5, Short: "excl"},
		{Name: "answers/s 5m", Drop: 6, Short: "ans/s 5m"}, {Name: "tokens/s 5m", Drop: 6, Short: "tok/s 5m"},
		{Name: "last 30m", Drop: 7}, // the sparkline: the first to go
	}},
	// watch of a run that makes training records (gen --export): the
	// records and exclusions are its goal, kept before the cut answers.
	"watch-export": {Cols: []Col{
		{Name: "dataset", Text: 24, Left: true}, {Name: "answered"}, {Name: "answers/s 30s", Drop: 1, Short: "ans/s"}, {Name: "eta"},
		{Name: "records", Drop: 2, Short: "recs"}, {Name: "excluded", Drop: 2, Short: "excl"},
		{Name: "done_pct", Drop: 3, Short: "done%"}, {Name: "prompts", Drop: 4}, {Name: "samples", Drop: 4}, {Name: "tokens/s 30s", Drop: 4, Short: "tok/s"},
		{Name: "failed", Drop: 3, Short: "fail"}, {Name: "truncated", Drop: 5, Short: "trunc"}, {Name: "turns", Drop: 5},
		{Name: "answers/s 5m", Drop: 6, Short: "ans/s 5m"}, {Name: "tokens/s 5m", Drop: 6, Short: "tok/s 5m"},
		{Name: "last 30m", Drop: 7},
	}},
	"watch-servers": {Cols: []Col{
		{Name: "server", Text: 16, URL: true}, {Name: "up"}, {Name: "running", Drop: 1, Short: "run"},
		{Name: "kv_pct", Drop: 1, Short: "kv%"}, {Name: "queued", Drop: 2, Short: "queue"},
		{Name: "tokens/s server 30s", Drop: 2, Short: "srv tok/s"}, {Name: "tokens/s gendex 30s", Drop: 3, Short: "gdx tok/s"},
		{Name: "note", Drop: 2, Text: 12}, {Name: "retries 30s", Drop: 4, Short: "retries"},
		{Name: "last error", Drop: 4, Text: 12, Short: "error"}, {Name: "limit", Drop: 2},
		{Name: "in flight", Drop: 3},
	}, Rest: 5},
}

// col returns the layout's spec of the column name: a column it does not
// list is dropped at Rest (the first column of an unknown table never).
func (l Layout) col(name string, j int) Col {
	for _, c := range l.Cols {
		if c.Name == name {
			return c
		}
	}
	if l.Cols == nil && j == 0 {
		return Col{Name: name}
	}
	return Col{Name: name, Drop: max(l.Rest, 1)}
}

// lastFolder is where a path's last folder begins (the "/" before it),
// or -1 when it has no folder.
func lastFolder(path string) int {
	end := strings.LastIndex(path, "/")
	if end <= 0 {
		return -1
	}
	return strings.LastIndex(path[:end], "/")
}

// emptyColumn reports whether column j is empty or unknown in every row.
func emptyColumn(rows [][]string, j int) bool {
	for _, row := range rows {
		if row[j] != "" && row[j] != Unknown {
			return false
		}
	}
	return len(rows) > 0
}

// A fitted table: what is left of its columns, and the columns dropped.
type fitted struct {
	cols   []string
	rows   [][]string
	total  []string // nil: none
	hidden []string
	short  []string // "tok = tokenized": the shortened headers shown
}

// pad is the blank around each cell of a table: one column either side.
const pad = 2

// fit lays a table out within width columns: it shortens the headers,
// cuts free text with … down to its minimum, drops the columns a person
// needs least (lay's order) until the rest fit, then gives the free text
// back what room is left. A table that fits, or width <= 0, is unchanged.
// numeric marks the columns never cut.
func fit(width int, lay Layout, cols []string, rows [][]string, total []string, numeric []bool) fitted {
	f := fitted{cols: cols, rows: rows, total: total}
	if width <= 0 || len(cols) == 0 {
		return f
	}
	body := rows
	if total != nil {
		body = append(slices.Clip(rows), total)
	}
	keep := make([]bool, len(cols))
	for j := range keep {
		keep[j] = true
	}
	nat := naturalWidths(cols, body)
	if rowWidth(nat, keep) <= width {
		return f
	}
	specs, head := colSpecs(lay, cols, body)
	nat = naturalWidths(head, body)
	w := slices.Clone(nat)
	for j, s := range specs {
		if s.Text > 0 && !numeric[j] {
			w[j] = min(nat[j], max(s.Text, terminal.Width(head[j])))
		}
	}
	dropColumns(w, keep, specs, width)
	shareRoom(w, nat, keep, width)
	cutWidest(w, keep, numeric, width)
	cut := func(row []string) []string { return cutRow(row, w, keep, specs) }
	f.cols = cut(head)
	f.rows = make([][]string, len(rows))
	for i, row := range rows {
		f.rows[i] = cut(row)
	}
	if total != nil {
		f.total = cut(total)
	}
	for j, c := range cols {
		if !keep[j] {
			f.hidden = append(f.hidden, c)
		} else if head[j] != c {
			f.short = append(f.short, head[j]+" = "+c)
		}
	}
	return f
}

// naturalWidths is each column's width uncut: its header's (head) or its
// widest cell's in body (the rows, and the total).
func naturalWidths(head []string, body [][]string) []int {
	w := make([]int, len(head))
	for j := range head {
		w[j] = terminal.Width(head[j])
		for _, row := range body {
			w[j] = max(w[j], terminal.Width(row[j]))
		}
	}
	return w
}

// rowWidth is the width of a row of the columns kept, at widths w, each
// with its pad.
func rowWidth(w []int, keep []bool) int {
	n := 0
	for j := range w {
		if keep[j] {
			n += w[j] + pad
		}
	}
	return n
}

// colSpecs is how lay shows each column when the table does not fit, and
// the headers shown (a column's Short name when it has one). A column
// unknown in every row of body says nothing here: it is the first to go.
func colSpecs(lay Layout, cols []string, body [][]string) ([]Col, []string) {
	specs := make([]Col, len(cols))
	head := slices.Clone(cols)
	for j, c := range cols {
		specs[j] = lay.col(c, j)
		if specs[j].Short != "" {
			head[j] = specs[j].Short
		}
	}
	most := 0
	for _, sp := range specs {
		most = max(most, sp.Drop)
	}
	for j := range cols {
		if specs[j].Drop > 0 && emptyColumn(body, j) {
			specs[j].Drop = most + 1
		}
	}
	return specs, head
}

// dropColumns drops the columns that may go, highest Drop first (the
// last of equals first), until the row fits width or none is left to go.
func dropColumns(w []int, keep []bool, specs []Col, width int) {
	for rowWidth(w, keep) > width {
		drop := -1
		for j := len(w) - 1; j >= 0; j-- {
			if keep[j] && specs[j].Drop > 0 && (drop < 0 || specs[j].Drop > specs[drop].Drop) {
				drop = j
			}
		}
		if drop < 0 {
			return
		}
		keep[drop] = false
	}
}

// shareRoom gives the room left within width back to the free text cut
// below its natural width nat, a column at a time to each in turn, so
// that a message and a note share it.
func shareRoom(w, nat []int, keep []bool, width int) {
	for grew := true; grew; {
		grew = false
		for j := range w {
			if keep[j] && w[j] < nat[j] && rowWidth(w, keep) < width {
				w[j]++
				grew = true
			}
		}
	}
}

// cutWidest is for a row still too wide with every column that may go
// gone: it cuts the widest text (never a numeric column), down to 3
// columns, until the row fits width.
func cutWidest(w []int, keep, numeric []bool, width int) {
	for rowWidth(w, keep) > width {
		widest := -1
		for j := range w {
			if keep[j] && !numeric[j] && w[j] > 3 && (widest < 0 || w[j] > w[widest]) {
				widest = j
			}
		}
		if widest < 0 {
			return
		}
		w[widest] -= min(w[widest]-3, rowWidth(w, keep)-width)
	}
}

// cutRow is row's kept cells, each within its width: a URL keeps its port
// and a path its dataset's folder and file name, cut in the middle; other
// text is cut at its end.
func cutRow(row []string, w []int, keep []bool, specs []Col) []string {
	out := make([]string, 0, len(row))
	for j, s := range row {
		if keep[j] {
			switch {
			case specs[j].URL: // keep the port
				out = append(out, terminal.CutMiddle(s, w[j], strings.LastIndex(s, ":")))
			case specs[j].Left: // keep the dataset's folder and the file name
				out = append(out, terminal.CutMiddle(s, w[j], lastFolder(s)))
			default:
				out = append(out, terminal.Cut(s, w[j], false))
			}
		}
	}
	return out
}

// shortNote is the legend under a table whose headers were shortened to
// fit: each short header shown and the column's name ("tok = tokenized,
// err = errors"), within width, a line broken between two of them.
func shortNote(short []string, width int) []string {
	var lines []string
	line := ""
	for i, s := range short {
		if i < len(short)-1 {
			s += ","
		}
		switch {
		case line == "":
			line = s
		case width <= 0 || terminal.Width(line+" "+s) <= width:
			line += " " + s
		default:
			lines = append(lines, line)
			line = s
		}
	}
	lines = append(lines, line)
	for i, l := range lines {
		if width > 0 {
			lines[i] = terminal.Cut(l, width, false)
		}
	}
	return lines
}

// hiddenNote is the line under a table that lost columns to the width: it
// names them, within width.
func hiddenNote(hidden []string, width int) string {
	tail := " (--format tsv has all)"
	s := "hidden: " + strings.Join(hidden, ", ")
	if terminal.Width(s+tail) <= width {
		return s + tail
	}
	return terminal.Cut(s, width, false)
}
