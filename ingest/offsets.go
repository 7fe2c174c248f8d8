package ingest

import (
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"

	"gendex/store"
)

// A file the index read is checked at both ends of what it read before
// anything after it is taken as appended: its first bytes (HeadSum) and
// the bytes that end at its offset (TailSum: the last indexed line, with
// its newline). A tool that rewrites lines in place (the same inode, a
// longer file) changes the bytes under the offset, and the file is read
// again from its start rather than taken as grown.

// tailBytes is how many bytes before a file's offset TailSum covers.
const tailBytes = 4096

// tailSum hashes the min(tailBytes, off) bytes of f that end at off.
func tailSum(f *os.File, off int64) (n int64, sum uint64, err error) {
	n = min(tailBytes, off)
	sum, err = rangeSum(f, off-n, n)
	return n, sum, err
}

// rangeSum hashes the n bytes of f from at.
func rangeSum(f *os.File, at, n int64) (uint64, error) {
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, at); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return 0, err
	}
	h := fnv.New64a()
	h.Write(buf)
	return h.Sum64(), nil
}

// underOffsets says how the bytes of f that the index read (st) are no
// longer those it read ("" when they are the same as far as can be told):
// its first bytes, or the bytes that end at its offset. An index written
// before the tail was kept (TailLen 0) has only the newline that ends the
// last indexed line to go by. f holds at least st.Offset bytes.
func underOffsets(f *os.File, st *store.FileState) (string, error) {
	if st.HeadLen > 0 {
		sum, err := headSum(f, st.HeadLen)
		if err != nil {
			return "", err
		}
		if sum != st.HeadSum {
			return "the file's first bytes changed", nil
		}
	}
	if st.Offset == 0 {
		return "", nil
	}
	changed := fmt.Sprintf("the file was rewritten in place (its bytes before byte %d, where it was indexed to, changed)", st.Offset)
	if st.TailLen > 0 {
		if st.TailLen > st.Offset {
			return changed, nil
		}
		sum, err := rangeSum(f, st.Offset-st.TailLen, st.TailLen)
		if err != nil {
			return "", err
		}
		if sum != st.TailSum {
			return changed, nil
		}
		return "", nil
	}
	var nl [1]byte
	if _, err := f.ReadAt(nl[:], st.Offset-1); err != nil {
		return "", err
	}
	if nl[0] != '\n' {
		return changed, nil
	}
	return "", nil
}
