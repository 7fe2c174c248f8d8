package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"gendex/store"
)

// The disk is the truth (README, "What counts as answered"): an index
// opened for writing first checks every file it counts, so that it never
// believes in answers that are no longer there.

// CheckDisk checks every file the index counts against the disk, before a
// writer reads anything:
//   - a file that is gone is forgotten (its records removed, so its
//     prompts are unanswered again unless another file answers them),
//     said with its path and count by SayForgotten, unless
//     one of candidates (the files this run reads) is that very file at a
//     new path (the same device and inode, as after mv of its folder): the
//     index then moves it there and reads nothing again;
//   - a file indexed under another spelling of its path (through a
//     symlink) that candidates name by its real path is moved there;
//   - a file shorter than what was indexed, another file at its path (a new
//     inode), or one whose bytes changed under its offset (its first bytes,
//     or those that end where it was indexed to: rewritten in place) is
//     forgotten too; reading it again is the indexer's (IndexFile), as for
//     any such file.
//
// A file that cannot be looked at for another reason (permissions, an
// unreachable mount) is left as it is, with a warning: only a file known to
// be gone or changed is forgotten.
func (ix *Indexer) CheckDisk(ctx context.Context, candidates []Source) error {
	ix.SayForgotten() // what an earlier check left unsaid
	var held []store.FileState
	err := ix.DB.View(func(v *store.View) error {
		return v.Files(func(f store.FileState) error {
			if f.ID != 0 && f.Phase == store.PhaseReady {
				held = append(held, f)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	known := make(map[string]bool, len(held))
	for _, f := range held {
		known[f.Path] = true
	}
	wanted := make(map[string]bool, len(candidates))
	for _, c := range candidates {
		wanted[c.Path] = true
	}
	// The candidates the index does not hold yet, by identity: where a
	// gone file may have moved.
	type identity struct{ dev, ino uint64 }
	var fresh map[identity]Source
	freshOf := func() map[identity]Source {
		if fresh != nil {
			return fresh
		}
		fresh = map[identity]Source{}
		for _, c := range candidates {
			if known[c.Path] {
				continue
			}
			if fi, err := os.Stat(c.Path); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					fresh[identity{uint64(st.Dev), st.Ino}] = c
				}
			}
		}
		return fresh
	}
	for _, f := range held {
		if err := ctx.Err(); err != nil {
			return err
		}
		why, err := changed(f)
		if err != nil {
			ix.report(Problem{Path: f.Path, Kind: Gone, Msg: fmt.Sprintf("cannot be checked (%v); its %d records are still counted", err, f.Records)})
			continue
		}
		if why == "" {
			// Indexed under another spelling (a symlink, by an older gendex):
			// the file this run reads by its real path is that file.
			if real, err := filepath.EvalSymlinks(f.Path); err == nil && real != f.Path && !known[real] && wanted[real] {
				if err := ix.DB.Update(func(tx *store.Tx) error { _, err := tx.MoveFile(f.Path, real, nil); return err }); err != nil {
					return fmt.Errorf("moving %s to %s in the index: %w", f.Path, real, err)
				}
				known[real] = true
			}
			continue
		}
		if why == whyGone {
			if c, ok := freshOf()[identity{f.Dev, f.Ino}]; ok && c.Dataset == f.Dataset && c.Stage == f.Stage {
				if id, err := sameFile(f, c.Path); err == nil {
					if err := ix.DB.Update(func(tx *store.Tx) error { _, err := tx.MoveFile(f.Path, c.Path, &id); return err }); err != nil {
						return fmt.Errorf("moving %s to %s in the index: %w", f.Path, c.Path, err)
					}
					ix.report(Problem{Path: c.Path, Kind: Moved, Msg: fmt.Sprintf("the same file as %s, which is gone: its %d records count here; nothing is read again", f.Path, f.Records)})
					continue
				}
			}
		}
		var ids []string
		if strings.HasPrefix(why, whyGone) {
			if ids, err = ix.answersOf(f); err != nil {
				return err
			}
		}
		if err := ix.forget(ctx, f, true); err != nil {
			return err
		}
		if strings.HasPrefix(why, whyGone) { // said once the run's files are read (SayForgotten)
			ix.mu.Lock()
			ix.gone = append(ix.gone, goneFile{f: f, why: why, ids: ids})
			ix.mu.Unlock()
			continue
		}
		msg := fmt.Sprintf("%s: its %d records are forgotten; it is read again from its start", why, f.Records)
		if f.IDPath != "" {
			msg += fmt.Sprintf("; the --id path %s given for it is forgotten too (give --id again if the lines at its path keep their ids there)", f.IDPath)
		}
		ix.report(Problem{Path: f.Path, Kind: Gone, Msg: msg})
	}
	return nil
}

const whyGone = "the file is gone"

// Changed is the decision CheckDisk takes for each file, for a reader of
// the index (check): why the file the index read at f.Path is no longer
// what it read, "" when it is (a file appended to since is: what lies
// past f.Offset is new, not changed). An error is a file that could not
// be looked at.
func Changed(f store.FileState) (string, error) { return changed(f) }

// changed says why the file the index read at f.Path is no longer what it
// read ("" when it is): gone, shorter, another file, or other bytes under
// its offset.
// An error is a file that could not be looked at.
func changed(f store.FileState) (string, error) {
	fi, err := os.Stat(f.Path)
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return whyGone, nil
	}
	if err != nil {
		return "", err
	}
	var dev, ino uint64
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		dev, ino = uint64(st.Dev), st.Ino
	}
	switch {
	case fi.IsDir():
		return whyGone + " (a folder is there)", nil
	case dev != f.Dev || ino != f.Ino:
		return "another file is at its path (a new inode)", nil
	case fi.Size() < f.Offset:
		return fmt.Sprintf("the file is shorter than what was indexed (%d bytes, %d were indexed)", fi.Size(), f.Offset), nil
	case fi.Size() == f.Size && fi.ModTime().UnixNano() == f.ModTime:
		return "", nil // unchanged since it was read
	}
	// Written since it was read: the bytes it read must be the same.
	file, err := os.Open(f.Path)
	if err != nil {
		return "", err
	}
	defer file.Close()
	return underOffsets(file, &f)
}

// forget removes what the index holds of f (and of the files that repeat
// its ids, which stay listed for reading again), in bounded batches;
// replaced drops the --id path given for it (the file at its path is
// another, or none).
func (ix *Indexer) forget(ctx context.Context, f store.FileState, replaced bool) error {
	err := ix.DB.Update(func(tx *store.Tx) error {
		state, ok, err := tx.File(f.Path)
		if err != nil || !ok {
			return err
		}
		if replaced {
			state.IDPath = ""
		}
		_, err = tx.ForgetFile(&state)
		return err
	})
	if err != nil {
		return fmt.Errorf("forgetting %s: %w", f.Path, err)
	}
	if err := ix.DB.FinishForgets(ctx, ix.ForgetBatch, nil); err != nil {
		return err
	}
	if _, err := os.Stat(f.Path); errors.Is(err, os.ErrNotExist) {
		// Nothing to read again: its state stays with nothing counted,
		// as a file forgotten and read to its end.
		return ix.DB.Update(func(tx *store.Tx) error { return tx.MarkRead(f.Path) })
	}
	return nil
}

// Reread makes the index forget what it holds of src's file and reads it
// again from its first byte, saying nothing: the caller replaced the file
// on purpose (export's rewrite without replaced answers' records).
func (ix *Indexer) Reread(ctx context.Context, src Source) (FileResult, error) {
	var state store.FileState
	err := ix.DB.View(func(v *store.View) (err error) { state, _, err = v.File(src.Path); return err })
	if err != nil {
		return FileResult{Source: src}, err
	}
	if state.ID != 0 && state.Phase == store.PhaseReady {
		if err := ix.forget(ctx, state, false); err != nil {
			return FileResult{Source: src}, err
		}
	}
	return ix.IndexFile(ctx, src)
}

// ForgetChanged makes the index forget the file at path, in which a
// reader found that line is not the line the index holds (the file
// changed under its offsets in a way the disk check could not see), says
// so, and reads it again from its start.
func (ix *Indexer) ForgetChanged(ctx context.Context, path string, line int64) error {
	var state store.FileState
	var known bool
	err := ix.DB.View(func(v *store.View) (err error) { state, known, err = v.File(path); return err })
	if err != nil || !known || state.ID == 0 || state.Phase != store.PhaseReady {
		return err
	}
	if err := ix.forget(ctx, state, false); err != nil {
		return err
	}
	ix.report(Problem{Path: path, Kind: Gone, Msg: fmt.Sprintf("line %d is not the line the index holds (the file changed under what was indexed): its %d records are forgotten; it is read again from its start",
		line, state.Records)})
	_, err = ix.IndexFile(ctx, Source{Path: path, Dataset: state.Dataset, Stage: state.Stage})
	return err
}
