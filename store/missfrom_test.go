package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// missingBoth lists the prompts without an answer or an error twice: with
// the dataset's missing-from hint and with the full walk from the first
// key. It returns both and the hint.
func missingBoth(t *testing.T, db *DB, ds string) (hinted, full []string, hint []byte) {
	t.Helper()
	err := db.View(func(v *View) error {
		if b := v.datasetBucket(ds); b != nil {
			hint = v.missFrom(b, []Stage{Raw, Errors})
		}
		if err := v.Missing(ds, Prompts, func(id string) error { hinted = append(hinted, id); return nil }, Errors, Raw); err != nil {
			return err
		}
		return v.missing(ds, Prompts, func(id string) error { full = append(full, id); return nil }, false, Raw, Errors)
	})
	if err != nil {
		t.Fatal(err)
	}
	return hinted, full, hint
}

// TestMissingHintIsMaintained: whatever the order of prompts, answers,
// errors, redone and merged answers, files forgotten (by their key index
// or by a scan of their stages) and datasets dropped, in transactions of
// one or several of them and with the hint moved forward a few keys or
// many per commit, Missing from the hint lists exactly what the full walk
// from the first key lists, after every transaction.
func TestMissingHintIsMaintained(t *testing.T) {
	defer func(b int) { hintBudget = b }(hintBudget)
	rng := rand.New(rand.NewPCG(44, 10))
	var skipped, below int
	for round := range 24 {
		hintBudget = []int{0, 1, 3, 4096}[round%4]
		db := newDB(t)
		var now int64 = 10000
		op := func(tx *Tx) (string, error) {
			now += 1000
			file := uint32(1 + rng.IntN(4))
			id := fmt.Sprintf("id%02d", rng.IntN(30))
			r := &Record{ID: id, File: file, PromptTokens: 1, CompletionTokens: 2, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: now, OwnTime: true, Finish: "stop"}
			switch o := rng.IntN(20); {
			case o < 6: // a prompt
				_, err := tx.Add("ds", Prompts, r)
				return "prompt " + id, err
			case o < 10: // an answer
				_, err := tx.Add("ds", Raw, r)
				return "answer " + id, err
			case o < 12: // a final error
				_, err := tx.Add("ds", Errors, r)
				return "error " + id, err
			case o == 12: // a redo's answer
				if old, err := tx.Replace("ds", Raw, r); old != nil || err != nil {
					return "redo " + id, err
				}
				_, err := tx.Add("ds", Raw, r)
				return "redo (add) " + id, err
			case o == 13: // a streamed answer's next chunk
				_, err := tx.Merge("ds", Raw, r)
				return "merge " + id, err
			case o < 17: // a file forgotten through its key index, a part or all
				var pos ChunkPos
				_, _, err := tx.removeKeyed("ds", file, &pos, 1+rng.IntN(20))
				return fmt.Sprintf("forget file %d (keyed)", file), err
			case o < 19: // a file forgotten by scanning a stage, from some key
				st := []Stage{Prompts, Raw, Errors}[rng.IntN(3)]
				var after []byte
				if rng.IntN(2) == 0 {
					after = []byte(id)
				}
				_, _, err := tx.removeScan("ds", st, file, after, 1+rng.IntN(10))
				return fmt.Sprintf("forget file %d (scan %s after %q)", file, st, after), err
			default:
				if rng.IntN(4) != 0 {
					return "nothing", nil
				}
				_, err := tx.DropDataset("ds")
				return "drop", err
			}
		}
		for step := range 120 {
			var did []string
			err := db.Update(func(tx *Tx) error {
				for range 1 + rng.IntN(3) {
					what, err := op(tx)
					if err != nil {
						return err
					}
					did = append(did, what)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			hinted, full, hint := missingBoth(t, db, "ds")
			if !slices.Equal(hinted, full) {
				t.Fatalf("round %d step %d (%v): missing from hint %q: %v, from the first key: %v", round, step, did, hint, hinted, full)
			}
			if len(full) > 0 && bytes.Equal(hint, []byte(full[0])) {
				skipped++
			}
			if len(full) > 0 && len(hint) > 0 && string(hint) < full[len(full)-1] {
				below++
			}
		}
	}
	if skipped < 100 || below < 100 {
		t.Fatalf("the hint stood at the first missing prompt %d times, below a missing one %d times: the test is vacuous", skipped, below)
	}
}

// TestMissingHintVoidedByOtherWriters: a writer that does not keep the hint
// (an older gendex: no lowering, no hint written) adds a prompt without an
// answer below it, or forgets an answer below it; Missing still lists that
// prompt (the hint's fingerprint no longer matches), and the next writer
// that keeps it writes it right again.
func TestMissingHintVoidedByOtherWriters(t *testing.T) {
	for _, tc := range []struct {
		name string
		old  func(tx *Tx) error
		want []string
	}{
		{"a prompt added", func(tx *Tx) error {
			_, err := tx.Add("ds", Prompts, &Record{ID: "a0", File: 1, CompletionTokens: Unknown, PromptTokens: 1, CachedTokens: Unknown, ReasoningTokens: Unknown})
			return err
		}, []string{"a0", "c"}},
		{"an answer forgotten", func(tx *Tx) error {
			var pos ChunkPos
			_, _, err := tx.removeKeyed("ds", 2, &pos, 100)
			return err
		}, []string{"a", "b", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newDB(t)
			add := func(tx *Tx, st Stage, id string, file uint32) {
				if _, err := tx.Add("ds", st, &Record{ID: id, File: file, CompletionTokens: 1, PromptTokens: 1, CachedTokens: Unknown, ReasoningTokens: Unknown}); err != nil {
					t.Fatal(err)
				}
			}
			err := db.Update(func(tx *Tx) error {
				for _, id := range []string{"a", "b", "c"} {
					add(tx, Prompts, id, 1)
				}
				add(tx, Raw, "a", 2)
				add(tx, Errors, "b", 2)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, _, hint := missingBoth(t, db, "ds"); string(hint) != "c" {
				t.Fatalf("hint %q, want \"c\"", hint)
			}
			keep := hintKept
			hintKept = false
			err = db.Update(tc.old)
			hintKept = keep
			if err != nil {
				t.Fatal(err)
			}
			for _, when := range []string{"after the old writer", "after the next writer"} {
				hinted, full, hint := missingBoth(t, db, "ds")
				if !slices.Equal(hinted, tc.want) || !slices.Equal(full, tc.want) {
					t.Fatalf("%s: missing from hint %q: %v, from the first key: %v, want %v", when, hint, hinted, full, tc.want)
				}
				if err := db.Update(func(tx *Tx) error { return tx.AdjustDuplicates("ds", Raw, 0) }); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
