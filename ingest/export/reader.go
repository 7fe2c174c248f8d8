package export

import (
	"errors"
	"fmt"
	"io"
	"os"

	"gendex/store"
)

// lineReader reads indexed lines of one file at their stored offsets
// through a window of the file, so lines read in offset order cost one
// read per window, not one per line.
type lineReader struct {
	f    *os.File
	path string
	buf  []byte
	off  int64 // file offset of buf[0]
	// back: lines are read mostly in decreasing offsets, so a window
	// ends at the line read rather than starting there.
	back bool
}

// window is how much of a file one read brings in, and slack how much of
// it lies before the line read (after it, reading backwards): lines come
// in offset order within a chunk, but prompts (in their answers' order)
// and the answers at a chunk's edges a few hundred lines out of it, and a
// line just before the window would cost a read of a new one.
const (
	window = 1 << 20
	slack  = 64 << 10
)

func openReader(path string) (*lineReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w; if it moved, index its new place with gendex ingest, then export", err)
	}
	return &lineReader{f: f, path: path}, nil
}

func (r *lineReader) close() { r.f.Close() }

// line returns the line r.Record points at, after checking it is still the
// line that was indexed (its CRC). The slice is valid until the next call.
func (r *lineReader) line(rec *store.Record) ([]byte, error) {
	if rec.Offset < r.off || rec.Offset+rec.Length > r.off+int64(len(r.buf)) {
		size := max(window, int(rec.Length)+slack)
		if cap(r.buf) < size {
			r.buf = make([]byte, size)
		}
		at := max(0, rec.Offset-slack)
		if r.back {
			at = max(0, rec.Offset+rec.Length+slack-int64(size))
		}
		n, err := r.f.ReadAt(r.buf[:size], at)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("reading %s:%d: %w", r.path, rec.Line, err)
		}
		r.buf, r.off = r.buf[:n], at
	}
	start := rec.Offset - r.off
	if start+rec.Length > int64(len(r.buf)) || store.LineSum(r.buf[start:start+rec.Length]) != rec.Sum {
		return nil, &ChangedError{Path: r.path, Line: rec.Line}
	}
	return r.buf[start : start+rec.Length], nil
}

// ChangedError is a line read at its stored offset that is not the line
// the index holds (its CRC differs): its file changed under its offsets.
type ChangedError struct {
	Path string
	Line int64
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("%s:%d: the line is not the one the index holds (the file changed since it was indexed): run gendex ingest %s to index it again, then export",
		e.Path, e.Line, e.Path)
}
