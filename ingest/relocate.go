package ingest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"gendex/store"
)

// Relocation is what Relocate did: the folders, made absolute, and the
// files it moved with how many records each holds.
type Relocation struct {
	From, To string
	Files    []Relocated
	Records  uint64
	// Forgotten counts the files under from that the index had forgotten
	// (nothing counted, read again from their start when next read): their
	// states (with the id path they are read with) moved unchecked, or
	// stayed where the index already holds another file.
	Forgotten int
}

// Relocated is one file Relocate moved in the index.
type Relocated struct {
	From, To string
	Records  uint64
}

// Relocate tells the index that the files it read under the folder from
// now lie at the same relative paths under to (a run's folders moved or
// copied, to another disk or machine): each keeps its records, counts and
// offset, so nothing is read again and nothing is asked twice. Every file
// that counts records is checked first: it must exist at its new path,
// hold at least the bytes the index read, begin with the same bytes and
// have the same bytes where it was indexed to; if any one fails, nothing
// moves and the error names it. A file the index had forgotten counts
// nothing and is passed over. The moves are one transaction.
func Relocate(db *store.DB, from, to string) (Relocation, error) {
	from, to = absClean(from), absClean(to)
	r := Relocation{From: from, To: to}
	if from == to {
		return r, fmt.Errorf("relocate: %s is both the old and the new folder", from)
	}
	var held []store.FileState
	err := db.View(func(v *store.View) error {
		return v.Files(func(f store.FileState) error {
			if under(f.Path, from) {
				held = append(held, f)
			}
			return nil
		})
	})
	if err != nil {
		return r, err
	}
	if len(held) == 0 {
		return r, store.NotFound("relocate: the index holds no file under %s ('gendex query files' lists those it holds)", from)
	}
	type move struct {
		f  store.FileState
		to string
		id *store.FileIdentity
	}
	moves := make([]move, 0, len(held))
	for _, f := range held {
		rel, _ := filepath.Rel(from, f.Path)
		dst := filepath.Join(to, rel)
		if f.ID == 0 { // forgotten: nothing to check, nothing counted
			moves = append(moves, move{f, dst, nil})
			continue
		}
		id, err := sameFile(f, dst)
		if err != nil {
			return r, fmt.Errorf("relocate: %s is not the file the index read at %s: %w; nothing was moved", dst, f.Path, err)
		}
		moves = append(moves, move{f, dst, &id})
	}
	err = db.Update(func(tx *store.Tx) error {
		for _, m := range moves {
			if m.id == nil {
				_, taken, err := tx.File(m.to)
				if err != nil {
					return err
				}
				if taken {
					continue // the new place's own state stands
				}
			}
			if _, err := tx.MoveFile(m.f.Path, m.to, m.id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("relocate: %w; nothing was moved", err)
	}
	for _, m := range moves {
		if m.id == nil {
			r.Forgotten++
			continue
		}
		r.Files = append(r.Files, Relocated{From: m.f.Path, To: m.to, Records: m.f.Records})
		r.Records += m.f.Records
	}
	return r, nil
}

// sameFile checks that the file at path can be the one f was read from:
// it holds at least f's indexed bytes, begins with the bytes f began with
// and has the bytes that ended where f was indexed to. It returns the
// file's identity.
func sameFile(f store.FileState, path string) (store.FileIdentity, error) {
	var id store.FileIdentity
	file, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return id, errors.New("no such file")
		}
		return id, err
	}
	defer file.Close()
	fi, err := file.Stat()
	if err != nil {
		return id, err
	}
	if fi.IsDir() {
		return id, errors.New("it is a folder")
	}
	id.Size, id.ModTime = fi.Size(), fi.ModTime().UnixNano()
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		id.Dev, id.Ino = uint64(st.Dev), st.Ino
	}
	if id.Size < f.Offset {
		return id, fmt.Errorf("it has %d bytes, the index read %d", id.Size, f.Offset)
	}
	if f.HeadLen > 0 {
		sum, err := headSum(file, f.HeadLen)
		if err != nil {
			return id, err
		}
		if sum != f.HeadSum {
			return id, fmt.Errorf("its first %d bytes differ", f.HeadLen)
		}
	}
	why, err := underOffsets(file, &f)
	if err != nil {
		return id, err
	}
	if why != "" {
		return id, errors.New(why)
	}
	return id, nil
}

func absClean(p string) string {
	if abs, err := CanonicalPath(p); err == nil {
		return abs
	}
	return filepath.Clean(p)
}

// under reports whether path lies in the folder dir (at any depth).
func under(path, dir string) bool {
	return strings.HasPrefix(path, strings.TrimSuffix(dir, string(filepath.Separator))+string(filepath.Separator))
}
