package gen

import (
	"fmt"
	"path/filepath"
	"strings"

	"gendex/ingest"
	"gendex/store"
)

// Dataset is one folder of prompts and where its answers go.
type Dataset struct {
	Name    string
	Prompts []string // prompts*.jsonl, sorted
	Raw     string   // raw_responses.jsonl
	Errors  string   // errors.jsonl
	Turns   string   // turns.jsonl: the earlier turns of conversations, beside Raw
	// Tokenized and Excluded are gen --export's outputs, beside Raw.
	Tokenized, Excluded string
	// Others are the dataset's other stage files in its answer folder
	// (raw_responses*, tokenized*, errors* shards other than Raw and
	// Errors), found by ingest.Discover: beside the prompts, or in
	// --out DIR/<dataset>/ (then not those beside the prompts: answers
	// elsewhere never stand in). They are indexed before deciding what is
	// left to answer, and never written.
	Others []ingest.Source
}

// FindDatasets lists the datasets under each path: a folder holding
// prompts*.jsonl is a dataset (named after the folder); otherwise each of
// its subfolders that holds some is. Output files go beside the prompts, or
// under out/<dataset>/ when out is set.
func FindDatasets(paths []string, out string) ([]Dataset, error) {
	return FindShardDatasets(paths, out, store.Shard{})
}

// FindShardDatasets is FindDatasets for shard (the zero Shard: the whole
// run). A shard's output files are named for it (store.Shard.FileName),
// and the other shards' files are not its Others. A folder holding the
// files of a run sharded another number of ways is refused: its answers
// would not be known to this run's shards.
func FindShardDatasets(paths []string, out string, shard store.Shard) ([]Dataset, error) {
	var sets []Dataset
	var conflicts shardConflicts
	seen := map[string]string{}
	for _, p := range paths {
		srcs, err := ingest.Discover(p, "", nil)
		if err != nil {
			return nil, err
		}
		byName := map[string]*Dataset{}
		var order []string
		for _, s := range srcs {
			if s.Stage != store.Prompts {
				continue
			}
			d := byName[s.Dataset]
			if d == nil {
				dir := filepath.Dir(s.Path)
				if out != "" {
					abs, err := ingest.CanonicalPath(out)
					if err != nil {
						return nil, err
					}
					dir = filepath.Join(abs, s.Dataset)
				}
				name := func(file string) string { return filepath.Join(dir, shard.FileName(file)) }
				d = &Dataset{Name: s.Dataset, Raw: name("raw_responses.jsonl"), Errors: name("errors.jsonl"),
					Turns: name("turns.jsonl"), Tokenized: name("tokenized.jsonl"), Excluded: name("excluded.jsonl")}
				byName[s.Dataset] = d
				order = append(order, s.Dataset)
			}
			d.Prompts = append(d.Prompts, s.Path)
		}
		// The answer folder's other stage files (shards) count; those
		// beside the prompts count only when the answers go there too.
		for _, s := range srcs {
			if d := byName[s.Dataset]; d != nil && out == "" {
				d.addOther(s, shard, &conflicts)
			}
		}
		for _, name := range order {
			d := byName[name]
			if out != "" {
				if more, err := ingest.Discover(filepath.Dir(d.Raw), name, nil); err == nil {
					for _, s := range more {
						d.addOther(s, shard, &conflicts)
					}
				}
			}
			if prev, dup := seen[name]; dup {
				if prev == filepath.Dir(d.Prompts[0]) {
					continue // the same folder given twice (a glob and its path): one dataset
				}
				return nil, fmt.Errorf("two datasets are named %s (%s and %s); rename one folder", name, prev, filepath.Dir(d.Prompts[0]))
			}
			seen[name] = filepath.Dir(d.Prompts[0])
			sets = append(sets, *d)
		}
	}
	if len(sets) == 0 {
		for _, p := range paths {
			if below := ingest.RootBelow(p); below != "" {
				return nil, fmt.Errorf("no prompts*.jsonl under %s: its datasets are one folder further down; did you mean %s?", strings.Join(paths, ", "), below)
			}
		}
		return nil, fmt.Errorf("no prompts*.jsonl under %s", strings.Join(paths, ", "))
	}
	if err := conflicts.err(shard); err != nil {
		return nil, err
	}
	return sets, nil
}

// addOther adds s to d.Others when it is one of the answer folder's stage
// files that a run (of shard) reads: not a prompts file, not d's own
// output, not another shard's file. A shard file of another count is
// noted in conflicts (the run is refused: store.ErrShardCount).
func (d *Dataset) addOther(s ingest.Source, shard store.Shard, conflicts *shardConflicts) {
	if s.Stage == store.Prompts || d.isOutput(s.Path) {
		return
	}
	if of, ok := store.ShardOfFile(s.Path); ok && !shard.IsZero() && of != shard {
		if of.N != shard.N { // (empty ones too: see claimShards)
			conflicts.add(d.Name, filepath.Dir(s.Path), shard)
		}
		return // another shard's: its own index counts it
	}
	if _, ok := store.ShardOfFile(s.Path); !ok {
		s.Shard = shard // an unsharded file: only this shard's records
	}
	d.Others = append(d.Others, s)
}

// sourcesOf lists every file of datasets a run reads or writes, as the
// index counts them.
func sourcesOf(datasets []Dataset) []ingest.Source {
	var out []ingest.Source
	for _, d := range datasets {
		for _, p := range d.Prompts {
			out = append(out, ingest.Source{Path: p, Dataset: d.Name, Stage: store.Prompts})
		}
		for _, f := range []struct {
			path  string
			stage store.Stage
		}{{d.Raw, store.Raw}, {d.Errors, store.Errors}, {d.Turns, store.Turns}, {d.Tokenized, store.Tokenized}, {d.Excluded, store.Excluded}} {
			out = append(out, ingest.Source{Path: f.path, Dataset: d.Name, Stage: f.stage})
		}
		out = append(out, d.Others...)
	}
	return out
}

// isOutput reports whether path is one of the files gen writes for d.
func (d *Dataset) isOutput(path string) bool {
	return path == d.Raw || path == d.Errors || path == d.Turns
}
