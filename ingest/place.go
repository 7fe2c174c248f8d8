package ingest

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"gendex/store"
)

// A dataset is a place (README, "What counts as answered"): in one index,
// its prompts come from one folder and its answers (raw_responses*,
// errors*, turns*) from one folder. Export's records are export's to place.

// PlaceKind names the files of stage s that must share one folder per
// dataset: "prompts" or "answers"; ok is false for the other stages.
func PlaceKind(s store.Stage) (kind string, ok bool) {
	switch s {
	case store.Prompts:
		return "prompts", true
	case store.Raw, store.Errors, store.Turns:
		return "answers", true
	}
	return "", false
}

// Elsewhere returns the files among held (a dataset's, as the index
// holds them) of the kind of stage that lie outside dir.
func Elsewhere(held []store.FileState, stage store.Stage, dir string) []store.FileState {
	kind, ok := PlaceKind(stage)
	if !ok {
		return nil
	}
	var out []store.FileState
	for _, f := range held {
		if k, _ := PlaceKind(f.Stage); k == kind && filepath.Dir(f.Path) != dir {
			out = append(out, f)
		}
	}
	return out
}

// HeldFiles returns the index's files by dataset: those that hold
// something (an id given) or are being forgotten.
func HeldFiles(v *store.View) (map[string][]store.FileState, error) {
	by := map[string][]store.FileState{}
	err := v.Files(func(f store.FileState) error {
		if f.ID != 0 || f.Phase == store.PhaseForgetting {
			by[f.Dataset] = append(by[f.Dataset], f)
		}
		return nil
	})
	return by, err
}

// Folders lists the folders of fs, sorted, without repeats.
func Folders(fs []store.FileState) []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range fs {
		if d := filepath.Dir(f.Path); !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	sort.Strings(out)
	return out
}

// CheckPlaces refuses sources whose dataset (named after its folder) the
// index, or another of srcs, already has files of the same kind for in
// another folder: two folders with one dataset name never merge. The
// error names both folders and the ways out.
func CheckPlaces(db *store.DB, srcs []Source) error {
	var held map[string][]store.FileState
	if err := db.View(func(v *store.View) (err error) { held, err = HeldFiles(v); return err }); err != nil {
		return err
	}
	type key struct{ dataset, kind string }
	first := map[key]string{} // the folder each (dataset, kind) reads from
	var lines []string
	said := map[key]bool{}
	for _, s := range srcs {
		kind, ok := PlaceKind(s.Stage)
		if !ok {
			continue
		}
		k, dir := key{s.Dataset, kind}, filepath.Dir(s.Path)
		others := Elsewhere(held[s.Dataset], s.Stage, dir)
		if f, seen := first[k]; seen && f != dir {
			others = append(others, store.FileState{Path: filepath.Join(f, "*")})
		} else if !seen {
			first[k] = dir
		}
		other := Folders(others)
		if len(other) == 0 || said[k] {
			continue
		}
		said[k] = true
		lines = append(lines, fmt.Sprintf("%s: %s from %s, and from %s", s.Dataset, kind, strings.Join(other, ", "), dir))
	}
	if len(lines) == 0 {
		return nil
	}
	return fmt.Errorf("two folders with one dataset name never merge:\n  %s\nIndex a folder as a dataset of its own name: gendex ingest --dataset NAME FOLDER; or give it an index of its own: gendex --db OTHER.db ingest ...; or make the index forget the dataset first: gendex drop NAME (no file is touched)",
		strings.Join(lines, "\n  "))
}

// CanonicalPath returns the one spelling of path that every writer stores:
// absolute, with symlinks and ".." resolved (as far as the path exists; the
// rest, a folder not made yet, is joined as given). A folder reached
// through a symlink and through its real path is one place.
func CanonicalPath(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	rest := ""
	for dir := abs; ; {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(real, rest), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(dir), rest)
		dir = parent
	}
}

// ShellQuote quotes s for a POSIX shell when it needs it, so that a
// command a message gives pastes as written.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
