package gen

import (
	"errors"
	"sync/atomic"
)

// A refused run: a check of the command against the index, the data or a
// server said no before any prompt was sent (a provenance that differs, a
// changed id rule, a tool dataset without a tool-call parser, the
// simulator beside a real model's answers, a server that refuses the
// route or the key). Run as it is, the command is refused again: its row
// says refused, not failed, and the error is ErrRefused, so a script
// fixes the command instead of running it again.

// ErrRefused is matched (errors.Is) by the error of a refused run.
var ErrRefused = errors.New("refused: nothing was sent")

// refusal is an error of such a check (stopError, kindError); it makes
// the run refused when no prompt was sent before it.
type refusal interface{ refuses() }

func (*stopError) refuses() {}

// kindError is checkServerKind's refusal.
type kindError struct{ error }

func (kindError) refuses()        {}
func (e kindError) Unwrap() error { return e.error }

// refusedError is a refusal of a run that sent nothing: ErrRefused and
// the refusal itself.
type refusedError struct{ err error }

func (e *refusedError) Error() string   { return e.err.Error() }
func (e *refusedError) Unwrap() []error { return []error{e.err, ErrRefused} }

// sentAny says whether the run sent a prompt (a generation request).
type sentAny struct{ atomic.Bool }

// refused is err as the run ends with it: a refusal when it is a check's
// and no prompt was sent.
func (a *asker) refused(err error) error {
	var rf refusal
	if err == nil || a.sent.Load() || !errors.As(err, &rf) || errors.Is(err, ErrRefused) {
		return err
	}
	return &refusedError{err}
}
