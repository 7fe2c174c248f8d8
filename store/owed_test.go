package store

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// checkPending recounts what Summary.Pending keeps, from the marks and the
// stages (a scan, which the store never does), and fails when they differ.
func checkPending(t *testing.T, db *DB, when string) Pending {
	t.Helper()
	var want Pending
	var got Summary
	err := db.View(func(v *View) error {
		var err error
		if got, err = v.Summary("ds"); err != nil {
			return err
		}
		has := func(s Stage, id string) bool {
			_, ok, _ := v.Get("ds", s, id)
			return ok
		}
		if err := v.Stale("ds", func(id string) error {
			if has(Raw, id) && (has(Tokenized, id) || has(Excluded, id)) {
				want.Stale++
			}
			return nil
		}); err != nil {
			return err
		}
		return v.Asking("ds", func(id string) error {
			if !has(Raw, id) || !has(Prompts, id) {
				t.Errorf("%s: %s is being asked again without an answer and a prompt", when, id)
			}
			want.Asking++
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	want.Choosing = got.Pending.Choosing // a flag, no count: kept as set
	if got.Pending != want {
		t.Fatalf("%s: Pending %+v, recounted %+v", when, got.Pending, want)
	}
	if o := got.Owed(); o.Records > got.Stage(Raw).Records || o.Stale > o.Records {
		t.Fatalf("%s: owed %+v with %d answers", when, o, got.Stage(Raw).Records)
	}
	return got.Pending
}

// TestPendingIsMaintained: whatever the order of answers, redone answers,
// records, exclusions, final errors, files forgotten, export's clearing
// and a redo's set of answers asked again, the stale and asking counters
// equal a recount of what they count, after every transaction: an id's
// record built from a replaced answer counts while it has its answer and
// the record, again when a forgotten file is read again, and no count
// goes below 0; so too when records name the answer they were built from
// (From), marked and unmarked by it.
func TestPendingIsMaintained(t *testing.T) {
	rng := rand.New(rand.NewPCG(39, 2))
	sums := rand.New(rand.NewPCG(43, 1)) // answer sums and the answers records name (From): rng's sequence unchanged
	var maxStale, maxAsking uint64
	for round := range 30 {
		db := newDB(t)
		id := func() string { return fmt.Sprintf("id%d", rng.IntN(12)) }
		var now int64 = 10000
		addAll(t, db, []rec{{stage: Prompts, id: "id0", file: 1, sec: 1}})
		for step := range 120 {
			now += 1000
			op := rng.IntN(10)
			err := db.Update(func(tx *Tx) error {
				file := uint32(1 + rng.IntN(4))
				r := &Record{ID: id(), File: file, PromptTokens: 1, CompletionTokens: 2, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: now, OwnTime: true, Finish: "stop"}
				r.Sum = uint32(sums.IntN(3))
				if sums.IntN(2) == 0 { // a record that names its answer
					r.From, r.HasFrom = uint32(sums.IntN(3)), true
				}
				switch op {
				case 0, 1: // a prompt, an answer
					_, err := tx.Add("ds", []Stage{Prompts, Raw}[op], r)
					return err
				case 2: // a redo's answer
					if old, err := tx.Replace("ds", Raw, r); old != nil || err != nil {
						return err
					}
					_, err := tx.Add("ds", Raw, r)
					return err
				case 3: // a record (no time of its own)
					r.Time, r.OwnTime = 0, false
					_, err := tx.Add("ds", Tokenized, r)
					return err
				case 4: // an exclusion, made now or (read again) before
					r.Time -= int64(rng.IntN(3)) * 1500
					_, err := tx.Add("ds", Excluded, r)
					return err
				case 5:
					_, err := tx.Add("ds", Errors, r)
					return err
				case 6: // a file forgotten
					var pos ChunkPos
					_, _, err := tx.removeKeyed("ds", file, &pos, 1000)
					return err
				case 7: // export took some stale records out
					return tx.ClearStale("ds", []string{id(), id()})
				case 8: // a redo starts, with its set whole or to find as it goes
					if rng.IntN(2) == 0 {
						_, err := tx.SetAsking("ds", []string{id(), id(), id()})
						return err
					}
					_, err := tx.StartAsking("ds")
					return err
				case 9: // a redo that finds its set as it goes finds some
					_, err := tx.AddAsking("ds", []string{id(), id()})
					return err
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			p := checkPending(t, db, fmt.Sprintf("round %d step %d (op %d)", round, step, op))
			maxStale, maxAsking = max(maxStale, p.Stale), max(maxAsking, p.Asking)
		}
	}
	if maxStale == 0 || maxAsking == 0 {
		t.Fatalf("stale at most %d, asking at most %d: the test is vacuous", maxStale, maxAsking)
	}
}

// TestStaleOnlyBeforeItsAnswer: a redo's answer makes the exclusion of
// its id stale when the exclusion was made before it (excluded_at earlier
// than the answer's time), not when it was made after (export made it
// from this answer: a fresh index reads excluded.jsonl before the
// answers). An exclusion read after the answers is taken as theirs. A
// record without a time of its own is stale when a redo's answer comes
// after it.
func TestStaleOnlyBeforeItsAnswer(t *testing.T) {
	for _, tc := range []struct {
		name       string
		excludedAt int64
		first      Stage
		stale      uint64
	}{
		{"exclusion before the redo, read first", 1500, Excluded, 1},
		{"exclusion before the redo, read after", 1500, Raw, 0},
		{"exclusion after the redo, read first", 2500, Excluded, 0},
		{"exclusion after the redo, read after", 2500, Raw, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := newDB(t)
			rec := func(tm int64) *Record {
				return &Record{ID: "a", File: 1, PromptTokens: 1, CompletionTokens: 2, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: tm, OwnTime: true, Finish: "length"}
			}
			exclusion := func(tx *Tx) error {
				_, err := tx.Add("ds", Excluded, rec(tc.excludedAt))
				return err
			}
			answers := func(tx *Tx) error {
				if _, err := tx.Add("ds", Raw, rec(1000)); err != nil {
					return err
				}
				_, err := tx.Replace("ds", Raw, rec(2000))
				return err
			}
			steps := []func(*Tx) error{exclusion, answers}
			if tc.first == Raw {
				steps[0], steps[1] = answers, exclusion
			}
			for _, f := range steps {
				if err := db.Update(f); err != nil {
					t.Fatal(err)
				}
			}
			if p := checkPending(t, db, tc.name); p.Stale != tc.stale {
				t.Errorf("stale %d, want %d", p.Stale, tc.stale)
			}
		})
	}
	db := newDB(t)
	err := db.Update(func(tx *Tx) error {
		tx.Add("ds", Raw, &Record{ID: "a", File: 1, CompletionTokens: 1, PromptTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: 1000, OwnTime: true})
		tx.Add("ds", Tokenized, &Record{ID: "a", File: 2, CompletionTokens: Unknown, PromptTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown})
		_, err := tx.Replace("ds", Raw, &Record{ID: "a", File: 1, CompletionTokens: 1, PromptTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: 900, OwnTime: true})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if p := checkPending(t, db, "a record, then a redo"); p.Stale != 1 {
		t.Errorf("a record without a time of its own, then a redo's answer: stale %d, want 1", p.Stale)
	}
}
