package query

import (
	"errors"
	"fmt"
	"math/rand/v2"
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
		return usageErr("usage: list DATASET [--stage STAGE] [--after ID|--before ID] [--limit N] [--finish REASON] [--tool-stop REASON|any] [--sample N]")
	}
	if !q.StageSet {
		q.Stage = store.Raw
	}
	if q.After != "" && q.Before != "" {
		return usageErr("list: give --after or --before, not both")
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
	return nil
}

// listColumns are list's columns: the record's id, how it ended and its
// counts, when it finished (the index's time), an error's message, where
// its line is, and why gen stopped it when it is a tool conversation that
// departed from the data.
var listColumns = []string{"id", "finish", "prompt_tokens", "completion_tokens", "reasoning_tokens", "finished", "message", "source", "tool_stop"}

// list: a page of a stage's records in id order, from a cursor's seek;
// walking back (--before) the rows still come in id order. When records
// remain past the page, a total row says after which id they start.
func list(v *store.View, name string, q Query, now time.Time, out Sink) error {
	out.Columns(listColumns)
	if q.Sample > 0 {
		recs, err := v.Sample(name, q.Stage, q.Sample, rand.New(rand.NewPCG(uint64(now.UnixNano()), 0)))
		if err != nil {
			return err
		}
		for i := range recs {
			if err := out.Row(listRow(v, &recs[i])); err != nil {
				return err
			}
		}
		return nil
	}
	r := store.PageRequest{Dataset: name, Stage: q.Stage, After: q.After, Before: q.Before, Back: q.Before != ""}
	if q.Finish != "" || q.ToolStop != "" {
		r.Scan = ListScan
	}
	var rows [][]any
	end, err := v.Page(r, func(rec *store.Record) (bool, error) {
		if (q.Finish == "" || store.FinishReason(rec.Finish) == store.FinishReason(q.Finish)) && toolStopped(rec, q.ToolStop) {
			rows = append(rows, listRow(v, rec))
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
		return out.Total([]any{MoreAfter, end.Last, nil, nil, nil, nil, fmt.Sprintf("%d records looked at", end.Looked), nil, nil})
	}
	return nil
}

func listRow(v *store.View, r *store.Record) []any {
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
	return []any{r.ID, finish, count(r.PromptTokens), count(r.CompletionTokens), count(r.ReasoningTokens),
		time.UnixMilli(r.Time).UTC().Format(timeFormat), msg, source, stop}
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
