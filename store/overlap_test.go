package store

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
)

// recount computes a dataset's Overlap from its records, one Get per id
// and stage: what the counters kept in each transaction must equal.
func recount(t *testing.T, v *View, ds string) Overlap {
	t.Helper()
	ids := map[string]membership{}
	for st := Stage(0); st < numStages; st++ {
		if err := v.Each(ds, st, func(r *Record) error { ids[r.ID] |= 1 << st; return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var o Overlap
	for _, m := range ids {
		p, r, e, tk, x := m.has(Prompts), m.has(Raw), m.has(Errors), m.has(Tokenized), m.has(Excluded)
		if p && (r || e) {
			o.Answered++
		}
		if e && !r {
			o.ErrorsOpen++
		}
		if p && e && !r {
			o.Failed++
		}
		if r && tk {
			o.RawTokenized++
		}
		if r && x && !tk {
			o.RawExcluded++
		}
		if r && !p {
			o.RawNoPrompt++
		}
	}
	o.NoPromptKnown = true
	return o
}

// checkOverlap fails t when the stored Overlap differs from a recount.
func checkOverlap(t *testing.T, db *DB, ds, when string) Overlap {
	t.Helper()
	var got, want Overlap
	db.View(func(v *View) error {
		s, err := v.Summary(ds)
		if err != nil {
			t.Fatal(err)
		}
		got, want = s.Overlap, recount(t, v, ds)
		return nil
	})
	if got != want {
		t.Fatalf("%s: overlap counters %+v; the records say %+v", when, got, want)
	}
	return got
}

// TestRawExcluded: RawExcluded counts the answers with an exclusion and no
// tokenized record, whatever order the three arrive and leave in, and
// raw == tokenized + excluded + missing_tokenized holds at each step.
func TestRawExcluded(t *testing.T) {
	db := newDB(t)
	step := func(what string, recs []rec, excluded, missing uint64) {
		t.Helper()
		addAll(t, db, recs)
		o := checkOverlap(t, db, "ds", what)
		db.View(func(v *View) error {
			s, _ := v.Summary("ds")
			if s.Excluded() != excluded || s.MissingTokenized() != missing || o.RawExcluded != excluded {
				t.Errorf("%s: excluded %d, missing_tokenized %d; want %d and %d (%+v)", what, s.Excluded(), s.MissingTokenized(), excluded, missing, o)
			}
			if raw, tok := s.Stage(Raw).Records, s.Stage(Tokenized).Records; raw != tok+s.Excluded()+s.MissingTokenized() {
				t.Errorf("%s: raw %d != tokenized %d + excluded %d + missing %d", what, raw, tok, s.Excluded(), s.MissingTokenized())
			}
			return nil
		})
	}
	step("answers", []rec{{Raw, "a", 1, 1, 1}, {Raw, "b", 1, 1, 1}, {Raw, "c", 1, 1, 1}, {Raw, "d", 1, 1, 1}}, 0, 4)
	step("a excluded", []rec{{Excluded, "a", 2, 1, 1}}, 1, 3)
	step("b tokenized", []rec{{Tokenized, "b", 3, 1, 1}}, 1, 2)
	step("a tokenized after its exclusion", []rec{{Tokenized, "a", 3, 1, 1}}, 0, 2)
	step("b excluded after its record", []rec{{Excluded, "b", 2, 1, 1}}, 0, 2)
	step("c excluded", []rec{{Excluded, "c", 2, 1, 1}}, 1, 1)
	// An exclusion before its answer counts once the answer comes.
	step("e excluded, no answer", []rec{{Excluded, "e", 2, 1, 1}}, 1, 1)
	step("e answered", []rec{{Raw, "e", 1, 1, 1}}, 2, 1)
	// Turns never count: their keys are not the conversation's.
	step("turns", []rec{{Turns, "d#1", 4, 1, 1}, {Turns, "f#1", 4, 1, 1}}, 2, 1)

	// Removing the tokenized file brings a and b back as exclusions.
	var pos ChunkPos
	for done := false; !done; {
		if err := db.Update(func(tx *Tx) (err error) { _, done, err = tx.removeKeyed("ds", 3, &pos, 1); return err }); err != nil {
			t.Fatal(err)
		}
		checkOverlap(t, db, "ds", "removing the tokenized file")
	}
	if o := checkOverlap(t, db, "ds", "tokenized file removed"); o.RawExcluded != 4 || o.RawTokenized != 0 {
		t.Errorf("after removing the tokenized records: %+v; want 4 excluded (a, b, c, e)", o)
	}
	// Removing the answers leaves exclusions of nothing: none counted.
	for done := false; !done; {
		if err := db.Update(func(tx *Tx) (err error) { _, done, err = tx.removeKeyed("ds", 1, &pos, 2); return err }); err != nil {
			t.Fatal(err)
		}
	}
	if o := checkOverlap(t, db, "ds", "answers removed"); o.RawExcluded != 0 {
		t.Errorf("after removing the answers: %+v; want none excluded", o)
	}
}

// TestForgetCrashAtEveryCommit: forgetting a file of any stage (answers,
// exclusions, tokenized records, turns), with the commit numbered k
// failing as a crash would, leaves counters that agree with the records
// after every commit, and once finished after a reopen, exactly the
// counters of an index that never had the file.
func TestForgetCrashAtEveryCommit(t *testing.T) {
	files := []struct {
		path  string
		stage Stage
	}{{"/prompts", Prompts}, {"/raw", Raw}, {"/excluded", Excluded}, {"/tokenized", Tokenized}, {"/turns", Turns}}
	// PutFile numbers the files from 1 in this order.
	var all []rec
	for i := 0; i < 90; i++ {
		id := fmt.Sprintf("id%03d", i)
		all = append(all, rec{Prompts, id, 1, 0, 1})
		switch {
		case i%5 == 0:
			all = append(all, rec{Errors, id, 2, Unknown, 1000 + int64(i%7)})
		case i%3 != 0:
			all = append(all, rec{Raw, id, 2, int64(i % 11), 1000 + int64(i%7)})
		default:
			all = append(all, rec{Turns, id + "#1", 5, int64(i % 5), 1000})
		}
		if i%2 == 0 {
			all = append(all, rec{Excluded, id, 3, Unknown, 1})
		}
		if i%4 == 1 || i%6 == 0 {
			all = append(all, rec{Tokenized, id, 4, 2, 1})
		}
	}
	for fi, f := range files {
		t.Run(f.path[1:], func(t *testing.T) {
			var rest []rec
			for _, r := range all {
				if r.file != uint32(fi+1) {
					rest = append(rest, r)
				}
			}
			only := newDB(t)
			addAll(t, only, rest)
			want := state(t, only, "ds")
			checkOverlap(t, only, "ds", "without "+f.path)
			for k := 1; ; k++ {
				path := filepath.Join(t.TempDir(), "crash.db")
				db, err := Open(path, Options{NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := db.Update(func(tx *Tx) error {
					for _, f := range files {
						if err := tx.PutFile(&FileState{Path: f.path, Dataset: "ds", Stage: f.stage}); err != nil {
							return err
						}
					}
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				addAll(t, db, all)
				if o := checkOverlap(t, db, "ds", "all added"); o.RawExcluded == 0 || o.RawTokenized == 0 {
					t.Fatalf("no answer is excluded, or none tokenized: the test is vacuous (%+v)", o)
				}
				db.Close()

				db, failed := openFailingAt(t, path, k)
				err = forgetPath(db, f.path)
				if err == nil {
					err = db.FinishForgets(context.Background(), 7, func(string, uint64, bool) {
						checkOverlap(t, db, "ds", fmt.Sprintf("commit %d failing, a batch of %s removed", k, f.path))
					})
				}
				if *failed != (err != nil) {
					t.Fatalf("commit %d: injected %v, got %v", k, *failed, err)
				}
				db.Close()
				if db, err = Open(path, Options{NoSync: true}); err != nil {
					t.Fatal(err)
				}
				checkOverlap(t, db, "ds", fmt.Sprintf("reopened after commit %d failed", k))
				if err := forgetPath(db, f.path); err != nil {
					t.Fatal(err)
				}
				if err := db.FinishForgets(context.Background(), 7, nil); err != nil {
					t.Fatal(err)
				}
				got := state(t, db, "ds")
				checkOverlap(t, db, "ds", "finished")
				db.Close()
				if got != want {
					t.Fatalf("commit %d failed; after finishing:\n got %s\nwant %s", k, got, want)
				}
				if !*failed {
					if k < 4 {
						t.Fatalf("only %d commits: the removal did not run in batches", k-1)
					}
					return
				}
			}
		})
	}
}

// TestUntokenized: every prompt or response without a tokenized record is
// listed once, in id order, with its exclusion, error and answered turns;
// turns of another conversation whose id starts the same are not counted.
func TestUntokenized(t *testing.T) {
	db := newDB(t)
	var recs []rec
	for _, id := range []string{"a", "a ", "a#x", "b", "c", "d", "e"} {
		recs = append(recs, rec{Prompts, id, 1, 0, 1})
	}
	recs = append(recs,
		rec{Turns, "a#1", 2, 1, 1}, rec{Turns, "a#2", 2, 1, 1}, rec{Turns, "a#x#1", 2, 1, 1}, rec{Turns, "b#1", 2, 1, 1},
		rec{Raw, "b", 3, 1, 1}, rec{Raw, "c", 3, 1, 1}, rec{Raw, "z", 3, 1, 1}, rec{Raw, "y", 3, 1, 1},
		rec{Tokenized, "b", 4, 1, 1}, rec{Tokenized, "q", 4, 1, 1},
		rec{Excluded, "c", 5, 1, 1}, rec{Excluded, "z", 5, 1, 1},
		rec{Errors, "d", 6, 1, 1}, rec{Errors, "z", 6, 1, 1})
	addAll(t, db, recs)
	var got []string
	db.View(func(v *View) error {
		return v.Untokenized("ds", func(u *Untokenized) error {
			s := fmt.Sprintf("%s p%v r%v t%d", u.ID, u.Prompt, u.Answered, u.Turns)
			if u.Excluded != nil {
				s += " excluded:" + u.Excluded.ID
			}
			if u.Failed != nil {
				s += " failed:" + u.Failed.ID
			}
			got = append(got, s)
			return nil
		})
	})
	want := []string{
		"a ptrue rfalse t2", "a  ptrue rfalse t0", "a#x ptrue rfalse t1",
		"c ptrue rtrue t0 excluded:c", "d ptrue rfalse t0 failed:d", "e ptrue rfalse t0",
		"y pfalse rtrue t0", "z pfalse rtrue t0 excluded:z failed:z",
	}
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Errorf("untokenized:\n got %q\nwant %q", got, want)
	}
}
