package query

import (
	"strings"
	"time"

	"gendex/store"
)

// eventList: what gen recorded of its runs and their servers, oldest
// first: start, stop and interrupt (server empty), and per server down,
// up (with how long it was down), restarted (a counter went back, or its
// process start time changed), errors (prompts that failed for good,
// one event per burst, with the count) and retries (attempts that failed
// and were sent again, one event per burst, with the count and the most
// frequent causes). --since keeps the events of that
// last stretch; server names keep those servers' events (and the run's
// own).
func eventList(v *store.View, q Query, now time.Time, out Sink) error {
	if len(q.Servers) > 0 {
		names := v.Servers()
		for _, n := range q.Servers {
			if !containsString(names, n) {
				return store.NotFound("no server %q in the index (have: %s)", n, strings.Join(names, ", "))
			}
		}
	}
	out.Columns([]string{"time", "server", "event", "detail"})
	var from int64
	if q.Since > 0 {
		from = now.Add(-q.Since).UnixMilli()
	}
	return v.Events(from, func(e *store.Event) error {
		if len(q.Servers) > 0 && e.Server != "" && !containsString(q.Servers, e.Server) {
			return nil
		}
		// The run's own events have no server: "", not unknown.
		return out.Row([]any{time.UnixMilli(e.Time).UTC().Format(timeFormat), e.Server, e.Name, e.Detail})
	})
}
