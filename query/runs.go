package query

import (
	"fmt"
	"time"

	"gendex/store"
)

// runList: every run of gen and `ingest --follow` on the index, oldest
// first (store.Run): when it started and ended, its pid, host and command,
// its state, since when (a stall's start), what it still owes (to_go:
// unknown for a follow), its answers and errors (a follow's records
// indexed; errors unknown), where those three come from (counts: "run",
// as the run said them; "index", a lost run's read from the index;
// "snapshot", a lost run's last row, maybe behind), its last answer's
// time, and a note (a stall's sentence, a failure's error; "" when it has
// nothing to say). A run that never said it ended is lost unless the
// writer answering is the one running it: read from the file, no writer
// holds the index's lock, so none is running, whatever process has its
// pid now.
func runList(v *store.View, out Sink) error {
	out.Columns([]string{"start", "end", "pid", "host", "kind", "state", "since", "to_go", "answers", "errors", "counts", "last_answer", "note", "command"})
	return v.Runs(func(r *store.Run) error {
		toGo, answers, errs, counts := r.ToGo, r.Answers, r.Errors, runCounts(r)
		if r.Indexed != nil {
			toGo, answers, errs = r.Indexed.ToGo, &r.Indexed.Answered, &r.Indexed.Failed
		}
		return out.Row([]any{msTime(r.Start), msTime(r.End), int64(r.Pid), r.Host, r.Kind, r.State, msTime(r.Since),
			optInt(toGo), optInt(answers), optInt(errs), counts, msTime(r.LastAnswer), RunNote(r), r.Command})
	})
}

// runCounts is where the counts of r's row come from: "run", as the run
// said them; "index", a lost run's as the index holds them; "snapshot",
// a lost run's last row, maybe behind what it did.
func runCounts(r *store.Run) string {
	switch {
	case r.State != store.RunLost:
		return "run"
	case r.Indexed != nil:
		return "index"
	}
	return "snapshot"
}

// RunNote is what a run's row says besides its state: its detail, or for
// a lost run what that means and where its counts come from.
func RunNote(r *store.Run) string {
	if r.State != store.RunLost {
		return r.Detail
	}
	from := ""
	switch {
	case r.Indexed != nil:
		from = "; its answers, errors and to_go are the index's"
	case r.Kind == "gen":
		from = "; its answers, errors and to_go are its last row's, maybe behind the index's (query progress)"
	}
	return "it ended without saying so (killed, crashed, or its node lost): its lock is gone" + from + "; run it again to finish"
}

// msTime is a Unix ms time as answers give times; nil for 0 (none).
func msTime(ms int64) any {
	if ms == 0 {
		return nil
	}
	return time.UnixMilli(ms).UTC().Format(timeFormat)
}

func optInt(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// RunLine is the state line of the last run in runs (the answer to
// `runs`), as watch and the web view show it: "run: running since
// 10:14:01 (gen, pid 26557 on vm), 283 to go, last answer 10:14:02",
// "run: stalled: stalled since 03:12: 61 requests held by gpu1:30000,
// which answers no probe", "run: lost (gen, pid 26557 on vm, started
// 10:14:01), 148 answers, 252 to go, ...: it ended without saying so
// ...". "" when there is no run.
func RunLine(runs *Result) string {
	if runs == nil || len(runs.Rows) == 0 {
		return ""
	}
	row := runs.Rows[len(runs.Rows)-1]
	str := func(col string) string { s, _ := runs.Get(row, col).(string); return s }
	clock := func(col string) string {
		t, err := time.Parse(timeFormat, str(col))
		if err != nil {
			return "unknown"
		}
		return t.UTC().Format(time.TimeOnly)
	}
	head, note, started := str("state")+" since "+clock("since"), str("note"), ""
	switch str("state") {
	case store.RunStalled: // the note says since when, and what is held
		head, note = note, ""
	case store.RunLost:
		head, started = store.RunLost, ", started "+clock("start")
	}
	pid := "unknown"
	if n, ok := AsFloat(runs.Get(row, "pid")); ok {
		pid = fmt.Sprintf("%.0f", n)
	}
	line := fmt.Sprintf("run: %s (%s, pid %s on %s%s)", head, str("kind"), pid, str("host"), started)
	if n, ok := AsFloat(runs.Get(row, "answers")); ok && str("state") == store.RunLost {
		line += fmt.Sprintf(", %.0f answer", n) // what it did, as the note says whence
		if n != 1 {
			line += "s"
		}
	}
	if n, ok := AsFloat(runs.Get(row, "to_go")); ok {
		line += fmt.Sprintf(", %.0f to go", n)
	} else if str("kind") == "gen" {
		line += ", to go unknown"
	}
	if str("last_answer") != "" {
		line += ", last answer " + clock("last_answer")
	}
	if note != "" {
		line += ": " + note
	}
	return line
}
