package ingest

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// lineReader yields the complete lines of a JSONL stream, of any length.
// A last line without a newline is never returned: it may still be being
// written, and half a line must never be indexed.
type lineReader struct {
	r    *bufio.Reader
	long []byte // a line longer than the buffer, being assembled
	off  int64  // offset of the next unread byte
	// torn is the number of bytes after the last newline at EOF; eof
	// says the end reached is the file's end.
	torn int
	eof  bool
	// mem, when r is nil, holds the bytes from off on (see memLineReader).
	mem []byte
}

const readBuffer = 1 << 20

func newLineReader(r io.Reader, off int64) *lineReader {
	br := readers.Get().(*bufio.Reader)
	br.Reset(r)
	return &lineReader{r: br, off: off, eof: true}
}

// memLineReader yields the lines of data, the bytes of a file from offset
// off on, with no copy, as newLineReader would from a file of those bytes
// from off. Its end is the file's end when off+len(data) == size.
func memLineReader(data []byte, off, size int64) *lineReader {
	return &lineReader{mem: data, off: off, eof: off+int64(len(data)) == size}
}

// release gives the reader's buffer back for the next lineReader; lr must
// not be used after.
func (lr *lineReader) release() {
	if lr.r == nil {
		return
	}
	lr.r.Reset(nil)
	readers.Put(lr.r)
	lr.r = nil
}

// readers recycles the 1 MiB read buffers: gen and export index a few KiB
// at a time, many times a second, and a fresh buffer each time is mostly
// the cost of clearing it.
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBuffer) }}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// next returns the next line without its newline (and without a trailing
// \r or, for the file's first line, a leading UTF-8 BOM), and the offset and
// length of what it returned. The slice is valid until the next call.
// At the end it returns io.EOF, with lr.torn set to the size of an
// unfinished last line.
func (lr *lineReader) next() (line []byte, start int64, err error) {
	start = lr.off
	if lr.r == nil {
		return lr.nextMem()
	}
	lr.long = lr.long[:0]
	for {
		chunk, err := lr.r.ReadSlice('\n')
		switch {
		case err == nil:
			lr.off += int64(len(chunk))
			if len(lr.long) > 0 {
				lr.long = append(lr.long, chunk...)
				chunk = lr.long
			}
			chunk = chunk[:len(chunk)-1]
			if len(chunk) > 0 && chunk[len(chunk)-1] == '\r' {
				chunk = chunk[:len(chunk)-1]
			}
			if start == 0 && bytes.HasPrefix(chunk, utf8BOM) {
				chunk = chunk[len(utf8BOM):]
				start = int64(len(utf8BOM))
			}
			return chunk, start, nil
		case errors.Is(err, bufio.ErrBufferFull):
			lr.long = append(lr.long, chunk...)
			lr.off += int64(len(chunk))
		case errors.Is(err, io.EOF):
			lr.torn = len(lr.long) + len(chunk)
			lr.off = start
			return nil, start, io.EOF
		default:
			return nil, start, err
		}
	}
}

// nextMem is next for a memLineReader.
func (lr *lineReader) nextMem() (line []byte, start int64, err error) {
	start = lr.off
	i := bytes.IndexByte(lr.mem, '\n')
	if i < 0 {
		lr.torn = len(lr.mem)
		return nil, start, io.EOF
	}
	line, lr.mem = lr.mem[:i], lr.mem[i+1:]
	lr.off += int64(i) + 1
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	if start == 0 && bytes.HasPrefix(line, utf8BOM) {
		line = line[len(utf8BOM):]
		start = int64(len(utf8BOM))
	}
	return line, start, nil
}

// ReadLines calls fn for each complete line of r (as the indexer sees it:
// no newline, no trailing \r, no BOM on the first line), with its 1-based
// number. It returns the size of an unfinished last line, which fn never
// sees.
func ReadLines(r io.Reader, fn func(line []byte, lineNo int64) error) (torn int, err error) {
	lr := newLineReader(r, 0)
	defer lr.release()
	var n int64
	for {
		line, _, err := lr.next()
		if errors.Is(err, io.EOF) {
			return lr.torn, nil
		}
		if err != nil {
			return 0, err
		}
		n++
		if err := fn(line, n); err != nil {
			return 0, err
		}
	}
}
