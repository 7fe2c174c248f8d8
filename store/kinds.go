package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	berrors "go.etcd.io/bbolt/errors"
)

// The kinds of failure a script must tell apart without reading the
// message (gendex maps each to its own exit status). An error of a kind
// wraps its sentinel and keeps its own message: errors.Is(err, ErrNoIndex).
var (
	// ErrNoIndex is wrapped by a read-only Open of a path where no index
	// is (nothing there, or a folder).
	ErrNoIndex = errors.New("no index")
	// ErrBadIndex is wrapped by Open when the file is there but cannot be
	// read as an index: not a bbolt file, damaged, another schema version,
	// or not readable by this user.
	ErrBadIndex = errors.New("index unreadable")
	// ErrNotFound is wrapped by the errors of a question (or a command)
	// asked about something the index does not hold: a dataset, a
	// record's id, a server.
	ErrNotFound = errors.New("not found")
)

// kindError is an error of a kind: its message is msg's alone.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// Kind returns err, with its message unchanged, wrapping kind too (one of
// ErrNoIndex, ErrBadIndex and ErrNotFound); nil stays nil.
func Kind(kind, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: kind, err: err}
}

// NotFound formats an error that wraps ErrNotFound.
func NotFound(format string, a ...any) error {
	return Kind(ErrNotFound, fmt.Errorf(format, a...))
}

// checkReadable is a read-only Open's look before it opens path: an error
// of kind ErrNoIndex when no index file is there, ErrBadIndex when it
// cannot be one (empty, or not readable by this user).
func checkReadable(path string) error {
	fi, err := os.Stat(path)
	abs, _ := filepath.Abs(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Kind(ErrNoIndex, fmt.Errorf("no index at %s: give --db PATH (or $GENDEX_DB) to ask the index of another folder, or make this one with 'gendex ingest FOLDER' or 'gendex gen FOLDER'", abs))
	case errors.Is(err, os.ErrPermission):
		return Kind(ErrBadIndex, fmt.Errorf("open index: %w (ask its owner, or give --db an index of yours)", err))
	case err != nil:
		return fmt.Errorf("open index: %w", err)
	case fi.IsDir():
		return Kind(ErrNoIndex, fmt.Errorf("no index at %s: it is a folder; give --db the index file (such as %s)", abs, filepath.Join(abs, "gendex.db")))
	case fi.Size() == 0:
		return Kind(ErrBadIndex, fmt.Errorf("open index %s: the file is empty, not an index (give --db an index's path; 'gendex ingest FOLDER' or 'gendex gen FOLDER' makes one)", abs))
	}
	return nil
}

// badIndex is the error of bbolt's refusal to open path: of kind
// ErrBadIndex when the file is not one bbolt can read (not a bbolt file,
// damaged, cut short, not readable), else as bbolt said it.
func badIndex(path string, err error) error {
	err = fmt.Errorf("open index %s: %w", path, err)
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrChecksum) ||
		errors.Is(err, os.ErrPermission) || strings.Contains(err.Error(), "file size too small") {
		return Kind(ErrBadIndex, fmt.Errorf("%w: not a gendex index, or a damaged one (give --db an index's path, or move this file away and make the index again with 'gendex ingest' or 'gendex gen')", err))
	}
	return err
}
