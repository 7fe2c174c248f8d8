package export

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"gendex/ingest"
)

// outputs are a dataset's two output files, open and locked, and the
// pipeline that writes and indexes them: the decider fills tokBuf and
// excBuf; flush hands them, as a batch, to the writer goroutine, which
// writes and fsyncs them and hands them to the indexer goroutine, which
// indexes them from memory (ingest.Indexer.IndexWritten: they are not
// read back) and gives the batch back for a later flush. Batches go
// through in order; at most numBatches are written or indexed at once.
type outputs struct {
	tok, exc       *os.File
	tokSrc, excSrc ingest.Source
	tokBuf, excBuf []byte
	// tokEnd is where the next write of tok is expected to start (a
	// guess: the writer finds out where it did).
	tokEnd int64

	free    chan *batch // empty batches, for flush
	toWrite chan *batch // nil: the pipeline is not running
	done    chan struct{}
	mu      sync.Mutex
	err     error // the first error of the writer or the indexer
}

// batch is one flush's records and exclusions, and, once written, the
// file offsets they were written at; parsed gets the records parsed for
// the index meanwhile (see ingest.Indexer.ParseWritten).
type batch struct {
	tok, exc     []byte
	tokAt, excAt int64
	parsed       chan *ingest.Parsed
	known        []ingest.KnownLine // what the index needs of tok's lines (knownLines)
}

// numBatches is how many flushes may be written or indexed while the next
// one is decided: the writer's and the indexer's.
const numBatches = 2

// start starts the writer and the indexer goroutines, with batches of
// capacity size.
func (x *Exporter) start(o *outputs, size int) {
	o.free = make(chan *batch, numBatches)
	for range numBatches {
		o.free <- &batch{tok: make([]byte, 0, size), parsed: make(chan *ingest.Parsed, 1)}
	}
	toWrite, toIndex := make(chan *batch, numBatches), make(chan *batch, numBatches)
	o.toWrite, o.done = toWrite, make(chan struct{})
	go func() {
		defer close(toIndex)
		for b := range toWrite {
			if o.failed() == nil {
				if err := o.write(b); err != nil {
					o.fail(err)
				} else {
					toIndex <- b
					continue
				}
			}
			o.give(b)
		}
	}()
	done := o.done
	go func() {
		defer close(done)
		for b := range toIndex {
			if o.failed() == nil {
				if err := x.indexWritten(o, b); err != nil {
					o.fail(err)
				}
			}
			o.give(b)
		}
	}()
}

// give puts b back among the free batches, once its records are no
// longer being parsed.
func (o *outputs) give(b *batch) {
	if len(b.tok) > 0 {
		<-b.parsed
	}
	b.tok, b.exc = b.tok[:0], b.exc[:0]
	o.free <- b
}

func (o *outputs) fail(err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err == nil {
		o.err = err
	}
}

func (o *outputs) failed() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// stop waits for the batches handed over to be written and indexed, ends
// the goroutines and returns the first error.
func (o *outputs) stop() error {
	if o.toWrite == nil {
		return nil
	}
	close(o.toWrite)
	o.toWrite = nil
	<-o.done
	return o.failed()
}

// flush hands the buffered records and exclusions to the writer (see
// write), so the next ones are decided meanwhile, and takes empty buffers
// for them; it waits for a free batch when numBatches are in flight.
// Exclusions, usually few, wait for the last flush or for a quarter of
// FlushBytes: each write of a file is an fsync and each indexing a commit.
func (x *Exporter) flush(out *outputs, last bool) error {
	if err := out.failed(); err != nil {
		return err
	}
	exc := last || len(out.excBuf) >= x.FlushBytes/4
	if len(out.tokBuf) == 0 && (!exc || len(out.excBuf) == 0) {
		return nil
	}
	b := <-out.free
	b.tok, out.tokBuf = out.tokBuf, b.tok
	if exc {
		b.exc, out.excBuf = out.excBuf, b.exc
	}
	if len(b.tok) > 0 {
		// The records are parsed for the index while they are written
		// (and while the batch before is indexed).
		at := out.tokEnd
		out.tokEnd += int64(len(b.tok))
		go func() {
			var p *ingest.Parsed
			var ok bool
			if b.known, ok = knownLines(b.tok, b.known); ok { // export's own layout: no parse
				p = x.Ix.KnownWritten(out.tokSrc, b.tok, at, b.known)
			}
			if p == nil {
				p = x.Ix.ParseWritten(out.tokSrc, b.tok, at)
			}
			b.parsed <- p
		}()
	}
	out.toWrite <- b
	return nil
}

// write writes and fsyncs the records, then the exclusions, and notes
// where each was written: the file's end after the write, less its size
// (the files are opened for appending).
func (o *outputs) write(b *batch) error {
	for _, w := range []struct {
		f   *os.File
		buf []byte
		at  *int64
	}{{o.tok, b.tok, &b.tokAt}, {o.exc, b.exc, &b.excAt}} {
		if len(w.buf) == 0 {
			continue
		}
		if _, err := w.f.Write(w.buf); err != nil {
			return fmt.Errorf("writing %s: %w (the answers not written are exported on the next run)", w.f.Name(), err)
		}
		end, err := w.f.Seek(0, io.SeekCurrent)
		if err != nil {
			return err
		}
		*w.at = end - int64(len(w.buf))
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("syncing %s: %w", w.f.Name(), err)
		}
	}
	return nil
}

// indexWritten indexes a written batch from its bytes.
func (x *Exporter) indexWritten(o *outputs, b *batch) error {
	if len(b.tok) > 0 {
		p := <-b.parsed
		b.parsed <- nil // for give
		if _, err := x.Ix.IndexWritten(context.Background(), o.tokSrc, b.tok, b.tokAt, p); err != nil {
			return err
		}
	}
	if len(b.exc) > 0 {
		if _, err := x.Ix.IndexWritten(context.Background(), o.excSrc, b.exc, b.excAt, nil); err != nil {
			return err
		}
	}
	return nil
}

// index indexes both outputs to their ends, from the files.
func (x *Exporter) index(o *outputs) error {
	for _, src := range []ingest.Source{o.tokSrc, o.excSrc} {
		if _, err := x.Ix.IndexFile(context.Background(), src); err != nil {
			return err
		}
	}
	return nil
}
