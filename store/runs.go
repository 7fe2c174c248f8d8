package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// The runs of gen and `ingest --follow` on this index, as each said itself:
//
//	runs/                      start unix ms (big-endian uint64) | pid (big-endian uint32) -> Run (JSON)
//
// A run stores its row when it starts, again whenever its state or counts
// change (at most about once a second) and when it ends. The bucket is
// created by the first run, so an older file has none (no runs).
var bucketRuns = []byte("runs")

// The states of a run. Running, Waiting and Stalled are said by a run
// while it goes; Finished, Interrupted, Refused and Failed by a run as it
// ends.
// Lost is never stored: it is what a row that never said it ended is
// when no process holds it (see View.Runs).
const (
	RunRunning     = "running"     // asking (gen) or indexing (follow)
	RunWaiting     = "waiting"     // no server up: waiting for one
	RunStalled     = "stalled"     // a server holds requests and answers none (Run.Detail says which)
	RunFinished    = "finished"    // ended by itself, nothing failed
	RunInterrupted = "interrupted" // ended by Ctrl-C or SIGTERM
	RunFailed      = "failed"      // ended by an error (Run.Detail says which)
	RunRefused     = "refused"     // ended before sending anything, by a check of the command (Run.Detail says which): run as it is, refused again
	RunLost        = "lost"        // ended without saying so: SIGKILL, a crash, a lost node
)

// Run is one run of a writer over this index.
type Run struct {
	Start   int64  `json:"start"` // Unix ms
	Pid     int    `json:"pid"`
	Host    string `json:"host"`
	Kind    string `json:"kind"`    // "gen" or "follow"
	Command string `json:"command"` // as typed, secrets left out
	State   string `json:"state"`   // as the run last said it (see View.Runs)
	// Since is when the state began (Unix ms): the stall's start.
	Since int64 `json:"since,omitempty"`
	// End is when it ended (Unix ms), 0 while it has not said so.
	End int64 `json:"end,omitempty"`
	// ToGo is what the run still owes (gen: prompts without an answer or
	// a final error, and answers being asked again); nil when unknown.
	ToGo *int64 `json:"to_go,omitempty"`
	// Answers and Errors are this run's: gen's answers and final errors;
	// follow's records indexed (Errors nil: not told apart).
	Answers *int64 `json:"answers,omitempty"`
	Errors  *int64 `json:"errors,omitempty"`
	// LastAnswer is the time of the run's last answer (Unix ms), 0: none.
	LastAnswer int64 `json:"last_answer,omitempty"`
	// Detail says more of the state: a stall's sentence, or why it ended.
	Detail string `json:"detail,omitempty"`
	// Datasets are the datasets a gen run asks, and AtStart what the
	// index held of them when it started: what a lost run's counts are
	// read from (see View.Runs). Both nil for a follow, or a row stored
	// before they were kept.
	Datasets []string `json:"datasets,omitempty"`
	AtStart  *Tally   `json:"at_start,omitempty"`
	// Indexed is, for a lost gen run, what the index says it did: the
	// answers it made and the prompts it failed (Answered, Failed: its
	// datasets' at its end less AtStart), and what they owed at its end
	// (ToGo). nil when unknown (see View.Runs). Not stored.
	Indexed *Tally `json:"-"`
	// Held: this process holds the index for the run, which goes on. Not
	// stored; set by View.Runs.
	Held bool `json:"-"`
}

func (r *Run) key() []byte {
	return binary.BigEndian.AppendUint32(u64key(uint64(max(r.Start, 0))), uint32(r.Pid))
}

// Ended reports whether the run said it ended.
func (r *Run) Ended() bool { return r.End != 0 }

// PutRun stores r, replacing its earlier row (same start and pid).
func (tx *Tx) PutRun(r *Run) error {
	if r.Start <= 0 || r.State == "" {
		return fmt.Errorf("run without a start or a state")
	}
	b, err := tx.btx.CreateBucketIfNotExists(bucketRuns)
	if err != nil {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return b.Put(r.key(), v)
}

// HoldRun marks r as going on in this process, which holds the index
// open for writing; ReleaseRun when it ends. A row that has not said it
// ended and is not held by the process reading it is lost: the writer
// that stored it no longer holds the file's lock (a read-only handle
// excludes every writer; a writer is the only one), whatever process may
// have its pid now.
func (db *DB) HoldRun(r *Run) { db.held.Store(string(r.key()), true) }

// ReleaseRun: r no longer goes on in this process.
func (db *DB) ReleaseRun(r *Run) { db.held.Delete(string(r.key())) }

// Runs calls fn with every run, oldest first: its state as it last said
// it, or RunLost for one that never said it ended and is not held by this
// process (see HoldRun). A lost run's last row is a snapshot that may be
// seconds behind what it did: Indexed says what the index knows of it
// (see lostCounts).
func (v *View) Runs(fn func(r *Run) error) error {
	b := v.btx.Bucket(bucketRuns)
	if b == nil {
		return nil
	}
	var runs []*Run // one row a run: a few per index
	c := b.Cursor()
	for k, val := c.First(); k != nil; k, val = c.Next() {
		r := new(Run)
		if err := json.Unmarshal(val, r); err != nil {
			return fmt.Errorf("run at %d: %w", binary.BigEndian.Uint64(k), err)
		}
		if v.db != nil {
			_, r.Held = v.db.held.Load(string(k))
		}
		if !r.Ended() && !r.Held {
			r.State, r.Since = RunLost, 0
		}
		runs = append(runs, r)
	}
	for i, r := range runs {
		if r.State == RunLost {
			var next *Run
			if i+1 < len(runs) {
				next = runs[i+1]
			}
			r.Indexed = lostCounts(v, r, next)
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}
