package web

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"gendex/query"
)

// The dataset page's views: which records it lists.
var views = []struct{ Name, Label, Stage, Finish string }{
	{"answers", "answers", "raw", ""},
	{"cut", "cut at the limit", "raw", "length"},
	{"errors", "errors", "errors", ""},
	{"excluded", "excluded", "excluded", ""},
	{"missing", "missing", "", ""},
	{"norecord", "without a record", "", ""},
	{"sample", "a random sample", "raw", ""},
	{"stops", "tool stops", "raw", ""},      // shown when the dataset has some
	{"accept", "worst accepted", "raw", ""}, // shown when its answers carry spec counts (accept.go)
}

// The columns of list a view shows: an answer's counts, an error's or an
// exclusion's reason and message.
var (
	answerCols = []col{
		{"id", "id", ""},
		sampleCol,
		{"finish", "finish", "the finish reason (length: cut at the token limit)"},
		{"prompt_tokens", "prompt tokens", ""},
		{"completion_tokens", "completion tokens", ""},
		{"reasoning_tokens", "reasoning", ""},
		{"finished", "finished", ""},
		{"source", "file:line", ""},
	}
	// stopCols are a tool stops view's: why gen stopped each.
	stopCols = []col{
		{"id", "id", ""},
		sampleCol,
		{"tool_stop", "stopped", "why gen stopped the tool conversation (README: Tool conversations)"},
		{"finish", "finish", "the finish reason of the model's last turn"},
		{"completion_tokens", "completion tokens", ""},
		{"finished", "finished", ""},
		{"source", "file:line", ""},
	}
	reasonCols = []col{
		{"id", "id", ""},
		sampleCol,
		{"finish", "reason", ""},
		{"message", "message", ""},
		{"finished", "when", ""},
		{"source", "file:line", ""},
	}
)

// sampleCol is a list's sample column: a list has it only for a dataset
// of several samples per prompt, and a table leaves out the columns its
// answer lacks.
var sampleCol = col{"sample", "sample", "which of its prompt's samples (gen --samples)"}

var missingCols = []col{{"id", "id", ""}, sampleCol, {"stage", "stage", ""}, {"reason", "why", ""}}

// missingShown is how many missing ids the page lists; the count says
// how many there are in all.
const missingShown = 200

type tab struct {
	Label, Href string
	On          bool
}

type datasetView struct {
	Page     frame
	Dataset  string
	Tabs     []tab
	Finishes []tab  // the answers view's filters: each finish reason, with its count; the tool stops view's: each reason
	Filter   string // what Finishes filter by
	View     string
	Progress *table
	List     *table
	Prev     string // the page before, when there is one
	Next     string // the page after, when there is one
	Note     string
	ID       string // the id searched for
}

// dataset is a dataset's page: its progress row, then one view of its
// records a page at a time.
func (s *server) dataset(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	name := q.Get("d")
	if name == "" {
		s.fail(w, http.StatusBadRequest, errors.New("which dataset? (/dataset?d=NAME)"))
		return
	}
	if id := q.Get("id"); id != "" {
		s.find(w, r, name, unit{strings.TrimSpace(id), q.Get("sample")})
		return
	}
	prog, err := s.ask(r.Context(), "progress", "--", name)
	if err != nil {
		s.fail(w, http.StatusNotFound, err)
		return
	}
	d := &datasetView{Page: s.page(name), Dataset: name, View: q.Get("view")}
	if d.View == "" {
		d.View = "answers"
	}
	known := false
	var stopped float64
	if len(prog.Rows) > 0 {
		stopped, _ = query.AsFloat(prog.Get(prog.Rows[0], "tool_stops"))
	}
	for _, v := range views {
		on := v.Name == d.View
		known = known || on
		if v.Name == "stops" && stopped == 0 && !on || v.Name == "accept" && !on && !s.hasSpec(r, name) {
			continue
		}
		d.Tabs = append(d.Tabs, tab{Label: v.Label, Href: link("/dataset", "d", name, "view", v.Name), On: on})
	}
	if !known {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("no view %q (want answers, cut, errors, excluded, missing, norecord, sample, stops or accept)", d.View))
		return
	}
	prog.Total = nil
	d.Progress = newTable(prog, progressColsOf(prog), nil)
	if err := s.fill(r, d, prog); err != nil {
		s.fail(w, http.StatusBadRequest, err)
		return
	}
	s.render(w, "dataset.html", d)
}

// fill asks for the view's records.
func (s *server) fill(r *http.Request, d *datasetView, prog *query.Result) error {
	q := r.URL.Query()
	switch d.View {
	case "missing", "norecord":
		return s.fillMissing(r, d, prog)
	case "accept":
		return s.fillAccept(r, d)
	}
	var v = views[0]
	for _, x := range views {
		if x.Name == d.View {
			v = x
		}
	}
	finish := v.Finish
	if v.Name == "answers" {
		finish = q.Get("finish")
		d.Finishes, d.Filter = s.finishTabs(r, d.Dataset, finish), "finish reason"
	}
	args := []string{"list", "--stage", v.Stage}
	if finish != "" {
		args = append(args, "--finish", finish)
	}
	stop := ""
	if v.Name == "stops" {
		stop = cmp.Or(q.Get("stop"), "any")
		args = append(args, "--tool-stop", stop)
		d.Finishes, d.Filter = s.stopTabs(r, d.Dataset, stop), "tool stop reason"
	}
	if v.Name == "sample" {
		args = append(args, "--sample", "20")
	} else {
		if a := q.Get("after"); a != "" {
			args = append(args, "--after", a, "--after-sample", cmp.Or(q.Get("after_sample"), "0"))
		}
		if b := q.Get("before"); b != "" {
			args = append(args, "--before", b, "--before-sample", cmp.Or(q.Get("before_sample"), "0"))
		}
	}
	res, err := s.ask(r.Context(), append(args, "--", d.Dataset)...)
	if err != nil {
		return err
	}
	// list's total row says where the walk ended; the page shows it as
	// its links, not as a row.
	total := res.Total
	res.Total = nil
	cols := answerCols
	if v.Stage != "raw" {
		cols = reasonCols
	} else if v.Name == "stops" {
		cols = stopCols
	}
	d.List = newTable(res, cols, func(row []any) string {
		id, sample := unitOf(res, row)
		return link("/answer", "d", d.Dataset, "id", id, "sample", sample, "stage", v.Stage)
	})
	d.List.Empty = "none"
	page := func(dir string, u unit) string {
		return link("/dataset", "d", d.Dataset, "view", v.Name, "finish", q.Get("finish"), "stop", q.Get("stop"), dir, u.id, dir+"_sample", u.sample)
	}
	if v.Name == "sample" {
		d.Next, d.Note = link("/dataset", "d", d.Dataset, "view", "sample"), "20 drawn at random; the link draws again"
		return nil
	}
	// A walk ends at the last key it looked at (Total's id): the next page
	// starts past it; walking back, the page before starts below it.
	more := len(total) > 1 && total[0] == query.MoreAfter
	var last unit
	if more {
		// The total row's cells after its label are the cursor: the id,
		// then its sample when the list has a sample column.
		last.id, _ = total[1].(string)
		if n, ok := query.AsFloat(total[2]); ok && n > 0 && slices.Contains(res.Columns, "sample") {
			last.sample = strconv.Itoa(int(n))
		}
	}
	var first, end unit
	if n := len(res.Rows); n > 0 {
		first.id, first.sample = unitOf(res, res.Rows[0])
		end.id, end.sample = unitOf(res, res.Rows[n-1])
	}
	asked := func(dir string) unit { return unit{q.Get(dir), q.Get(dir + "_sample")} }
	if q.Get("before") != "" {
		if more {
			d.Prev = page("before", last)
		}
		d.Next = page("after", cmp.Or(end, asked("before")))
	} else {
		if q.Get("after") != "" {
			d.Prev = page("before", cmp.Or(first, asked("after")))
		}
		if more {
			d.Next = page("after", last)
		}
	}
	if kind := cmp.Or(finish, stop); kind != "" && more {
		d.Note = fmt.Sprintf("a page of %s answers looks at %s records at most; the next page goes on after %s", kind, thousands(query.ListScan), last)
	}
	return nil
}

// stopTabs are the tool stops view's filters: every stop, then each
// reason the dataset's stops have (query stops), with its count.
func (s *server) stopTabs(r *http.Request, name, on string) []tab {
	res, err := s.ask(r.Context(), "stops", "--", name)
	if err != nil || len(res.Rows) == 0 {
		return nil
	}
	n, _ := query.AsFloat(res.Get(res.Rows[0], "tool_stops"))
	tabs := []tab{{Label: fmt.Sprintf("every stop (%s)", thousands(int64(n))), Href: link("/dataset", "d", name, "view", "stops"), On: on == "any"}}
	for i, c := range res.Columns {
		if i < 2 || i >= len(res.Rows[0]) {
			continue
		}
		if n, ok := query.AsFloat(res.Rows[0][i]); ok && n > 0 {
			tabs = append(tabs, tab{Label: fmt.Sprintf("%s (%s)", c, thousands(int64(n))), Href: link("/dataset", "d", name, "view", "stops", "stop", c), On: on == c})
		}
	}
	return tabs
}

// finishTabs are the answers view's filters, one per finish reason the
// dataset's answers have (query finish), each with its count.
func (s *server) finishTabs(r *http.Request, name, on string) []tab {
	res, err := s.ask(r.Context(), "finish", "--", name)
	if err != nil || len(res.Rows) == 0 {
		return nil
	}
	tabs := []tab{{Label: "every finish", Href: link("/dataset", "d", name), On: on == ""}}
	for i, c := range res.Columns {
		if c == "dataset" || c == "records" || c == "unknown" || i >= len(res.Rows[0]) {
			continue
		}
		if n, ok := query.AsFloat(res.Rows[0][i]); ok && n > 0 {
			tabs = append(tabs, tab{Label: fmt.Sprintf("%s (%s)", c, thousands(int64(n))), Href: link("/dataset", "d", name, "finish", c), On: on == c})
		}
	}
	return tabs
}

// fillMissing lists the first missingShown ids without an answer (or
// without a training record, and why), and says how many there are.
func (s *server) fillMissing(r *http.Request, d *datasetView, prog *query.Result) error {
	stage, count := "raw", "missing_raw"
	if d.View == "norecord" {
		stage, count = "tokenized", "missing_tokenized"
	}
	if stage == "raw" && len(prog.Rows) > 0 && prog.Get(prog.Rows[0], count) == nil {
		d.Note = fmt.Sprintf("which prompts have no answer is unknown: no prompts file of %s is indexed (gendex ingest its prompts*.jsonl)", d.Dataset)
		return nil
	}
	res, err := s.ask(r.Context(), "missing", "--stage", stage, "--limit", strconv.Itoa(missingShown+1), "--", d.Dataset)
	if err != nil {
		return err
	}
	n := len(res.Rows)
	if len(prog.Rows) > 0 {
		if f, ok := query.AsFloat(prog.Get(prog.Rows[0], count)); ok {
			n = int(f)
		}
	}
	if len(res.Rows) > missingShown {
		res.Rows = res.Rows[:missingShown]
		d.Note = fmt.Sprintf("the first %d of %s; gendex query missing %s --stage %s lists them all", missingShown, thousands(int64(n)), d.Dataset, stage)
	}
	d.List = newTable(res, missingCols, func(row []any) string {
		id, sample := unitOf(res, row)
		// find goes to its answer, error or prompt, whichever it has.
		return link("/dataset", "d", d.Dataset, "id", id, "sample", sample)
	})
	// missing's rows begin with the dataset; the id is the link.
	d.List.Empty = "none missing"
	return nil
}

// find goes to the record with an id (and sample), or says there is none.
func (s *server) find(w http.ResponseWriter, r *http.Request, name string, u unit) {
	for _, stage := range []string{"raw", "errors", "excluded", "prompts"} {
		// A record whose file is gone is still found: its page says so.
		if _, err := s.ask(r.Context(), "show", "--stage", stage, "--sample", cmp.Or(u.sample, "0"), "--", name, u.id); err == nil || !strings.Contains(err.Error(), " has no ") {
			if stage == "prompts" {
				u.sample = "" // a prompt's line is every sample's
			}
			http.Redirect(w, r, link("/answer", "d", name, "id", u.id, "sample", u.sample, "stage", stage), http.StatusSeeOther)
			return
		}
	}
	s.fail(w, http.StatusNotFound, fmt.Errorf("dataset %s has no answer, error, exclusion or prompt with id %q%s", name, u.id, u.of()))
}

// A unit names one answer as the pages do: the prompt's id and, in a
// dataset of several samples per prompt, its sample ("" for sample 0, so
// a one-sample dataset's links are as they were).
type unit struct{ id, sample string }

// String is the unit as a page says it: the id, and " sample S".
func (u unit) String() string { return u.id + u.of() }

// of is " sample S", or "" for sample 0.
func (u unit) of() string {
	if u.sample == "" {
		return ""
	}
	return " sample " + u.sample
}

// unitFrom is a unit of unitOf's two results.
func unitFrom(id, sample string) unit { return unit{id, sample} }

// unitOf is the unit a row of list or missing names: its id, and its
// sample when the answer has a sample column ("" for sample 0).
func unitOf(res *query.Result, row []any) (id, sample string) {
	id, _ = res.Get(row, "id").(string)
	if n, ok := query.AsFloat(res.Get(row, "sample")); ok && n > 0 {
		sample = strconv.Itoa(int(n))
	}
	return id, sample
}
