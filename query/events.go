package query

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"gendex/store"
)

// eventList: what gen recorded of its runs and their servers, oldest
// first: start, stop and interrupt (server empty), and per server down,
// up (with how long it was down), restarted (a counter went back, or its
// process start time changed), errors (prompts that failed for good,
// one event per burst, with the count), retries (attempts that failed
// and were sent again, one event per burst, with the count and the most
// frequent causes) and limit (gen changed its limit on the requests it
// keeps in flight on the server: from, to and why). --since keeps the
// events of that last stretch; server names keep those servers' events
// (and the run's own); --kind keeps the events of those kinds, and a note
// names the kinds the index holds when one asked is among none of them
// (a misspelling, or nothing of it happened yet).
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
	var seen []string // the kinds of every event since from, for the note
	err := v.Events(from, func(e *store.Event) error {
		if !containsString(seen, e.Name) {
			seen = append(seen, e.Name)
		}
		if len(q.Servers) > 0 && e.Server != "" && !containsString(q.Servers, e.Server) {
			return nil
		}
		if len(q.Kinds) > 0 && !containsString(q.Kinds, e.Name) {
			return nil
		}
		// The run's own events have no server: "", not unknown.
		return out.Row([]any{time.UnixMilli(e.Time).UTC().Format(timeFormat), e.Server, e.Name, e.Detail})
	})
	if err != nil {
		return err
	}
	for _, k := range q.Kinds {
		if !containsString(seen, k) {
			have := "none"
			if len(seen) > 0 {
				slices.Sort(seen)
				have = strings.Join(seen, ", ")
			}
			return out.Note(fmt.Sprintf("no %q event in the index%s (it has: %s)", k, sinceText(q.Since), have))
		}
	}
	return nil
}

// sinceText says --since in a note: " in the last 10m", or "".
func sinceText(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return " in the last " + StepString(d)
}
