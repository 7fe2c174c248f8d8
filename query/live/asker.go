package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"gendex/query"
	"gendex/store"
)

// Asker answers each question from whoever can answer for the index at
// a path at that moment: the process writing it, over one connection to
// its socket kept for the Asker's life (reconnecting when the writer
// changes), or else the file itself, opened read-only for that one
// question. Between questions it holds no file open, so a shell left open
// never keeps gen from starting. Either way the whole answer is spooled
// first (memory, then an unlinked temporary file) and only then given to
// out: the file's lock, or the writer's connection, is released before
// the first byte reaches a reader's pipe, so `gendex query ... | less`
// left open holds nothing. Close it when done.
type Asker struct {
	// Readers are what check reads the files with when the Asker answers
	// from the file itself (query.CheckReaders); a writer uses its own.
	Readers query.CheckReaders

	path   string
	remote *Remote
}

// NewAsker returns an Asker for the index at path, without connecting.
func NewAsker(path string) *Asker {
	return &Asker{path: path, remote: NewRemote(SocketPath(path))}
}

// Close closes the connection to the writer, if one is open.
func (a *Asker) Close() error { return a.remote.Close() }

// Ask answers q into out, as of now. A writer that accepted the question
// and then did not answer in time is an error wrapping ErrNotAnswering.
func (a *Asker) Ask(ctx context.Context, q query.Query, now time.Time, out query.Sink) error {
	err := a.remote.Ask(ctx, q, now, out)
	if !errors.Is(err, ErrNoWriter) {
		return err // answered by the writer, or failed there
	}
	sp, err := a.local(ctx, q, now)
	if errors.Is(err, store.ErrLocked) {
		// A writer may have started since: it serves the socket at once.
		err2 := a.remote.Ask(ctx, q, now, out)
		if !errors.Is(err2, ErrNoWriter) {
			return err2
		}
		return fmt.Errorf("%w; no writer answers on %s", err, a.remote.Socket)
	}
	if sp == nil {
		return err
	}
	defer sp.Close()
	if err != nil {
		return err // the answer is not given in part
	}
	rd, err := sp.Reader()
	if err != nil {
		return err
	}
	return decodeAnswer(rd, out, func() error { return errors.New("reading the spooled answer: cut short") })
}

// local computes q's answer from the file into a spool, and closes the
// file (releasing its lock) before it returns.
func (a *Asker) local(ctx context.Context, q query.Query, now time.Time) (*spool, error) {
	db, err := store.Open(a.path, store.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return nil, err
	}
	q.Check.CheckReaders = a.Readers
	sp, err := spoolAnswer(ctx, db, q, now)
	if cerr := db.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return sp, err
}

// ShowNotAnswering is for a display that refreshes (watch): when err says
// the writer is not answering (ErrNotAnswering), it writes that to w, with
// the note that the display keeps asking, and returns nil; any other err
// it returns as it is.
func ShowNotAnswering(w io.Writer, err error) error {
	if !errors.Is(err, ErrNotAnswering) {
		return err
	}
	_, werr := fmt.Fprintf(w, "%v\n(the writer is not answering; asking again at the next refresh)\n", err)
	return werr
}
