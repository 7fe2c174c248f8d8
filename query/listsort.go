package query

import (
	"container/heap"
	"fmt"
	"slices"
	"sort"

	"gendex/store"
)

// SortAccept is list's --sort value that orders answers by the drafter's
// accept length, worst first: the answers most worth training on.
const SortAccept = "accept"

// acceptEntry is one answer with its accept length bin (hundredths).
type acceptEntry struct {
	bin int64
	rec store.Record
}

// worse reports whether a comes before b: the lower accept length, then
// the id.
func worse(a, b *acceptEntry) bool {
	if a.bin != b.bin {
		return a.bin < b.bin
	}
	return a.rec.ID < b.rec.ID
}

// acceptHeap keeps the n worst answers seen: a max-heap by worse, so its
// root is the best of them, the one to drop.
type acceptHeap []acceptEntry

func (h acceptHeap) Len() int           { return len(h) }
func (h acceptHeap) Less(i, j int) bool { return worse(&h[j], &h[i]) }
func (h acceptHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *acceptHeap) Push(x any)        { *h = append(*h, x.(acceptEntry)) }
func (h *acceptHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// listByAccept: the --limit answers of the stage with the lowest accept
// length (completion tokens per verify step, from the server's spec_*
// counts), worst first, each with its accept length; a total row counts
// the answers without the figure. One walk of the stage's records,
// keeping at most --limit of them.
func listByAccept(v *store.View, name string, q Query, out Sink) error {
	sampled, err := sampledStage(v, name, q.Stage)
	if err != nil {
		return err
	}
	cols := append(append([]string(nil), listCols(sampled)...), "accept_length")
	out.Columns(cols)
	h := &acceptHeap{}
	var without, with uint64
	err = v.Each(name, q.Stage, func(r *store.Record) error {
		bin, ok := r.SpecBin()
		if !ok {
			without++
			return nil
		}
		with++
		e := acceptEntry{bin: bin, rec: *r}
		switch {
		case h.Len() < q.Limit:
			heap.Push(h, e)
		case worse(&e, &(*h)[0]):
			(*h)[0] = e
			heap.Fix(h, 0)
		}
		return nil
	})
	if err != nil {
		return err
	}
	rows := []acceptEntry(*h)
	sort.Slice(rows, func(i, j int) bool { return worse(&rows[i], &rows[j]) })
	for i := range rows {
		if err := out.Row(append(listRow(v, &rows[i].rec, q.Stage, sampled), Fixed{float64(rows[i].bin) / 100, 2})); err != nil {
			return err
		}
	}
	total := make([]any, len(cols))
	total[0] = "TOTAL"
	total[slices.Index(cols, "message")] = fmt.Sprintf("%d answers with an accept length, %d without (no spec_verify_ct)", with, without)
	return out.Total(total)
}
