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
		if other := otherCounts(dir, shard.N); len(other) > 0 {
			undo()
			return shardClaimError(d.Name, dir, shard, other)
		}
	}
	return nil
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

func shardClaimError(dataset, dir string, shard store.Shard, other map[int][]string) error {
	counts := make([]int, 0, len(other))
	for n := range other {
		counts = append(counts, n)
	}
	sort.Ints(counts)
	n := counts[0]
	files := other[n]
	sort.Strings(files)
	more := ""
	if len(files) > 3 {
		more = fmt.Sprintf(" and %d more", len(files)-3)
		files = files[:3]
	}
	away := filepath.Join(dir, fmt.Sprintf("sharded-%d-ways", n))
	return fmt.Errorf("%s: %s belongs to a run %w (%d: %s%s), and this one is --shard %s: its shards would not know each other's answers, and could answer their prompts twice.\n"+
		"Run it as --shard I/%d (I from 0 to %d), or, once that run is over, move its files out of the folder (the index then forgets them, and their prompts are asked again):\n"+
		"    mkdir -p %s && mv %s %s/",
		dataset, dir, store.ErrShardCount, n, strings.Join(files, ", "), more, shard, n, n-1,
		shellQuote(away), filepath.Join(shellQuote(dir), fmt.Sprintf("*.shard-*-of-%04d.jsonl", n)), shellQuote(away))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
