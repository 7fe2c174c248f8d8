package store

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

func rawRec(id string, file uint32, tok int64) Record {
	return Record{ID: id, File: file, CompletionTokens: tok, PromptTokens: 1, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: 5000, Finish: "stop"}
}

// TestAddRefusesUnstorable: a record Add cannot store is refused with
// ErrUnstorable, changes nothing, and the transaction commits the others;
// forgetting their file afterwards leaves every counter at zero.
func TestAddRefusesUnstorable(t *testing.T) {
	db := newDB(t)
	bad := []Record{
		rawRec(strings.Repeat("k", MaxIDLen+1), 1, 3),
		rawRec("", 1, 3),
		rawRec("huge", 1, MaxTokens+1),
		{ID: "neg", File: 1, CompletionTokens: -7, PromptTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown},
		{ID: "before1970", File: 1, Time: -5, CompletionTokens: 1, PromptTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown},
	}
	fs := FileState{Path: "/a", Dataset: "ds", Stage: Raw}
	err := db.Update(func(tx *Tx) error {
		if err := tx.PutFile(&fs); err != nil {
			return err
		}
		good := rawRec("a", fs.ID, 4)
		if _, err := tx.Add("ds", Raw, &good); err != nil {
			return err
		}
		for _, r := range bad {
			if _, err := tx.Add("ds", Raw, &r); !errors.Is(err, ErrUnstorable) {
				t.Errorf("Add(id %.20q...): %v; want ErrUnstorable", r.ID, err)
			}
		}
		for _, stage := range []Stage{Prompts, Tokenized, Errors} {
			r := rawRec(strings.Repeat("k", MaxIDLen+1), fs.ID, 3)
			if _, err := tx.Add("ds", stage, &r); !errors.Is(err, ErrUnstorable) {
				t.Errorf("Add(%s, long id): %v; want ErrUnstorable", stage, err)
			}
		}
		atLimit := rawRec(strings.Repeat("m", MaxIDLen), fs.ID, 5)
		_, err := tx.Add("ds", Raw, &atLimit)
		return err
	})
	if err != nil {
		t.Fatalf("the transaction failed: %v", err)
	}
	err = db.View(func(v *View) error {
		s, _ := v.Summary("ds")
		if st := s.Stages[Raw]; st.Records != 2 || st.CompletionTokens != 9 || st.Finish["stop"] != 2 {
			t.Errorf("raw counters %+v; want the two good records", st)
		}
		for _, stage := range []Stage{Prompts, Tokenized, Errors} {
			if s.Stages[stage].Records != 0 {
				t.Errorf("%s holds %d records", stage, s.Stages[stage].Records)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	forgetAll(t, db, "/a")
	if got, want := state(t, db, "ds"), state(t, newDBWithDataset(t), "ds"); got != want {
		t.Errorf("after forgetting the file:\n got %s\nwant %s", got, want)
	}
}

func forgetAll(t *testing.T, db *DB, path string) {
	t.Helper()
	err := db.Update(func(tx *Tx) error {
		fs, _, err := tx.File(path)
		if err != nil {
			return err
		}
		_, err = tx.ForgetFile(&fs)
		return err
	})
	if err == nil {
		err = db.FinishForgets(context.Background(), 0, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// newDBWithDataset is an index whose dataset "ds" exists and is empty.
// TestMessageCutAtCharacter: a long error message is stored shortened,
// still valid UTF-8.
func TestMessageCutAtCharacter(t *testing.T) {
	db := newDB(t)
	err := db.Update(func(tx *Tx) error {
		r := rawRec("m", 1, 1)
		r.Message = strings.Repeat("€", 1000)
		_, err := tx.Add("ds", Errors, &r)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(v *View) error {
		r, _, _ := v.Get("ds", Errors, "m")
		if len(r.Message) > maxMessage || len(r.Message) < maxMessage-3 || !utf8.ValidString(r.Message) {
			t.Errorf("message stored as %d bytes, valid UTF-8 %v", len(r.Message), utf8.ValidString(r.Message))
		}
		return nil
	})
}

func newDBWithDataset(t *testing.T) *DB {
	db := newDB(t)
	if err := db.Update(func(tx *Tx) error { _, err := tx.dataset("ds"); return err }); err != nil {
		t.Fatal(err)
	}
	return db
}

// TestFinishCountedAsStored: a finish reason with invalid UTF-8, or far
// longer than any real one, is stored as it is counted, so that the
// counters read back from disk are exact when the record is removed.
func TestFinishCountedAsStored(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gendex.db")
	db, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	fs := FileState{Path: "/a", Dataset: "ds", Stage: Raw}
	err = db.Update(func(tx *Tx) error {
		if err := tx.PutFile(&fs); err != nil {
			return err
		}
		for i, f := range []string{"st\xffop", strings.Repeat("é", 1000), "length"} {
			r := rawRec(string(rune('a'+i)), fs.ID, 1)
			r.Finish = f
			if _, err := tx.Add("ds", Raw, &r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if db, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.View(func(v *View) error {
		s, _ := v.Summary("ds")
		for k := range s.Stages[Raw].Finish {
			if len(k) > MaxFinish {
				t.Errorf("a finish reason of %d bytes is counted", len(k))
			}
		}
		return nil
	})
	db.View(func(v *View) error {
		r, _, _ := v.Get("ds", Raw, "b")
		if len(r.Finish) > MaxFinish || !utf8.ValidString(r.Finish) {
			t.Errorf("finish stored as %q", r.Finish)
		}
		return nil
	})
	forgetAll(t, db, "/a")
	db.View(func(v *View) error {
		s, _ := v.Summary("ds")
		if len(s.Stages[Raw].Finish) != 0 || s.Stages[Raw].Records != 0 {
			t.Errorf("after removing every record: %+v", s.Stages[Raw])
		}
		return nil
	})
}

// TestSkippedCounterUpgrade: an index written before Stats.Skipped has its
// counters summed from the file states: on the fly when opened read-only,
// and stored when opened read-write; then they follow PutFile and
// ForgetFile.
func TestSkippedCounterUpgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	db, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *Tx) error {
		for _, fs := range []FileState{{Path: "/r", Dataset: "ds", Stage: Raw, Skipped: 3}, {Path: "/p", Dataset: "ds", Stage: Prompts, Skipped: 2}, {Path: "/o", Dataset: "other", Stage: Raw, Skipped: 7}} {
			if err := tx.PutFile(&fs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	skipped := func(db *DB) (n [numStages]uint64) {
		t.Helper()
		db.View(func(v *View) error {
			s, err := v.Summary("ds")
			if err != nil {
				t.Fatal(err)
			}
			for st := range n {
				n[st] = s.Stages[st].Skipped
			}
			return nil
		})
		return n
	}
	if got := skipped(db); got != [numStages]uint64{2, 3, 0, 0} {
		t.Fatalf("skipped %v after PutFile", got)
	}
	// Make it what version 2 wrote: no skipped counters.
	err = db.Update(func(tx *Tx) error {
		for _, name := range []string{"ds", "other"} {
			d, err := tx.dataset(name)
			if err != nil {
				return err
			}
			for st := range d.sum.Stages {
				d.sum.Stages[st].Skipped = 0
			}
		}
		return nil
	})
	if err == nil {
		err = db.bolt.Update(func(btx *bolt.Tx) error { return btx.Bucket(bucketMeta).Put(keyVersion, []byte{2}) })
	}
	if err != nil {
		t.Fatal(err)
	}
	db.Close()

	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := skipped(ro); got != [numStages]uint64{2, 3, 0, 0} {
		t.Errorf("read-only open of a version 2 file: skipped %v", got)
	}
	ro.Close()

	if db, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.bolt.View(func(btx *bolt.Tx) error {
		if v := btx.Bucket(bucketMeta).Get(keyVersion); len(v) != 1 || v[0] != SchemaVersion {
			t.Errorf("version %v after a read-write open", v)
		}
		return nil
	})
	if got := skipped(db); got != [numStages]uint64{2, 3, 0, 0} {
		t.Errorf("after the upgrade: skipped %v", got)
	}
	forgetAll(t, db, "/r")
	if got := skipped(db); got != [numStages]uint64{2, 0, 0, 0} {
		t.Errorf("after forgetting /r: skipped %v", got)
	}
	err = db.Update(func(tx *Tx) error {
		fs, _, err := tx.File("/r")
		if err != nil {
			return err
		}
		fs.Skipped = 1
		return tx.PutFile(&fs)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := skipped(db); got != [numStages]uint64{2, 1, 0, 0} {
		t.Errorf("after reading /r again: skipped %v", got)
	}
}
