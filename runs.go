package main

import (
	"context"
	"os"
	"strings"
	"time"

	"gendex/ingest"
	"gendex/ingest/gen/client"
	"gendex/store"
)

// commandLine is args as a run's row keeps them (`gendex query runs`):
// shell-quoted, the program by its base name, an --api-key's value and a
// server URL's credentials left out.
func commandLine(args []string) string {
	out := make([]string, 0, len(args))
	secret := false
	for i, a := range args {
		switch {
		case i == 0:
			a = "gendex"
		case secret:
			a, secret = "REDACTED", false
		case a == "--api-key" || a == "-api-key":
			secret = true
		case strings.HasPrefix(a, "--api-key=") || strings.HasPrefix(a, "-api-key="):
			a = a[:strings.IndexByte(a, '=')+1] + "REDACTED"
		case strings.Contains(a, "://"):
			if k := strings.IndexByte(a, '='); k >= 0 && k < strings.Index(a, "://") {
				a = a[:k+1] + client.RedactURL(a[k+1:])
			} else {
				a = client.RedactURL(a)
			}
		}
		out = append(out, ingest.ShellQuote(a))
	}
	return strings.Join(out, " ")
}

// followRun is the row of an `ingest --follow` in the index's runs: stored
// when it starts and whenever it indexed more (at most once a second),
// and as interrupted when it ends (a follow ends by Ctrl-C or SIGTERM).
type followRun struct {
	db     *store.DB
	row    store.Run
	n      int64
	stored time.Time
	dirty  bool // counted more since it was stored
}

// startFollowRun stores and holds the row of a follow starting now.
func startFollowRun(db *store.DB, now time.Time) *followRun {
	host, _ := os.Hostname()
	f := &followRun{db: db, row: store.Run{Start: now.UnixMilli(), Pid: os.Getpid(), Host: host, Kind: "follow",
		Command: commandLine(os.Args), State: store.RunRunning, Since: now.UnixMilli(), Answers: new(int64)}}
	db.HoldRun(&f.row)
	f.store()
	return f
}

func (f *followRun) store() {
	row := f.row
	n := f.n
	row.Answers = &n
	f.db.Update(func(tx *store.Tx) error { return tx.PutRun(&row) })
	f.stored, f.dirty = time.Now(), false
}

// indexed counts n more records indexed now.
func (f *followRun) indexed(n int, now time.Time) {
	if n > 0 {
		f.n += int64(n)
		f.row.LastAnswer = now.UnixMilli()
		f.dirty = true
	}
	if f.dirty && time.Since(f.stored) >= time.Second {
		f.store()
	}
}

// end stores the row as ended: interrupted when ctx was, else finished.
func (f *followRun) end(ctx context.Context, now time.Time) {
	f.row.End, f.row.Since = now.UnixMilli(), now.UnixMilli()
	f.row.State = store.RunFinished
	if ctx.Err() != nil {
		f.row.State = store.RunInterrupted
	}
	f.store()
	f.db.ReleaseRun(&f.row)
}
