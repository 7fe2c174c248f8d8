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
	sum [4]byte
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

func (s *spill) add(e *entry) error {
	b := s.buf[:0]
	b = binary.AppendUvarint(b, uint64(len(e.id)))
	b = append(b, e.id...)
	b = appendRec(b, &e.rec)
	b = binary.AppendVarint(b, e.rec.PromptTokens)
	b = binary.AppendVarint(b, e.rec.CompletionTokens)
	b = binary.AppendUvarint(b, uint64(len(e.rec.Finish)))
	b = append(b, e.rec.Finish...)
	if e.hasPrompt {
		b = append(b, 1)
		b = appendRec(b, &e.prompt)
	} else {
		b = append(b, 0)
	}
	s.buf = b
	s.n++
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

func (s *spill) uvarint() uint64 {
	v, _ := binary.ReadUvarint(s.r)
	return v
}

func (s *spill) readRec(r *store.Record) error {
	r.File = uint32(s.uvarint())
	r.Offset = int64(s.uvarint())
	r.Length = int64(s.uvarint())
	r.Line = int64(s.uvarint())
	_, err := io.ReadFull(s.r, s.sum[:])
	r.Sum = binary.BigEndian.Uint32(s.sum[:])
	return err
}

func (s *spill) str() (string, error) {
	n := s.uvarint()
	if cap(s.buf) < int(n) {
		s.buf = make([]byte, n)
	}
	b := s.buf[:n]
	_, err := io.ReadFull(s.r, b)
	return string(b), err
}

// finishes are the common finish reasons, read without a new string each.
var finishes = map[string]string{"": "", "stop": "stop", "length": "length", "abort": "abort", "eos": "eos"}

// finish reads a finish reason.
func (s *spill) finish() (string, error) {
	n := s.uvarint()
	if cap(s.buf) < int(n) {
		s.buf = make([]byte, n)
	}
	b := s.buf[:n]
	if _, err := io.ReadFull(s.r, b); err != nil {
		return "", err
	}
	if f, ok := finishes[string(b)]; ok {
		return f, nil
	}
	return string(b), nil
}

// next reads up to len(dst) entries into dst and returns how many.
func (s *spill) next(dst []entry) (int, error) {
	for i := range dst {
		e := &dst[i]
		*e = entry{}
		if _, err := s.r.Peek(1); errors.Is(err, io.EOF) {
			return i, nil
		}
		id, err := s.str()
		if err != nil {
			return i, err
		}
		e.id = id
		if err := s.readRec(&e.rec); err != nil {
			return i, err
		}
		pt, _ := binary.ReadVarint(s.r)
		ct, _ := binary.ReadVarint(s.r)
		e.rec.PromptTokens, e.rec.CompletionTokens = pt, ct
		if e.rec.Finish, err = s.finish(); err != nil {
			return i, err
		}
		flag, err := s.r.ReadByte()
		if err != nil {
			return i, err
		}
		if flag == 1 {
			e.hasPrompt = true
			if err := s.readRec(&e.prompt); err != nil {
				return i, err
			}
		}
	}
	return len(dst), nil
}
