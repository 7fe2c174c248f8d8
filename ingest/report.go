package ingest

import (
	"fmt"
	"io"
	"sort"
	"sync"
)

// Kind classifies a problem found in an input file.
type Kind int

// The kinds of problem. Skipped lines are lost to the index until fixed;
// the others are indexed (or waited for) and only reported.
const (
	Invalid     Kind = iota // not JSON, or not an object: skipped
	NoID                    // no id: skipped
	Duplicate               // id already indexed for this stage: counted once
	NoTokens                // no token count anywhere: indexed as unknown
	Torn                    // last line has no newline yet: not indexed until complete
	Reindexed               // file truncated or replaced: its records were indexed again
	LineIDGiven             // a prompt without an id: indexed under its LineID
	Unstorable              // beyond the index's limits (store.CheckRecord): skipped
	BadCount                // a count out of range: indexed with that count unknown
	ServerID                // indexed under an id no prompt carries (the server's request id, or the answer's file and line)
	Gone                    // a counted file gone, shorter, replaced or changed: its records were forgotten (CheckDisk)
	Moved                   // a counted file found at a new path (its folder moved): its records count there
	numKinds
)

var kindNames = [numKinds]string{"invalid JSON", "no id", "duplicate id", "no token count", "incomplete last line", "re-indexed", "prompt without id",
	"not storable", "count out of range", "id no prompt carries", "forgotten (not on the disk as indexed)", "moved"}

func (k Kind) String() string { return kindNames[k] }

// Skips reports whether a problem of this kind leaves a line out of the index.
func (k Kind) Skips() bool { return k == Invalid || k == NoID || k == Unstorable }

// Problem is one finding, located by file and line.
type Problem struct {
	Path string
	Line int64
	Kind Kind
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.Path, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.Path, p.Msg)
}

// Reporter prints the first few problems of each kind in each file to W as
// they are found, and counts all of them for Summary.
type Reporter struct {
	W       io.Writer
	PerKind int // problems printed per file and kind; 0 means 5

	mu     sync.Mutex
	counts map[string]*[numKinds]int
	order  []string
}

// Report records p, printing it if it is among the first of its kind.
func (r *Reporter) Report(p Problem) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = make(map[string]*[numKinds]int)
	}
	c := r.counts[p.Path]
	if c == nil {
		c = new([numKinds]int)
		r.counts[p.Path] = c
		r.order = append(r.order, p.Path)
	}
	c[p.Kind]++
	limit := r.PerKind
	if limit == 0 {
		limit = 5
	}
	if r.W != nil && c[p.Kind] <= limit {
		level := "warning"
		if p.Kind.Skips() {
			level = "error"
		}
		fmt.Fprintf(r.W, "%s: %s\n", level, p)
	}
}

// Count returns how many problems of kind k were reported in all files.
func (r *Reporter) Count(k Kind) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.counts {
		n += c[k]
	}
	return n
}

// Total returns how many problems were reported, of every kind.
func (r *Reporter) Total() int {
	n := 0
	for k := Kind(0); k < numKinds; k++ {
		n += r.Count(k)
	}
	return n
}

// Skipped returns how many lines were left out of the index.
func (r *Reporter) Skipped() int {
	n := 0
	for k := Kind(0); k < numKinds; k++ {
		if k.Skips() {
			n += r.Count(k)
		}
	}
	return n
}

// Summary writes one line per file that had problems, with counts by kind.
func (r *Reporter) Summary(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	paths := append([]string(nil), r.order...)
	sort.Strings(paths)
	for _, p := range paths {
		c := r.counts[p]
		line := ""
		for k := Kind(0); k < numKinds; k++ {
			if c[k] > 0 {
				if line != "" {
					line += ", "
				}
				line += fmt.Sprintf("%d %s", c[k], k)
			}
		}
		fmt.Fprintf(w, "%s: %s\n", p, line)
	}
}
