package query

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"gendex/store"
)

// The states of a shard in shardList.
const (
	ShardDone       = "done"          // every prompt of the shard has an answer or a final error
	ShardRunning    = "running"       // a gen writes its answer file, and answered within --quiet
	ShardQuiet      = "quiet"         // a gen holds its answer file, but no answer for longer than --quiet
	ShardStopped    = "stopped short" // no gen writes it, and prompts of it are missing
	ShardNotStarted = "not started"   // no file of the shard
)

// shardList: a sharded run (gen --shard I/N, its files named for their
// shard) by dataset and shard. Every shard 0..N-1 of a dataset whose files
// name N is listed, with its prompts (the dataset's prompt ids that hash
// to it), the answers and errors its files hold, its prompts still
// missing, the time its answer file was last indexed (when it holds an
// answer) and its state (ShardDone, ...): whether a gen is writing its
// answer file is told by the file's lock (gen holds it while it runs, on
// any machine that sees the shared folder), whether it has gone quiet by
// that time. Files of no shard are shard "-". The prompts and missing
// counts walk the dataset's prompt ids (keys only, never a file).
func shardList(v *store.View, names []string, quiet time.Duration, now time.Time, out Sink) error {
	out.Columns([]string{"dataset", "shard", "state", "prompts", "answers", "errors", "missing", "turns", "last_answer"})
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	t := shardTable{rows: map[shardKey]*shardRow{}, counts: map[string]map[int]bool{}}
	if err := t.addFiles(v, want); err != nil {
		return err
	}
	whole, err := t.wholeRuns(v)
	if err != nil {
		return err
	}
	havePrompts, err := t.countPrompts(v)
	if err != nil {
		return err
	}
	for _, k := range t.sortedKeys() {
		r := t.rows[k]
		shard, last := "-", any(nil)
		var prompts, missing any
		if !k.shard.IsZero() {
			shard = k.shard.String()
			if havePrompts[k.dataset] {
				prompts, missing = r.prompts, r.missing
			}
		} else if w, ok := whole[k.dataset]; ok {
			prompts, missing = w[0], w[1]
		}
		if r.last > 0 {
			last = time.Unix(0, r.last).UTC().Format(time.RFC3339)
		}
		state := shardState(r.files, r.answerFile, r.last, missing, quiet, now)
		if err := out.Row([]any{k.dataset, shard, state, prompts, r.answers, r.errors, missing, r.turns, last}); err != nil {
			return err
		}
	}
	return nil
}

// A shardTable is shardList's rows as it gathers them: one per dataset
// and shard (the zero shard: files of no shard), and the shard counts each
// dataset's files name.
type shardTable struct {
	rows   map[shardKey]*shardRow
	counts map[string]map[int]bool
}

type shardKey struct {
	dataset string
	shard   store.Shard
}

type shardRow struct {
	files                  bool
	answers, errors, turns uint64
	last                   int64  // unix ns of the newest answer file
	answerFile             string // the shard's answer file, as indexed
	prompts, missing       uint64
}

// addFiles adds the answer, error and turn files of the datasets in want
// to their shards' rows.
func (t *shardTable) addFiles(v *store.View, want map[string]bool) error {
	return v.Files(func(fs store.FileState) error {
		if !want[fs.Dataset] || (fs.Stage != store.Raw && fs.Stage != store.Errors && fs.Stage != store.Turns) {
			return nil
		}
		sh, _ := store.ShardOfFile(filepath.Base(fs.Path))
		k := shardKey{fs.Dataset, sh}
		r := t.rows[k]
		if r == nil {
			r = &shardRow{}
			t.rows[k] = r
		}
		r.files = true
		if !sh.IsZero() {
			if t.counts[fs.Dataset] == nil {
				t.counts[fs.Dataset] = map[int]bool{}
			}
			t.counts[fs.Dataset][sh.N] = true
		}
		switch fs.Stage {
		case store.Raw:
			r.answers += fs.Records
			if fs.Records > 0 {
				r.last = max(r.last, fs.ModTime)
			}
			r.answerFile = fs.Path
		case store.Errors:
			r.errors += fs.Records
		case store.Turns:
			r.turns += fs.Records
		}
		return nil
	})
}

// wholeRuns returns, for each dataset of no shard's files (one run), its
// prompts and missing answers: the dataset's (MissingRaw: each sample of
// a prompt, as a shard's are counted).
func (t *shardTable) wholeRuns(v *store.View) (map[string][2]uint64, error) {
	whole := map[string][2]uint64{}
	for k := range t.rows {
		if !k.shard.IsZero() || t.counts[k.dataset] != nil {
			continue
		}
		s, err := v.Summary(k.dataset)
		if err != nil {
			return nil, err
		}
		if p := s.Stage(store.Prompts); p.Files > 0 {
			whole[k.dataset] = [2]uint64{p.Records, s.MissingRaw()}
		}
	}
	return whole, nil
}

// countPrompts adds a row for every shard of each count its dataset's
// files name, and counts each shard's prompts and missing answers (each
// sample of a prompt with gen --samples) by walking the dataset's prompt
// ids; it returns the datasets that have prompts.
func (t *shardTable) countPrompts(v *store.View) (map[string]bool, error) {
	havePrompts := map[string]bool{}
	for ds, ns := range t.counts {
		for n := range ns {
			for i := range n {
				if t.rows[shardKey{ds, store.Shard{I: i, N: n}}] == nil {
					t.rows[shardKey{ds, store.Shard{I: i, N: n}}] = &shardRow{}
				}
			}
		}
		s, err := v.Summary(ds)
		if err != nil {
			return nil, err
		}
		if s.Stage(store.Prompts).Files == 0 {
			continue
		}
		havePrompts[ds] = true
		each := func(add func(r *shardRow)) func(id string) error {
			return func(id string) error {
				for n := range ns {
					add(t.rows[shardKey{ds, store.Shard{I: store.ShardOf(store.PromptID(store.Raw, id), n), N: n}}]) // a sample's shard is its prompt's
				}
				return nil
			}
		}
		if err := v.Missing(ds, store.Prompts, each(func(r *shardRow) { r.prompts++ })); err != nil {
			return nil, err
		}
		if err := v.Missing(ds, store.Prompts, each(func(r *shardRow) { r.missing++ }), store.Raw, store.Errors); err != nil {
			return nil, err
		}
	}
	return havePrompts, nil
}

// sortedKeys is the rows' keys by dataset, shard count and shard.
func (t *shardTable) sortedKeys() []shardKey {
	keys := make([]shardKey, 0, len(t.rows))
	for k := range t.rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].dataset != keys[j].dataset {
			return keys[i].dataset < keys[j].dataset
		}
		if keys[i].shard.N != keys[j].shard.N {
			return keys[i].shard.N < keys[j].shard.N
		}
		return keys[i].shard.I < keys[j].shard.I
	})
	return keys
}

// shardState tells a shard's state from its files, whether a gen holds
// its answer file, its last answer's time and its missing prompts (nil:
// unknown).
func shardState(files bool, answerFile string, last int64, missing any, quiet time.Duration, now time.Time) any {
	if !files {
		return ShardNotStarted
	}
	if m, ok := missing.(uint64); ok && m == 0 {
		return ShardDone
	}
	held, known := beingWritten(answerFile)
	recent := last > 0 && now.Sub(time.Unix(0, last)) <= quiet
	switch {
	case known && held && (recent || last == 0 && fileAge(answerFile, now) <= quiet):
		return ShardRunning
	case known && held:
		return ShardQuiet
	case known && missing != nil:
		return ShardStopped
	case known:
		return "stopped"
	case recent: // the file is not where it was indexed: by time alone
		return ShardRunning
	}
	return ShardQuiet
}

// beingWritten reports whether a gen holds the lock on an answer file
// (ingest.OpenOutput's, held while it writes the file); known is false
// when the file cannot be opened here. The probe holds a shared lock for
// a moment, which a gen starting then waits out.
func beingWritten(path string) (held, known bool) {
	if path == "" {
		return false, false
	}
	f, err := os.Open(path)
	if err != nil {
		return false, false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return true, true
	}
	if err != nil {
		return false, false
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return false, true
}

// fileAge is how long ago a file was last written (its mtime).
func fileAge(path string, now time.Time) time.Duration {
	fi, err := os.Stat(path)
	if err != nil {
		return 1<<63 - 1
	}
	return now.Sub(fi.ModTime())
}
