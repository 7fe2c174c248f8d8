package store

import (
	"fmt"
	"testing"
)

// TestStaleByTheAnswerItNames: a record or exclusion that names the answer
// it was built from (From) is stale exactly when that is not its id's
// newest answer, whichever is indexed first (the record, the first answer
// or the redo that replaces it): a fresh index of the files reaches what
// the index that saw the redo holds. Time plays no part for it: a record
// without a time of its own read before a redo's answer is not stale when
// it names that answer.
func TestStaleByTheAnswerItNames(t *testing.T) {
	const first, redo = 0x1111, 0x2222
	answer := func(sum uint32, tm int64) *Record {
		return &Record{ID: "a", File: 1, PromptTokens: 1, CompletionTokens: 2, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: tm, OwnTime: true, Finish: "length", Sum: sum}
	}
	for _, stage := range []Stage{Tokenized, Excluded} {
		for _, from := range []uint32{first, redo} {
			for at := 0; at < 3; at++ { // the record before the first answer, between them, after the redo
				name := fmt.Sprintf("%s from %x read at %d", stage, from, at)
				t.Run(name, func(t *testing.T) {
					db := newDB(t)
					steps := []func(*Tx) error{
						func(tx *Tx) error { _, err := tx.Add("ds", Raw, answer(first, 1000)); return err },
						func(tx *Tx) error { _, err := tx.Replace("ds", Raw, answer(redo, 2000)); return err },
					}
					record := func(tx *Tx) error {
						r := &Record{ID: "a", File: 2, PromptTokens: Unknown, CompletionTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown, From: from, HasFrom: true}
						if stage == Excluded {
							r.Finish = "length"
						}
						_, err := tx.Add("ds", stage, r)
						return err
					}
					steps = append(steps[:at], append([]func(*Tx) error{record}, steps[at:]...)...)
					for _, f := range steps {
						if err := db.Update(f); err != nil {
							t.Fatal(err)
						}
					}
					want := uint64(0)
					if from == first {
						want = 1
					}
					if p := checkPending(t, db, name); p.Stale != want {
						t.Errorf("stale %d, want %d", p.Stale, want)
					}
					db.View(func(v *View) error {
						r, ok, err := v.Get("ds", stage, "a")
						if err != nil || !ok || !r.HasFrom || r.From != from {
							t.Errorf("the stored record: %+v %v %v, want From %x", r, ok, err, from)
						}
						return nil
					})
				})
			}
		}
	}
}

// TestStaleWhenEitherNamesAnother: an id with both a record and an
// exclusion, each naming its answer, is stale when either names another
// than its answer, in either order of their adding after the answer (the
// one added second is judged with the first, which it does not read back).
func TestStaleWhenEitherNamesAnother(t *testing.T) {
	const answer, other = 0x1111, 0x2222
	for _, froms := range [][2]uint32{{answer, answer}, {other, answer}, {answer, other}} { // the record's, the exclusion's
		for _, excludedFirst := range []bool{false, true} {
			name := fmt.Sprintf("record from %x, exclusion from %x, exclusion first %v", froms[0], froms[1], excludedFirst)
			t.Run(name, func(t *testing.T) {
				db := newDB(t)
				add := func(stage Stage, r *Record) {
					t.Helper()
					if err := db.Update(func(tx *Tx) error { _, err := tx.Add("ds", stage, r); return err }); err != nil {
						t.Fatal(err)
					}
				}
				add(Raw, &Record{ID: "a", File: 1, PromptTokens: 1, CompletionTokens: 2, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: 1000, OwnTime: true, Finish: "length", Sum: answer})
				record := &Record{ID: "a", File: 2, PromptTokens: Unknown, CompletionTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown, From: froms[0], HasFrom: true}
				exclusion := &Record{ID: "a", File: 3, PromptTokens: Unknown, CompletionTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown, Finish: "length", From: froms[1], HasFrom: true}
				if excludedFirst {
					add(Excluded, exclusion)
					add(Tokenized, record)
				} else {
					add(Tokenized, record)
					add(Excluded, exclusion)
				}
				want := uint64(1)
				if froms[0] == answer && froms[1] == answer {
					want = 0
				}
				if p := checkPending(t, db, name); p.Stale != want {
					t.Errorf("stale %d, want %d", p.Stale, want)
				}
			})
		}
	}
}
