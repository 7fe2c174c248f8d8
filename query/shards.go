package query

import (
	"path/filepath"
	"sort"
	"time"

	"gendex/store"
)

// shardList: a sharded run (gen --shard I/N, its files named for their
// shard) by dataset and shard: answers and errors the shard's files hold,
// the time its answer file was last indexed, and whether it has gone quiet
// (nothing indexed for longer than quiet: "yes" or "no", as server's
// "up"). Files of no shard are shard
// "-". The times are the files' own (as last indexed), so this works on
// any machine that indexes the shared folder (gendex ingest --follow).
func shardList(v *store.View, names []string, quiet time.Duration, now time.Time, out Sink) error {
	out.Columns([]string{"dataset", "shard", "answers", "errors", "turns", "last_answer", "quiet"})
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	type key struct {
		dataset string
		shard   store.Shard
	}
	type row struct {
		answers, errors, turns uint64
		last                   int64 // unix ns of the newest answer file
	}
	rows := map[key]*row{}
	err := v.Files(func(fs store.FileState) error {
		if !want[fs.Dataset] || (fs.Stage != store.Raw && fs.Stage != store.Errors && fs.Stage != store.Turns) {
			return nil
		}
		sh, _ := store.ShardOfFile(filepath.Base(fs.Path))
		k := key{fs.Dataset, sh}
		r := rows[k]
		if r == nil {
			r = &row{}
			rows[k] = r
		}
		switch fs.Stage {
		case store.Raw:
			r.answers += fs.Records
			r.last = max(r.last, fs.ModTime)
		case store.Errors:
			r.errors += fs.Records
		case store.Turns:
			r.turns += fs.Records
		}
		return nil
	})
	if err != nil {
		return err
	}
	keys := make([]key, 0, len(rows))
	for k := range rows {
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
	for _, k := range keys {
		r := rows[k]
		shard, last, isQuiet := "-", any(nil), any(nil)
		if !k.shard.IsZero() {
			shard = k.shard.String()
		}
		if r.last > 0 {
			t := time.Unix(0, r.last).UTC()
			last = t.Format(time.RFC3339)
			isQuiet = "no"
			if now.Sub(t) > quiet {
				isQuiet = "yes"
			}
		}
		if err := out.Row([]any{k.dataset, shard, r.answers, r.errors, r.turns, last, isQuiet}); err != nil {
			return err
		}
	}
	return nil
}
