package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gendex/store"
)

// A sharded run claims its answer folders before its first request: its
// own answer file (raw_responses.shard-I-of-N.jsonl) is created at once,
// empty, and only then is the folder looked at for the files of a run
// sharded another number of ways, empty ones included. So the first shard
// to start fixes N for the folder, and of two starts at the same instant
// with two counts, at least one sees the other's file and is refused (a
// refused start takes back the file it created): no prompt is answered by
// both.

// claimShards claims each dataset's answer folder for shard's count.
func claimShards(sets []Dataset, shard store.Shard) error {
	if shard.IsZero() {
		return nil
	}
	var created []string
	undo := func() {
		for _, p := range created {
			if fi, err := os.Stat(p); err == nil && fi.Size() == 0 {
				os.Remove(p)
			}
		}
	}
	var conflicts shardConflicts
	for _, d := range sets {
		dir := filepath.Dir(d.Raw)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			undo()
			return fmt.Errorf("output folder: %w", err)
		}
		f, err := os.OpenFile(d.Raw, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		switch {
		case err == nil:
			f.Close()
			created = append(created, d.Raw)
		case !os.IsExist(err):
			undo()
			return err
		}
		conflicts.add(d.Name, dir, shard)
	}
	if err := conflicts.err(shard); err != nil {
		undo()
		return err
	}
	return nil
}

// shardConflicts are the answer folders that hold the files of runs
// sharded another number of ways than this run.
type shardConflicts struct {
	folders []shardConflict
	seen    map[string]bool
}

type shardConflict struct {
	dataset, dir string
	other        map[int][]string // count -> file names
}

// add notes dir (dataset's answer folder) when it holds another count's
// files.
func (c *shardConflicts) add(dataset, dir string, shard store.Shard) {
	if c.seen[dir] {
		return
	}
	if other := otherCounts(dir, shard.N); len(other) > 0 {
		if c.seen == nil {
			c.seen = map[string]bool{}
		}
		c.seen[dir] = true
		c.folders = append(c.folders, shardConflict{dataset, dir, other})
	}
}

// err is the refusal naming every such folder, with the commands that move
// the other runs' files out of them; nil when there is none.
func (c *shardConflicts) err(shard store.Shard) error {
	if len(c.folders) == 0 {
		return nil
	}
	var b strings.Builder
	var moves []string
	counts := map[int]bool{}
	for _, f := range c.folders {
		ns := make([]int, 0, len(f.other))
		for n := range f.other {
			ns = append(ns, n)
			counts[n] = true
		}
		sort.Ints(ns)
		for _, n := range ns {
			files := f.other[n]
			sort.Strings(files)
			more := ""
			if len(files) > 3 {
				more = fmt.Sprintf(" and %d more", len(files)-3)
				files = files[:3]
			}
			fmt.Fprintf(&b, "  %s: %s holds the files of a run %v (%d: %s%s)\n", f.dataset, f.dir, store.ErrShardCount, n, strings.Join(files, ", "), more)
			away := filepath.Join(f.dir, fmt.Sprintf("sharded-%d-ways", n))
			moves = append(moves, fmt.Sprintf("    mkdir -p %s && mv %s %s/", shellQuote(away),
				filepath.Join(shellQuote(f.dir), fmt.Sprintf("*.shard-*-of-%04d.jsonl", n)), shellQuote(away)))
		}
	}
	ns := make([]string, 0, len(counts))
	for n := range counts {
		ns = append(ns, fmt.Sprintf("--shard I/%d", n))
	}
	sort.Strings(ns)
	return fmt.Errorf("this run is --shard %s, and its folders hold the files of another count: its shards would not know each other's answers, and could answer their prompts twice:\n%s"+
		"Run it as %s, or, once that run is over, move its files out of the folders (the index then forgets them, and their prompts are asked again):\n%s",
		shard, b.String(), strings.Join(ns, " or "), strings.Join(moves, "\n"))
}

// otherCounts returns the files in dir of runs sharded other than n ways,
// by count.
func otherCounts(dir string, n int) map[int][]string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := map[int][]string{}
	for _, e := range entries {
		if s, ok := store.ShardOfFile(e.Name()); ok && s.N != n && !e.IsDir() {
			out[s.N] = append(out[s.N], e.Name())
		}
	}
	return out
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
