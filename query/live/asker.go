package live

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gendex/query"
	"gendex/store"
)

// Asker answers each question from whoever can answer for the index at
// a path at that moment: the process writing it, over one connection to
// its socket kept for the Asker's life (reconnecting when the writer
// changes), or else the file itself, opened read-only for that one
// question. Between questions it holds no file open, so a shell left open
// never keeps gen from starting. Close it when done.
type Asker struct {
	path   string
	remote *Remote
}

// NewAsker returns an Asker for the index at path, without connecting.
func NewAsker(path string) *Asker {
	return &Asker{path: path, remote: NewRemote(SocketPath(path))}
}

// Close closes the connection to the writer, if one is open.
func (a *Asker) Close() error { return a.remote.Close() }

// Ask answers q into out, as of now.
func (a *Asker) Ask(ctx context.Context, q query.Query, now time.Time, out query.Sink) error {
	err := a.remote.Ask(ctx, q, now, out)
	if !errors.Is(err, ErrNoWriter) {
		return err // answered by the writer, or failed there
	}
	db, err := store.Open(a.path, store.Options{ReadOnly: true, Timeout: time.Second})
	if errors.Is(err, store.ErrLocked) {
		// A writer may have started since: it serves the socket at once.
		err2 := a.remote.Ask(ctx, q, now, out)
		if !errors.Is(err2, ErrNoWriter) {
			return err2
		}
		return fmt.Errorf("%w; its writer does not answer on %s either (an older gendex, or a bbolt tool, holds the file)", err, a.remote.Socket)
	}
	if err != nil {
		return err
	}
	defer db.Close()
	return query.Local{Src: db}.Ask(ctx, q, now, out)
}
