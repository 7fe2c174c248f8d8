package export

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"os"

	"gendex/store"
)

// entry is one answer to export: its id, its index record and its
// prompt's record (if the index has one).
type entry struct {
	id        string
	rec       store.Record
	prompt    store.Record
	hasPrompt bool
}

// spill holds the todo list of a run in an unlinked temporary file, so a
// run over millions of answers walks the index once (one read
// transaction, no writes meanwhile) and keeps only one chunk in memory.
type spill struct {
	f   *os.File
	w   *bufio.Writer
	r   *bufio.Reader
	n   int
	buf []byte
}

func newSpill() (*spill, error) {
	f, err := os.CreateTemp("", "gendex-export-*")
	if err != nil {
		return nil, err
	}
	os.Remove(f.Name()) // unlinked: gone with the process, whatever happens
	return &spill{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

func (s *spill) close() { s.f.Close() }

func appendRec(b []byte, r *store.Record) []byte {
	b = binary.AppendUvarint(b, uint64(r.File))
	b = binary.AppendUvarint(b, uint64(r.Offset))
	b = binary.AppendUvarint(b, uint64(r.Length))
	b = binary.AppendUvarint(b, uint64(r.Line))
	return binary.BigEndian.AppendUint32(b, r.Sum)
}

// add appends e to the list: its size, then its fields.
func (s *spill) add(e *entry) error {
	b := s.buf[:0]
	b = binary.AppendUvarint(b, uint64(len(e.id)))
	b = append(b, e.id...)
	b = appendRec(b, &e.rec)
	b = binary.AppendVarint(b, e.rec.PromptTokens)
	b = binary.AppendVarint(b, e.rec.CompletionTokens)
	b = binary.AppendUvarint(b, uint64(len(e.rec.Finish)))
	b = append(b, e.rec.Finish...)
	b = binary.AppendUvarint(b, uint64(e.rec.Samples)) // a sample's record names them (unitHead)
	if e.hasPrompt {
		b = append(b, 1)
		b = appendRec(b, &e.prompt)
	} else {
		b = append(b, 0)
	}
	s.buf = b
	s.n++
	var size [binary.MaxVarintLen64]byte
	if _, err := s.w.Write(binary.AppendUvarint(size[:0], uint64(len(b)))); err != nil {
		return err
	}
	_, err := s.w.Write(b)
	return err
}

// rewind ends writing and starts reading from the first entry.
func (s *spill) rewind() error {
	if err := s.w.Flush(); err != nil {
		return err
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	s.r = bufio.NewReaderSize(s.f, 1<<20)
	return nil
}

// finishes are the common finish reasons, read without a new string each.
var finishes = map[string]string{"": "", "stop": "stop", "length": "length", "abort": "abort", "eos": "eos"}

// decoder reads the fields of one entry from its bytes; bad is set when
// they run out.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n uint64) []byte {
	if uint64(len(d.b)) < n {
		d.bad = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) rec(r *store.Record) {
	r.File = uint32(d.uvarint())
	r.Offset = int64(d.uvarint())
	r.Length = int64(d.uvarint())
	r.Line = int64(d.uvarint())
	if sum := d.bytes(4); sum != nil {
		r.Sum = binary.BigEndian.Uint32(sum)
	}
}

var errSpill = errors.New("the todo list's temporary file is corrupt")

// next reads up to len(dst) entries into dst and returns how many.
func (s *spill) next(dst []entry) (int, error) {
	for i := range dst {
		e := &dst[i]
		*e = entry{}
		if _, err := s.r.Peek(1); errors.Is(err, io.EOF) {
			return i, nil
		}
		size, err := binary.ReadUvarint(s.r)
		if err != nil {
			return i, err
		}
		if uint64(cap(s.buf)) < size {
			s.buf = make([]byte, size)
		}
		if _, err := io.ReadFull(s.r, s.buf[:size]); err != nil {
			return i, err
		}
		d := decoder{b: s.buf[:size]}
		e.id = string(d.bytes(d.uvarint()))
		d.rec(&e.rec)
		e.rec.PromptTokens, e.rec.CompletionTokens = d.varint(), d.varint()
		finish := d.bytes(d.uvarint())
		if f, ok := finishes[string(finish)]; ok {
			e.rec.Finish = f
		} else {
			e.rec.Finish = string(finish)
		}
		e.rec.Samples = uint32(d.uvarint())
		if flag := d.bytes(1); len(flag) == 1 && flag[0] == 1 {
			e.hasPrompt = true
			d.rec(&e.prompt)
		}
		if d.bad || len(d.b) != 0 {
			return i, errSpill
		}
	}
	return len(dst), nil
}
