package store

import (
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
)

// Shard is part I of N of a run (0 <= I < N): the prompts whose id hashes
// to I (ShardOf). The zero Shard is the whole run. A sharded gen writes
// its own files in the dataset folder (FileName), so shards never write
// one file, and its index holds only its own prompts' records
// (FileState.Shard).
type Shard struct{ I, N int }

// ShardOf is the shard of id among n: the FNV-1a 64-bit hash of the id's
// bytes, modulo n. It is part of the file format: the same on every
// machine and in every version (TestShardOfIsStable pins it).
func ShardOf(id string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(id))
	return int(h.Sum64() % uint64(n))
}

// ParseShard reads "I/N"; "" is the whole run.
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{}, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if ok && err1 == nil && err2 == nil && n >= 1 && n <= 9999 && i >= n {
		return Shard{}, fmt.Errorf("shard %q: the shards of %d are 0 to %d: with a Slurm array, submit --array=0-%d and give --shard $SLURM_ARRAY_TASK_ID/%d (a step, a list or a 1-based range numbers its tasks otherwise)", s, n, n-1, n-1, n)
	}
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n || n > 9999 {
		return Shard{}, fmt.Errorf("shard %q: want I/N with 0 <= I < N <= 9999, such as 3/16", s)
	}
	return Shard{I: i, N: n}, nil
}

// IsZero reports whether s is the whole run.
func (s Shard) IsZero() bool { return s.N == 0 }

// String is "I/N", or "" for the whole run.
func (s Shard) String() string {
	if s.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d/%d", s.I, s.N)
}

// Has reports whether id belongs to s.
func (s Shard) Has(id string) bool { return s.IsZero() || ShardOf(id, s.N) == s.I }

// FileName gives a stage file's name in shard s: raw_responses.jsonl
// becomes raw_responses.shard-0003-of-0016.jsonl.
func (s Shard) FileName(name string) string {
	if s.IsZero() {
		return name
	}
	base := strings.TrimSuffix(name, ".jsonl")
	return fmt.Sprintf("%s.shard-%04d-of-%04d.jsonl", base, s.I, s.N)
}

var shardFile = regexp.MustCompile(`\.shard-(\d{4})-of-(\d{4})\.jsonl$`)

// ShardOfFile returns the shard a file's name says it belongs to.
func ShardOfFile(name string) (Shard, bool) {
	m := shardFile.FindStringSubmatch(name)
	if m == nil {
		return Shard{}, false
	}
	i, _ := strconv.Atoi(m[1])
	n, _ := strconv.Atoi(m[2])
	if n < 1 || i >= n {
		return Shard{}, false
	}
	return Shard{I: i, N: n}, true
}

// ErrShardCount: a folder holds the files of a run sharded another number
// of ways.
var ErrShardCount = errors.New("sharded another number of ways")

// PromptID is the id of the prompt a record of stage s with id belongs to:
// a turn's id is its unit's with "#i" after it (TurnID), and a unit's is
// its prompt's, with its sample after UnitSep when above 0 (UnitID).
func PromptID(s Stage, id string) string {
	if s == Turns {
		if i := strings.LastIndexByte(id, '#'); i >= 0 {
			id = id[:i]
		}
	}
	p, _ := SplitUnit(id)
	return p
}
