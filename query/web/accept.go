package web

import (
	"fmt"
	"net/http"
	"strconv"

	"gendex/query"
)

// The dataset page's accept view: the answers the drafter predicts worst
// (the lowest accept length, completion tokens per verify step, as the
// server's spec counts of each answer say) first, the data most worth
// training a drafter on: query list DATASET --sort accept.

// acceptShown is how many answers the accept view lists.
const acceptShown = 100

// acceptCols are the accept view's columns.
var acceptCols = []col{
	{"id", "id", ""},
	sampleCol,
	{"accept_length", "accept length", "completion tokens per verify step (spec_verify_ct): how far the drafter ran ahead; the lowest first"},
	{"completion_tokens", "completion tokens", ""},
	{"finish", "finish", "the finish reason (length: cut at the token limit)"},
	{"finished", "finished", ""},
	{"source", "file:line", ""},
}

// hasSpec reports whether the dataset has answers with a verify count,
// for showing the accept view's tab.
func (s *server) hasSpec(r *http.Request, name string) bool {
	res, err := s.ask(r.Context(), "spec", "--", name)
	if err != nil || len(res.Rows) == 0 {
		return false
	}
	n, ok := query.AsFloat(res.Get(res.Rows[0], "verify_steps"))
	return ok && n > 0
}

// fillAccept lists the acceptShown answers with the lowest accept length,
// worst first, and says how many have one.
func (s *server) fillAccept(r *http.Request, d *datasetView) error {
	res, err := s.ask(r.Context(), "list", "--stage", "raw", "--sort", query.SortAccept, "--limit", strconv.Itoa(acceptShown), "--", d.Dataset)
	if err != nil {
		return err
	}
	d.Note = fmt.Sprintf("the answers the drafter predicts worst first (at most %d): gendex query list %s --sort accept --limit N lists more", acceptShown, d.Dataset)
	if res.Total != nil {
		if m, _ := res.Get(res.Total, "message").(string); m != "" {
			d.Note = m + "; " + d.Note
		}
	}
	res.Total = nil
	d.List = newTable(res, acceptCols, func(row []any) string {
		id, sample := unitOf(res, row)
		return link("/answer", "d", d.Dataset, "id", id, "sample", sample, "stage", "raw")
	})
	d.List.Empty = "no answer carries spec_verify_ct (the server reports no speculative counts per answer)"
	return nil
}
