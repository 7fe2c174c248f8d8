package query

import (
	"context"
	"time"
)

// Asker answers questions, from an open index (Local) or from the process
// that writes it (live.Remote).
type Asker interface {
	Ask(ctx context.Context, q Query, now time.Time, out Sink) error
}

// Local answers from an open index.
type Local struct{ Src Source }

// Ask runs q against the index.
func (l Local) Ask(ctx context.Context, q Query, now time.Time, out Sink) error {
	return Run(l.Src, q, now, out)
}

// AskWords asks a question given as the words of 'gendex query' (e.g.
// "throughput", "--window", "5m") and collects the whole answer.
func AskWords(ctx context.Context, a Asker, now time.Time, words ...string) (*Result, error) {
	q, err := Parse(words)
	if err != nil {
		return nil, err
	}
	var c Collect
	if err := a.Ask(ctx, q, now, &c); err != nil {
		return nil, err
	}
	return &c.Result, nil
}
