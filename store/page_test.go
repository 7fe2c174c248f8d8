package store

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// pageIDs walks one page and returns the ids fn kept and where it ended.
func pageIDs(t *testing.T, db *DB, r PageRequest, limit int, keep func(*Record) bool) ([]string, PageEnd) {
	t.Helper()
	var ids []string
	var end PageEnd
	err := db.View(func(v *View) error {
		var err error
		end, err = v.Page(r, func(rec *Record) (bool, error) {
			if keep == nil || keep(rec) {
				ids = append(ids, rec.ID)
			}
			return len(ids) < limit, nil
		})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, end
}

// TestPage: pages forwards and back from any id (a stored one or not),
// ending where the keys end, a filter bounded by Scan, and a stage or
// dataset that has nothing.
func TestPage(t *testing.T) {
	db := newDB(t)
	var recs []rec
	for i := range 10 {
		recs = append(recs, rec{Raw, fmt.Sprintf("id%02d", i*2), 1, int64(i), 100})
	}
	addAll(t, db, recs)
	cases := []struct {
		r     PageRequest
		limit int
		want  string
		more  bool
	}{
		{PageRequest{Dataset: "ds", Stage: Raw}, 3, "[id00 id02 id04]", true},
		{PageRequest{Dataset: "ds", Stage: Raw, After: "id04"}, 3, "[id06 id08 id10]", true},
		{PageRequest{Dataset: "ds", Stage: Raw, After: "id05"}, 3, "[id06 id08 id10]", true},
		{PageRequest{Dataset: "ds", Stage: Raw, After: "id14"}, 3, "[id16 id18]", false},
		{PageRequest{Dataset: "ds", Stage: Raw, After: "id18"}, 3, "[]", false},
		{PageRequest{Dataset: "ds", Stage: Raw, After: "id12"}, 3, "[id14 id16 id18]", false},
		{PageRequest{Dataset: "ds", Stage: Raw, Back: true}, 2, "[id18 id16]", true},
		{PageRequest{Dataset: "ds", Stage: Raw, Back: true, Before: "id04"}, 3, "[id02 id00]", false},
		{PageRequest{Dataset: "ds", Stage: Raw, Back: true, Before: "id05"}, 1, "[id04]", true},
		{PageRequest{Dataset: "ds", Stage: Raw, Back: true, Before: "zz"}, 1, "[id18]", true},
		{PageRequest{Dataset: "ds", Stage: Errors}, 3, "[]", false},
		{PageRequest{Dataset: "nope", Stage: Raw}, 3, "[]", false},
	}
	for _, c := range cases {
		ids, end := pageIDs(t, db, c.r, c.limit, nil)
		if fmt.Sprint(ids) != c.want || end.More != c.more {
			t.Errorf("%+v limit %d: %v more=%v, want %s more=%v", c.r, c.limit, ids, end.More, c.want, c.more)
		}
	}
	// A filter that keeps every third record, bounded to 4 keys a call:
	// the pages resume from Last and find every kept id once.
	keep := func(r *Record) bool { return r.CompletionTokens%3 == 0 }
	var all []string
	r := PageRequest{Dataset: "ds", Stage: Raw, Scan: 4}
	for calls := 0; ; calls++ {
		if calls > 10 {
			t.Fatal("the bounded pages never end")
		}
		ids, end := pageIDs(t, db, r, 100, keep)
		if end.Looked > 4 {
			t.Fatalf("looked at %d keys with Scan 4", end.Looked)
		}
		all = append(all, ids...)
		if !end.More {
			break
		}
		r.After = end.Last
	}
	if fmt.Sprint(all) != "[id00 id06 id12 id18]" {
		t.Errorf("bounded filtered pages = %v", all)
	}
}

// TestSample: a sample holds distinct stored records, at most as many as
// the stage has, and over many draws reaches every part of the stage.
func TestSample(t *testing.T) {
	db := newDB(t)
	var recs []rec
	for i := range 500 {
		recs = append(recs, rec{Raw, fmt.Sprintf("B1-%05d", i*7), 1, int64(i), 100})
	}
	addAll(t, db, recs)
	rng := rand.New(rand.NewPCG(1, 2))
	seen := map[string]bool{}
	err := db.View(func(v *View) error {
		for range 50 {
			got, err := v.Sample("ds", Raw, 10, rng)
			if err != nil {
				return err
			}
			if len(got) != 10 {
				t.Fatalf("sample of 10 from 500: %d records", len(got))
			}
			var ids []string
			for _, r := range got {
				if _, ok, _ := v.Get("ds", Raw, r.ID); !ok {
					t.Errorf("sampled id %q is not stored", r.ID)
				}
				ids = append(ids, r.ID)
				seen[r.ID] = true
			}
			slices.Sort(ids)
			if len(slices.Compact(ids)) != 10 {
				t.Errorf("sample with repeats: %v", ids)
			}
		}
		small, err := v.Sample("ds", Errors, 10, rng)
		if err != nil || len(small) != 0 {
			t.Errorf("sample of an empty stage: %v %v", small, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// 500 draws of 10 over 500 ids: every tenth of the key range is hit.
	for part := range 10 {
		hit := false
		for id := range seen {
			var n int
			fmt.Sscanf(id, "B1-%d", &n)
			hit = hit || n/7/50 == part
		}
		if !hit {
			t.Errorf("no sampled id in the %d-th tenth of the stage", part+1)
		}
	}
}

// TestSampleDrawsEverySample: in a stage of 3 samples per prompt, a
// sample draws samples 1 and 2 about as often as sample 0 (their keys sit
// in a sliver of the key space right after the prompt's id, where a seek
// to a random key almost never lands).
func TestSampleDrawsEverySample(t *testing.T) {
	db := newDB(t)
	err := db.Update(func(tx *Tx) error {
		for i := range 100 {
			for s := range 3 {
				r := Record{ID: UnitID(fmt.Sprintf("p%03d", i), s), Samples: 3, PromptTokens: Unknown, CompletionTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown}
				if _, err := tx.Add("ds", Raw, &r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var bySample [3]int
	err = db.View(func(v *View) error {
		for range 100 {
			got, err := v.Sample("ds", Raw, 6, rng)
			if err != nil || len(got) != 6 {
				return fmt.Errorf("sample of 6: %d records, %v", len(got), err)
			}
			for _, r := range got {
				_, s := SplitUnit(r.ID)
				bySample[s]++
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for s, n := range bySample { // 200 expected each
		if n < 120 {
			t.Errorf("sample %d drawn %d times of 600 (by sample: %v); want each about a third", s, n, bySample)
		}
	}
}
