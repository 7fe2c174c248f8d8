package ingest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gendex/store"
)

// File names a dataset folder holds, by stage: <prefix>*.jsonl.
var stagePrefixes = []struct {
	prefix string
	stage  store.Stage
}{
	{"prompts", store.Prompts},
	{"raw_responses", store.Raw},
	{"tokenized", store.Tokenized},
	{"errors", store.Errors},
	{"turns", store.Turns},
	{"excluded", store.Excluded},
}

// ErrStageNeedsFile: a stage was given for a folder.
var ErrStageNeedsFile = errors.New("--stage applies to a single file, not a folder")

// StageOf returns the stage a file belongs to by its name
// (prompts*.jsonl, raw_responses*.jsonl, tokenized*.jsonl, errors*.jsonl,
// turns*.jsonl, excluded*.jsonl).
func StageOf(name string) (store.Stage, bool) {
	base := filepath.Base(name)
	if !strings.HasSuffix(base, ".jsonl") {
		return 0, false
	}
	for _, p := range stagePrefixes {
		if strings.HasPrefix(base, p.prefix) {
			return p.stage, true
		}
	}
	return 0, false
}

// Discover lists the input files under path, which is a dataset root
// (ROOT/<dataset>/<stage files>), one dataset folder, or one file. A file
// needs dataset and stage unless its folder and name say them (an empty
// dataset means "from the folder name"; a nil stage means "from the name").
//
// Each Source.Path is canonical (CanonicalPath: symlinks resolved), so one
// file reached by two spellings is one file; a dataset keeps the name of
// its folder as given.
func Discover(path, dataset string, stage *store.Stage) ([]Source, error) {
	srcs, err := discover(path, dataset, stage)
	for i := range srcs {
		if real, err := CanonicalPath(srcs[i].Path); err == nil {
			srcs[i].Path = real
		}
	}
	return srcs, err
}

func discover(path, dataset string, stage *store.Stage) ([]Source, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s: no such file or folder%s", path, similarPath(path))
	}
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		src := Source{Path: abs, Dataset: dataset}
		if src.Dataset == "" {
			src.Dataset = filepath.Base(filepath.Dir(abs))
		}
		if stage != nil {
			src.Stage = *stage
		} else if st, ok := StageOf(abs); ok {
			src.Stage = st
		} else {
			return nil, fmt.Errorf("%s: cannot tell the stage from the file name; give --stage prompts|raw|tokenized", path)
		}
		return []Source{src}, nil
	}
	if stage != nil {
		return nil, fmt.Errorf("%s: %w", path, ErrStageNeedsFile)
	}
	own, err := datasetFiles(abs, dataset)
	if err != nil {
		return nil, err
	}
	if len(own) > 0 {
		return own, nil
	}
	if dataset != "" {
		return nil, fmt.Errorf("%s: no prompts*, raw_responses*, tokenized* or errors* .jsonl files in this folder", path)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return nil, err
	}
	var all []Source
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		srcs, err := datasetFiles(filepath.Join(abs, e.Name()), "")
		if err != nil {
			return nil, err
		}
		all = append(all, srcs...)
	}
	return all, nil
}

// datasetFiles lists a dataset folder's stage files, sorted by name.
func datasetFiles(dir, dataset string) ([]Source, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	if dataset == "" {
		dataset = filepath.Base(dir)
	}
	var out []Source
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		if st, ok := StageOf(e.Name()); ok {
			out = append(out, Source{Path: filepath.Join(dir, e.Name()), Dataset: dataset, Stage: st})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}
