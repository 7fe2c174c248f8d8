package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"gendex/ingest"
	"gendex/store"
)

// runDrop removes datasets from the index, named or by a folder that holds
// some of their files; the files are never touched.
func runDrop(ctx context.Context, c *call, args []string) error {
	fs := c.flags()
	names, err := c.parse(fs, args)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return usagef("drop: give at least one DATASET (as 'gendex query datasets' lists them) or FOLDER")
	}
	db, err := store.Open(c.db, store.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	var drop []string
	sums := map[string]store.Summary{}
	err = db.View(func(v *store.View) error {
		if drop, err = dropTargets(v, names); err != nil {
			return err
		}
		for _, name := range drop {
			if sums[name], err = v.Summary(name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range drop {
		sum := sums[name]
		var files []store.FileState
		err := db.Update(func(tx *store.Tx) (err error) {
			files, err = tx.DropDataset(name)
			return err
		})
		if err != nil {
			return fmt.Errorf("drop %s: %w", name, err)
		}
		fmt.Fprintf(messages(c.env), "dropped %s: %d prompts, %d answers, %d errors, %d records, %d exclusions from %d files (the files are untouched: 'gendex ingest' or 'gendex gen' reads them again)\n",
			name, sum.Stage(store.Prompts).Records, sum.Stage(store.Raw).Records, sum.Stage(store.Errors).Records,
			sum.Stage(store.Tokenized).Records, sum.Stage(store.Excluded).Records, len(files))
	}
	return nil
}

// dropTargets resolves each argument to datasets: a dataset's name, or a
// path (a folder or file) under which some of a dataset's files lie.
func dropTargets(v *store.View, args []string) ([]string, error) {
	known := v.Datasets()
	byDir := map[string]map[string]bool{} // dataset -> its files' paths
	if err := v.Files(func(f store.FileState) error {
		if byDir[f.Dataset] == nil {
			byDir[f.Dataset] = map[string]bool{}
		}
		byDir[f.Dataset][f.Path] = true
		return nil
	}); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, arg := range args {
		if v.HasDataset(arg) {
			add(arg)
			continue
		}
		if _, err := os.Stat(arg); err != nil && !strings.ContainsRune(arg, os.PathSeparator) {
			return nil, store.NotFound("drop: no dataset %q in the index (%s)", arg, holds(known))
		}
		abs, err := ingest.CanonicalPath(arg)
		if err != nil {
			return nil, err
		}
		var found []string
		for name, paths := range byDir {
			for p := range paths {
				if p == abs || strings.HasPrefix(p, abs+string(os.PathSeparator)) {
					found = append(found, name)
					break
				}
			}
		}
		if len(found) == 0 {
			return nil, store.NotFound("drop: no dataset of the index has files under %s (%s)", abs, holds(known))
		}
		sort.Strings(found)
		for _, name := range found {
			add(name)
		}
	}
	return out, nil
}

// holds says which datasets an index holds.
func holds(names []string) string {
	if len(names) == 0 {
		return "it holds none"
	}
	return "it holds " + strings.Join(names, ", ")
}
