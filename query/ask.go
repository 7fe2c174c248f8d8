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
