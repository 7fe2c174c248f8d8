package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gendex/query/plot"
	"gendex/store"
)

// A check says whether a URL parameter's value is one it allows, and why
// not.
type check func(v string) error

// params are the URL parameters a page takes, each with its check. A
// value reaches a question only as a flag's value or after "--", never as
// a flag; the checks keep each to what the page can mean.
type params map[string]check

// Values a page takes.
var (
	// nameParam is a dataset name, an id or a finish reason.
	nameParam check = text(4096)
	// stageParam is a stage of the index.
	stageParam check = func(v string) error { _, err := store.ParseStage(v); return err }
	// viewParam is a dataset page's view.
	viewParam check = func(v string) error {
		for _, x := range views {
			if x.Name == v {
				return nil
			}
		}
		return fmt.Errorf("no view %q (want answers, cut, errors, excluded, missing, norecord, sample, stops or accept)", v)
	}
	// sampleParam is which of a prompt's samples (gen --samples) a unit
	// is: the id's is "sample", a page cursor's "after_sample" or
	// "before_sample".
	sampleParam check = func(v string) error {
		if n, err := strconv.Atoi(v); err != nil || n < 0 || n >= store.MaxSamples {
			return fmt.Errorf("%q: want a sample, 0 to %d", v, store.MaxSamples-1)
		}
		return nil
	}
	// metricParam is what a chart draws.
	metricParam check = func(v string) error {
		if !slices.Contains(plot.Metrics(), v) {
			return fmt.Errorf("no metric %q (want one of %s)", v, strings.Join(plot.Metrics(), ", "))
		}
		return nil
	}
	// sinceParam is how far back a chart goes: a second to a year.
	sinceParam check = func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second || d > maxSince {
			return fmt.Errorf("%q: want a duration from 1s to %s, such as 30m", v, maxSince)
		}
		return nil
	}
	// widthParam is a chart's width in pixels.
	widthParam check = func(v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n < minChartWidth || n > maxChartWidth {
			return fmt.Errorf("%q: want a width from %d to %d pixels", v, minChartWidth, maxChartWidth)
		}
		return nil
	}
)

const (
	// maxSince is the longest ?since= of a chart: a year (a chart of the
	// whole run takes no since).
	maxSince = 8760 * time.Hour
	// minChartWidth and maxChartWidth bound a chart's ?w=.
	minChartWidth, maxChartWidth = 400, 2400
)

// text allows a value of at most max bytes of UTF-8 with no control
// characters.
func text(max int) check {
	return func(v string) error {
		switch {
		case len(v) > max:
			return fmt.Errorf("%d bytes, more than %d", len(v), max)
		case !utf8.ValidString(v):
			return errors.New("not UTF-8")
		case strings.IndexFunc(v, unicode.IsControl) >= 0:
			return errors.New("holds a control character")
		}
		return nil
	}
}

// checkParams checks r's URL parameters against ps: an unknown parameter,
// one given twice or a value ps does not allow is a 400 naming the
// parameter, and checkParams returns false. (token is the guard's.)
func (s *server) checkParams(w http.ResponseWriter, r *http.Request, ps params) bool {
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		s.fail(w, http.StatusBadRequest, fmt.Errorf("bad query string: %v", err))
		return false
	}
	names := make([]string, 0, len(vals))
	for name := range vals {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if name == "token" {
			continue
		}
		c, ok := ps[name]
		if !ok {
			s.fail(w, http.StatusBadRequest, fmt.Errorf("bad parameter %q: %s takes %s", name, r.URL.Path, takes(ps)))
			return false
		}
		if n := len(vals[name]); n > 1 {
			s.fail(w, http.StatusBadRequest, fmt.Errorf("bad parameter %s: given %d times, want it once", name, n))
			return false
		}
		if err := c(vals[name][0]); err != nil {
			s.fail(w, http.StatusBadRequest, fmt.Errorf("bad parameter %s: %v", name, err))
			return false
		}
	}
	return true
}

// takes lists ps's names, for an error.
func takes(ps params) string {
	if len(ps) == 0 {
		return "no parameter"
	}
	names := make([]string, 0, len(ps))
	for n := range ps {
		names = append(names, n)
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// withParams serves h once r's parameters pass ps.
func (s *server) withParams(ps params, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.checkParams(w, r, ps) {
			h(w, r)
		}
	}
}
