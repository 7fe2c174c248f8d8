package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// The limits of what one record may hold. CheckRecord tells a record that
// breaks one from a good one before anything is written, so that a caller
// can leave that one line out and index the rest.
const (
	// MaxIDLen is the longest id the index stores, in bytes: an id is a
	// stage bucket's key as it is (no prefix), so bbolt's key limit.
	MaxIDLen = bolt.MaxKeySize
	// MaxTokens is the largest token count one record may carry. No model
	// answers with 4 billion tokens; the bound keeps every sum the index
	// maintains (uint64 per stage, int64 per second) far from overflowing.
	MaxTokens = 1 << 32
	// MaxFinish is the longest finish reason (or error reason) kept, in
	// bytes; a longer one is cut at a character boundary. Finish reasons
	// are counted by value in the dataset's counters.
	MaxFinish = 64
)

// ErrUnstorable marks a record the index cannot hold (see CheckRecord).
// Tx.Add returns it, wrapped, before changing anything, so the transaction
// can go on with the other records.
var ErrUnstorable = errors.New("record cannot be stored")

type unstorable struct{ msg string }

func (e *unstorable) Error() string        { return e.msg }
func (e *unstorable) Is(target error) bool { return target == ErrUnstorable }

func unstorablef(format string, a ...any) error {
	return &unstorable{msg: fmt.Sprintf(format, a...)}
}

// CheckRecord returns an error matching ErrUnstorable when r cannot be
// stored: an empty id, an id over MaxIDLen bytes, an id holding UnitSep
// other than as a unit's key (UnitID, with a sample below r.Samples), a
// count over MaxTokens (or below Unknown), Samples over MaxSamples, or a
// negative time. Its message says what is wrong, for a file:line report.
func CheckRecord(r *Record) error {
	switch {
	case r.ID == "":
		return unstorablef("empty id")
	case len(r.ID) > MaxIDLen:
		return unstorablef("id is %d bytes, more than the index's limit of %d (it begins %.40q)", len(r.ID), MaxIDLen, r.ID)
	case r.Time < 0:
		return unstorablef("time %d ms is before 1970", r.Time)
	case r.Samples > MaxSamples:
		return unstorablef("samples %d is more than the index's limit of %d", r.Samples, MaxSamples)
	case !unitKeyOK(r.ID, r.Samples):
		return unstorablef("id holds a NUL byte (the index keeps it to part an id from its sample)")
	}
	for _, c := range [...]struct {
		name string
		v    int64
	}{{"prompt_tokens", r.PromptTokens}, {"completion_tokens", r.CompletionTokens},
		{"cached_tokens", r.CachedTokens}, {"reasoning_tokens", r.ReasoningTokens}} {
		if c.v > MaxTokens || c.v < Unknown {
			return unstorablef("%s %d is out of range (0 to %d)", c.name, c.v, int64(MaxTokens))
		}
	}
	return nil
}

// ClipFinish returns s as a finish reason is stored: valid UTF-8 (invalid
// bytes become U+FFFD, as JSON would make them, so the counter keyed by it
// reads back the same) and at most MaxFinish bytes, cut at a character
// boundary.
func ClipFinish(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return Clip(s, MaxFinish)
}

// Clip returns s cut to at most n bytes at a character boundary, so a
// multi-byte character is never split. It is gendex's one way to shorten a
// message: the store cuts what it keeps with it, and the SGLang client the
// server messages it reports.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
