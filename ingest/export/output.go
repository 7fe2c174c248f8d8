package export

import (
	"context"
	"fmt"
	"os"
	"sync"
	"syscall"

	"gendex/ingest"
)

// outputs are a dataset's two output files, open and locked.
type outputs struct {
	tok, exc       *os.File
	tokSrc, excSrc ingest.Source
	tokBuf, excBuf []byte
	// The flush in progress (nil: none) and the buffers it writes, reused
	// by the flush after it.
	pending            chan error
	spareTok, spareExc []byte
	// The indexer goroutine indexes both files after each write, while the
	// next write goes on: a write signals indexNow (coalesced); indexDone
	// gets its first error when indexNow is closed.
	indexNow  chan struct{}
	indexDone chan error
	mu        sync.Mutex
	indexErr  error
}

// startIndexer starts the goroutine that indexes the outputs after writes.
func (x *Exporter) startIndexer(o *outputs) {
	now, done := make(chan struct{}, 1), make(chan error, 1)
	o.indexNow, o.indexDone = now, done
	go func() {
		var first error
		for range now {
			if first == nil {
				if first = x.index(o); first != nil {
					o.mu.Lock()
					o.indexErr = first
					o.mu.Unlock()
				}
			}
		}
		done <- first
	}()
}

// stopIndexer ends the indexer goroutine (after the last write: see
// wait) and returns its first error.
func (o *outputs) stopIndexer() error {
	if o.indexNow == nil {
		return nil
	}
	close(o.indexNow)
	o.indexNow = nil
	return <-o.indexDone
}

// index indexes both outputs to their ends (a line being written is left
// for the next call: the indexer never indexes half a line).
func (x *Exporter) index(o *outputs) error {
	for _, src := range []ingest.Source{o.tokSrc, o.excSrc} {
		if _, err := x.Ix.IndexFile(context.Background(), src); err != nil {
			return err
		}
	}
	return nil
}

// wait waits for the flush in progress, if any, and returns its error.
func (o *outputs) wait() error {
	if o.pending == nil {
		return nil
	}
	err := <-o.pending
	o.pending = nil
	return err
}

// flush hands the buffered records and exclusions to a goroutine that
// writes them (see write), so the next ones are decided meanwhile. It
// first waits for the flush before it: flushes happen one after another,
// in order.
func (x *Exporter) flush(out *outputs) error {
	if err := out.wait(); err != nil {
		return err
	}
	out.mu.Lock()
	err := out.indexErr
	out.mu.Unlock()
	if err != nil {
		return err
	}
	tok, exc := out.tokBuf, out.excBuf
	out.tokBuf, out.excBuf = out.spareTok[:0], out.spareExc[:0]
	out.spareTok, out.spareExc = tok, exc
	out.pending = make(chan error, 1)
	go func() { out.pending <- x.write(out, tok, exc) }()
	return nil
}

// write writes and fsyncs the records, then the exclusions, then has the
// indexer index both files.
func (x *Exporter) write(out *outputs, tok, exc []byte) error {
	for _, o := range []struct {
		f   *os.File
		buf []byte
	}{{out.tok, tok}, {out.exc, exc}} {
		if len(o.buf) == 0 {
			continue
		}
		if _, err := o.f.Write(o.buf); err != nil {
			return fmt.Errorf("writing %s: %w (the answers not written are exported on the next run)", o.f.Name(), err)
		}
		if err := o.f.Sync(); err != nil {
			return fmt.Errorf("syncing %s: %w", o.f.Name(), err)
		}
	}
	select {
	case out.indexNow <- struct{}{}:
	default: // the indexer has a call to make already
	}
	return nil
}

// openOutput opens an output file for appending, locked against a second
// export writing it.
func openOutput(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("%s is being written by another export (lock: %v)", path, err)
	}
	return f, nil
}
