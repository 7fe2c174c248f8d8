package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"gendex/ingest"
	"gendex/store"
)

// ingestReread is `gendex ingest --reread FILE...`: the index forgets
// each file and reads it again from its first byte, once, through the
// same code as ingest, as the dataset and stage (and --id) it holds the
// file under. It is the fix for a file changed where no end of it shows
// (an answer line edited in place: check's files_changed). A file that is
// gone is forgotten, and said so.
func ingestReread(ctx context.Context, env *Env, db *store.DB, paths []string) error {
	say := messages(env)
	srcs, err := rereadSources(db, paths)
	if err != nil {
		return err
	}
	rep := &ingest.Reporter{W: say}
	ix := &ingest.Indexer{DB: db, Report: rep.Report}
	// The disk is the truth first, as for every writer: a file gone or
	// changed is forgotten here, and then read once below.
	if err := ix.CheckDisk(ctx, srcs); err != nil {
		return err
	}
	for _, src := range srcs {
		if _, err := os.Stat(src.Path); errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(say, "%s is gone: the index counts nothing of it now\n", src.Path)
			continue
		}
		res, err := ix.Reread(ctx, src)
		if err != nil {
			return err
		}
		fmt.Fprintf(say, "read %s again from its start (dataset %s, stage %s): records: %d\n", src.Path, src.Dataset, src.Stage, res.Added)
	}
	ix.SayForgotten()
	return ingestVerdict(say, rep)
}

// rereadSources are the files at paths as the index holds them: its
// dataset, stage and the rest it remembers (an empty id path keeps the
// one remembered). A path the index holds no file at is "not there"; a
// folder is a usage error.
func rereadSources(db *store.DB, paths []string) ([]ingest.Source, error) {
	var srcs []ingest.Source
	for _, p := range paths {
		path, err := ingest.CanonicalPath(p)
		if err != nil {
			return nil, err
		}
		if fi, err := os.Stat(path); err == nil && fi.IsDir() {
			return nil, usagef("ingest --reread: %s is a folder; give the files to read again ('gendex query files' lists them)", p)
		}
		var st store.FileState
		var known bool
		if err := db.View(func(v *store.View) (err error) { st, known, err = v.File(path); return err }); err != nil {
			return nil, err
		}
		if !known {
			return nil, store.NotFound("ingest --reread: the index holds no file at %s ('gendex query files' lists those it holds; 'gendex ingest %s' reads a new one)", path, ingest.ShellQuote(p))
		}
		srcs = append(srcs, ingest.Source{Path: path, Dataset: st.Dataset, Stage: st.Stage})
	}
	return srcs, nil
}
