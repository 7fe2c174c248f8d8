package query

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"gendex/store"
)

// ListScan bounds the records one list page looks at when --finish keeps
// only some: a page of a rare reason costs at most this many records, and
// says where to go on from.
const ListScan = 100_000

// MoreAfter is the first cell of list's total row when records remain
// past the page: its id cell says where the next page starts (--after),
// and, walking back, where the page before starts (--before).
const MoreAfter = "more after"

// checkList reads list's arguments into q.
func checkList(q *Query, pos []string) error {
	if len(pos) != 1 {
		return usageErr("usage: list DATASET [--stage STAGE] [--after ID [--after-sample S]|--before ID [--before-sample S]] [--limit N] [--finish REASON] [--tool-stop REASON|any] [--sample N] [--sort accept]")
	}
	if !q.StageSet {
		q.Stage = store.Raw
	}
	if q.After != "" && q.Before != "" {
		return usageErr("list: give --after or --before, not both")
	}
	switch {
	case q.AfterSample < 0 || q.BeforeSample < 0:
		return usageErr("list --after-sample/--before-sample: want a sample, 0 or more")
	case q.AfterSample > 0 && q.After == "":
		return usageErr("list --after-sample %d: the sample of --after's id; give --after ID too", q.AfterSample)
	case q.BeforeSample > 0 && q.Before == "":
		return usageErr("list --before-sample %d: the sample of --before's id; give --before ID too", q.BeforeSample)
	}
	if q.ToolStop != "" && (q.Stage != store.Raw || q.Sample > 0) {
		return usageErr("list --tool-stop: the answers (--stage raw), without --sample")
	}
	if q.Limit == 0 {
		q.Limit = 50
	}
	if q.Limit < 1 || q.Limit > 10_000 {
		return usageErr("list --limit %d: want 1 to 10000", q.Limit)
	}
	if q.Sample < 0 || q.Sample > 10_000 {
		return usageErr("list --sample %d: want 1 to 10000", q.Sample)
	}
	switch {
	case q.Sort != "" && q.Sort != SortAccept:
		return usageErr("list --sort %q: want accept (the answers with the lowest accept length first)", q.Sort)
	case q.Sort != "" && (q.After != "" || q.Before != "" || q.Sample > 0 || q.Finish != "" || q.ToolStop != ""):
		return usageErr("list --sort accept: give --limit alone (not --after, --before, --sample, --finish or --tool-stop)")
	}
	return nil
}

// listColumns are list's columns: the record's id, how it ended and its
// counts, when it finished (the index's time), an error's message, where
// its line is, and why gen stopped it when it is a tool conversation that
// departed from the data.
var listColumns = []string{"id", "finish", "prompt_tokens", "completion_tokens", "reasoning_tokens", "finished", "message", "source", "tool_stop"}

// listCols are a list's columns: listColumns, with "sample" after the id
// when the records are named by id and sample (sampledStage).
func listCols(sampled bool) []string {
	if !sampled {
		return listColumns
	}
	return append([]string{"id", "sample"}, listColumns[1:]...)
}

// list: a page of a stage's records in id order, from a cursor's seek;
// walking back (--before) the rows still come in id order. When records
// remain past the page, a total row says after which id they start.
func list(v *store.View, name string, q Query, now time.Time, out Sink) error {
	if q.Sort == SortAccept {
		return listByAccept(v, name, q, out)
	}
	sampled, err := sampledStage(v, name, q.Stage)
	if err != nil {
		return err
	}
	cols := listCols(sampled)
	out.Columns(cols)
	if q.Sample > 0 {
		recs, err := v.Sample(name, q.Stage, q.Sample, rand.New(rand.NewPCG(uint64(now.UnixNano()), 0)))
		if err != nil {
			return err
		}
		for i := range recs {
			if err := out.Row(listRow(v, &recs[i], q.Stage, sampled)); err != nil {
				return err
			}
		}
		return nil
	}
	r := store.PageRequest{Dataset: name, Stage: q.Stage, Back: q.Before != ""}
	if q.After != "" {
		r.After = unitKey(q.Stage, q.After, q.AfterSample)
	}
	if q.Before != "" {
		r.Before = unitKey(q.Stage, q.Before, q.BeforeSample)
	}
	if q.Finish != "" || q.ToolStop != "" {
		r.Scan = ListScan
	}
	var rows [][]any
	end, err := v.Page(r, func(rec *store.Record) (bool, error) {
		if (q.Finish == "" || store.FinishReason(rec.Finish) == store.FinishReason(q.Finish)) && toolStopped(rec, q.ToolStop) {
			rows = append(rows, listRow(v, rec, q.Stage, sampled))
		}
		return len(rows) < q.Limit, nil
	})
	if err != nil {
		return err
	}
	if r.Back {
		for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
			rows[i], rows[j] = rows[j], rows[i]
		}
	}
	for _, row := range rows {
		if err := out.Row(row); err != nil {
			return err
		}
	}
	if end.More {
		// The cursor of the next page (or, walking back, of the page
		// before), as --after (--after-sample) take it.
		total := make([]any, len(cols))
		total[0] = MoreAfter
		total[1] = end.Last
		if sampled {
			total[1], total[2] = unitOf(q.Stage, end.Last)
		}
		total[slices.Index(cols, "message")] = fmt.Sprintf("%d records looked at", end.Looked)
		return out.Total(total)
	}
	return nil
}

// listRow is a record's row of list's columns (listCols(sampled)): a
// record of stage st named by id and sample when sampled.
func listRow(v *store.View, r *store.Record, st store.Stage, sampled bool) []any {
	source := any(nil)
	if path, ok := v.FilePath(r.File); ok {
		source = fmt.Sprintf("%s:%d", path, r.Line)
	}
	var msg any
	if r.Message != "" {
		msg = r.Message
	}
	var finish any
	if r.Finish != "" {
		finish = r.Finish
	}
	var stop any
	if r.ToolStop != "" {
		stop = r.ToolStop
	}
	row := []any{r.ID, finish, count(r.PromptTokens), count(r.CompletionTokens), count(r.ReasoningTokens),
		time.UnixMilli(r.Time).UTC().Format(timeFormat), msg, source, stop}
	if sampled {
		id, sample := unitOf(st, r.ID)
		row = append([]any{id, sample}, row[1:]...)
	}
	return row
}

// toolStopped reports whether r is kept by list's --tool-stop reason
// (any: every stopped tool conversation; "": every record).
func toolStopped(r *store.Record, reason string) bool {
	switch reason {
	case "":
		return true
	case "any":
		return r.ToolStop != ""
	}
	return r.ToolStop == reason
}

// count is a token count, or nil (unknown) for store.Unknown.
func count(n int64) any {
	if n == store.Unknown {
		return nil
	}
	return n
}

// errEnough stops a walk that has given the rows asked for.
var errEnough = errors.New("enough rows")

// limited passes on at most n rows (n > 0), then stops the walk.
type limited struct {
	Sink
	n, given int
}

func (l *limited) Row(row []any) error {
	if l.given == l.n {
		return errEnough
	}
	l.given++
	return l.Sink.Row(row)
}

// limitRows returns out giving at most n rows (0: every row); a walk
// stopped by it ends without an error (see stopped).
func limitRows(out Sink, n int) Sink {
	if n <= 0 {
		return out
	}
	return &limited{Sink: out, n: n}
}

// stopped is err, or nil when it only says that enough rows were given.
func stopped(err error) error {
	if errors.Is(err, errEnough) {
		return nil
	}
	return err
}
