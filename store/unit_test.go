package store

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestUnitID: sample 0 is keyed by its id (a dataset of one sample keeps
// its keys), every other sample by a key no id and no other unit has, and
// SplitUnit and PromptID give the id and sample back, through a turn's key.
func TestUnitID(t *testing.T) {
	if got := UnitID("q-1", 0); got != "q-1" {
		t.Errorf("UnitID(q-1, 0) = %q; want the id", got)
	}
	seen := map[string]string{}
	for _, id := range []string{"a", "a1", "a#1", "a\u00011", "1", "a 1"} {
		for s := range 12 {
			k := UnitID(id, s)
			if other, dup := seen[k]; dup {
				t.Errorf("UnitID(%q, %d) = %q, the key of %s too", id, s, k, other)
			}
			seen[k] = fmt.Sprintf("(%q, %d)", id, s)
			if gid, gs := SplitUnit(k); gid != id || gs != s {
				t.Errorf("SplitUnit(%q) = %q, %d; want %q, %d", k, gid, gs, id, s)
			}
			turn := k + "#" + strconv.Itoa(s+1) // ingest.TurnID
			if p := PromptID(Turns, turn); p != id {
				t.Errorf("PromptID(turns, %q) = %q; want %q", turn, p, id)
			}
			if p := PromptID(Raw, k); p != id {
				t.Errorf("PromptID(raw, %q) = %q; want %q", k, p, id)
			}
			if !isUnitOf([]byte(k), []byte(id)) || string(unitPrompt([]byte(k))) != id {
				t.Errorf("%q is not read as a unit of %q", k, id)
			}
			if s > 0 && isUnitOf([]byte(k), []byte(id[:len(id)-1])) && len(id) > 1 {
				t.Errorf("%q is read as a unit of %q", k, id[:len(id)-1])
			}
		}
	}
}

// TestUnitKeyChecked: a record whose id holds UnitSep other than as
// UnitID writes it, with a sample below the record's Samples, cannot be
// stored: it would be read as a unit it is not.
func TestUnitKeyChecked(t *testing.T) {
	ok := func(id string, samples uint32) Record {
		return Record{ID: id, Samples: samples, PromptTokens: Unknown, CompletionTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown}
	}
	for _, c := range []struct {
		r    Record
		good bool
	}{
		{ok("a", 0), true}, {ok(UnitID("a", 2), 3), true}, {ok(UnitID("a", 2)+"#4", 3), true},
		{ok(UnitID("a", 3), 3), false}, {ok(UnitID("a", 1), 0), false}, {ok("a\x00", 3), false},
		{ok("a\x0001", 3), false}, {ok("\x001", 3), false}, {ok("a\x001\x001", 3), false},
		{ok("a", MaxSamples+1), false},
	} {
		err := CheckRecord(&c.r)
		if good := err == nil; good != c.good || err != nil && !errors.Is(err, ErrUnstorable) {
			t.Errorf("CheckRecord(%q, samples %d) = %v; want stored %v", c.r.ID, c.r.Samples, err, c.good)
		}
	}
	r := ok(UnitID("a", 2), 3)
	var back Record
	if err := decodeRecord(r.appendBinary(nil), &back); err != nil || back.Samples != 3 {
		t.Errorf("Samples through the encoding: %d, %v; want 3", back.Samples, err)
	}
}

// unitRec is a record of the sampled dataset test: stage, prompt, sample
// (-1: a prompt) and file.
type unitRec struct {
	stage  Stage
	id     string
	sample int
	file   uint32
}

// unitCounts is what a sampled dataset's counters say, or what its
// records say they must.
type unitCounts struct {
	Overlap     Overlap
	Done        map[string]uint64
	Samples     uint64
	MissingRaw  uint64
	PromptsDone uint64
	Missing     []string
}

// recountUnits computes unitCounts from the records, one Get per unit
// and stage; got reads them from the counters.
func recountUnits(t *testing.T, v *View) (got, want unitCounts) {
	t.Helper()
	s, err := v.Summary("ds")
	if err != nil {
		t.Fatal(err)
	}
	got = unitCounts{s.Overlap, s.Done, s.Samples(), s.MissingRaw(), s.PromptsDone(), nil}
	v.Missing("ds", Prompts, func(id string) error { got.Missing = append(got.Missing, id); return nil }, Raw, Errors)
	units, prompts := map[string]membership{}, map[string]bool{}
	want.Samples = 1
	for st := Stage(0); st < numStages; st++ {
		v.Each("ds", st, func(r *Record) error {
			if st == Prompts {
				prompts[r.ID] = true
			} else {
				units[r.ID] |= 1 << st
			}
			want.Samples = max(want.Samples, uint64(r.Samples))
			return nil
		})
	}
	outcomes := map[string]int{}
	for u, m := range units {
		p, _ := SplitUnit(u)
		if prompts[p] {
			m |= 1 << Prompts
		}
		o := overlapOf(m)
		want.Overlap.Answered += o.Answered
		want.Overlap.ErrorsOpen += o.ErrorsOpen
		want.Overlap.Failed += o.Failed
		want.Overlap.RawTokenized += o.RawTokenized
		want.Overlap.RawExcluded += o.RawExcluded
		want.Overlap.RawNoPrompt += o.RawNoPrompt
		if m.has(Prompts) && m&answeredStages != 0 {
			outcomes[p]++
		}
	}
	want.Overlap.NoPromptKnown = true
	for p := range prompts {
		if k := outcomes[p]; k >= 2 {
			want.Done = bump(want.Done, strconv.Itoa(k), 1)
		}
		if uint64(outcomes[p]) >= want.Samples {
			want.PromptsDone++
		}
	}
	want.MissingRaw = uint64(len(prompts))*want.Samples - want.Overlap.Answered
	v.Each("ds", Prompts, func(r *Record) error {
		for s := range int(want.Samples) {
			if m := units[UnitID(r.ID, s)]; m&answeredStages == 0 {
				want.Missing = append(want.Missing, UnitID(r.ID, s))
			}
		}
		return nil
	})
	return got, want
}

// TestSampledCountersAnyOrder: the unit counters of a dataset of three
// samples per prompt (answers, final errors, answers without a prompt,
// one line of sample 0 naming no samples) equal a recount from the records
// whatever order the records come in, and as each file is removed.
func TestSampledCountersAnyOrder(t *testing.T) {
	var all []unitRec
	for i := range 6 {
		p := fmt.Sprintf("p%d", i)
		if i != 5 { // p5's answers have no prompt
			all = append(all, unitRec{Prompts, p, -1, 1})
		}
		for s := range 3 {
			switch (i + s) % 4 {
			case 0, 1:
				all = append(all, unitRec{Raw, p, s, 2 + uint32(s%2)})
			case 2:
				all = append(all, unitRec{Errors, p, s, 4})
			}
		}
	}
	all = append(all, unitRec{Errors, "p0", 0, 4}, unitRec{Tokenized, "p1", 0, 5}, unitRec{Prompts, "p6", -1, 6})
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		recs := append([]unitRec(nil), all...)
		rng.Shuffle(len(recs), func(i, j int) { recs[i], recs[j] = recs[j], recs[i] })
		db := newDB(t)
		for len(recs) > 0 {
			n := min(len(recs), 1+rng.IntN(4))
			addUnits(t, db, recs[:n])
			recs = recs[n:]
			checkUnits(t, db, fmt.Sprintf("seed %d, %d to go", seed, len(recs)))
		}
		for _, file := range rng.Perm(6) {
			var pos ChunkPos
			for done := false; !done; {
				if err := db.Update(func(tx *Tx) (err error) { _, done, err = tx.removeKeyed("ds", uint32(file+1), &pos, 2); return err }); err != nil {
					t.Fatal(err)
				}
				checkUnits(t, db, fmt.Sprintf("seed %d, removing file %d", seed, file+1))
			}
		}
	}
}

func addUnits(t *testing.T, db *DB, recs []unitRec) {
	t.Helper()
	err := db.Update(func(tx *Tx) error {
		for _, r := range recs {
			x := Record{ID: r.id, File: r.file, PromptTokens: 1, CompletionTokens: 2, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: 1000}
			if r.sample >= 0 {
				x.ID = UnitID(r.id, r.sample)
				if r.id != "p3" || r.sample != 0 { // p3's sample 0 names no samples
					x.Samples = 3
				}
			}
			if _, err := tx.Add("ds", r.stage, &x); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkUnits(t *testing.T, db *DB, when string) {
	t.Helper()
	db.View(func(v *View) error {
		if got, want := recountUnits(t, v); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the counters say\n%+v\nthe records\n%+v", when, got, want)
		}
		return nil
	})
}

// TestUpgradeFromVersion4: a version 4 file (no sampled record) is read as
// it is, and a read-write Open raises its version to 5 without changing a
// counter, so that a gendex of version 4, which would key a sample's
// answer by its prompt and drop the unit counters, refuses it; the file
// then takes sampled answers, counted as units.
func TestUpgradeFromVersion4(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gendex.db")
	db, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	addAll(t, db, []rec{{Prompts, "a", 1, 1, 1}, {Raw, "a", 1, 1, 1}, {Prompts, "b", 1, 1, 1}})
	before := state(t, db, "ds")
	if err := db.bolt.Update(func(btx *bolt.Tx) error { return btx.Bucket(bucketMeta).Put(keyVersion, []byte{4}) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a version 4 file: %v", err)
	}
	if got := state(t, ro, "ds"); got != before {
		t.Errorf("read-only, version 4:\n%s\nwant\n%s", got, before)
	}
	ro.Close()
	if db, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.bolt.View(func(btx *bolt.Tx) error {
		if v := btx.Bucket(bucketMeta).Get(keyVersion); !bytes.Equal(v, []byte{5}) {
			t.Errorf("version %v after a read-write open; want [5]", v)
		}
		return nil
	})
	if got := state(t, db, "ds"); got != before {
		t.Errorf("after the upgrade:\n%s\nwant\n%s", got, before)
	}
	addUnits(t, db, []unitRec{{Raw, "b", 1, 2}, {Raw, "b", 0, 2}})
	checkUnits(t, db, "sampled answers after the upgrade")
}

// TestUnitName: a message names a plain id as %q does, and a unit's key
// (a turn's too) by its id and sample, without UnitSep.
func TestUnitName(t *testing.T) {
	for key, want := range map[string]string{
		"q-1":                    `"q-1"`,
		"q-1#2":                  `"q-1#2"`,
		UnitID("q-1", 2):         `"q-1" sample 2`,
		UnitID("q-1", 12) + "#3": `"q-1#3" sample 12`,
	} {
		if got := UnitName(key); got != want {
			t.Errorf("UnitName(%q) = %s; want %s", key, got, want)
		}
	}
}
