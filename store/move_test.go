package store

import (
	"fmt"
	"testing"
)

// TestMoveFile: a moved file keeps its id, offsets and records; its id
// names the new path; the old path is free, and a move onto a path the
// index holds is refused with nothing changed.
func TestMoveFile(t *testing.T) {
	db := newDB(t)
	err := db.Update(func(tx *Tx) error {
		for _, p := range []string{"/a/ds/raw_responses.jsonl", "/b/ds/raw_responses.jsonl"} {
			fs := FileState{Path: p, Dataset: "ds", Stage: Raw, Offset: 10, Lines: 2, Records: 2}
			if err := tx.PutFile(&fs); err != nil {
				return err
			}
		}
		if err := tx.MarkRead("/a/ds/raw_responses.jsonl"); err != nil {
			return err
		}
		return tx.btx.Bucket(bucketReread).Put([]byte("/a/ds/raw_responses.jsonl"), []byte{})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *Tx) error {
		_, err := tx.MoveFile("/a/ds/raw_responses.jsonl", "/b/ds/raw_responses.jsonl", nil)
		return err
	}); err == nil {
		t.Fatal("a move onto a held path was not refused")
	}
	err = db.Update(func(tx *Tx) error {
		_, err := tx.MoveFile("/a/ds/raw_responses.jsonl", "/c/ds/raw_responses.jsonl", &FileIdentity{Size: 10, Ino: 7})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(v *View) error {
		if _, ok, _ := v.File("/a/ds/raw_responses.jsonl"); ok {
			t.Error("the old path is still held")
		}
		fs, ok, err := v.File("/c/ds/raw_responses.jsonl")
		if err != nil || !ok {
			t.Fatalf("the new path: %v %v", ok, err)
		}
		if fs.ID != 1 || fs.Offset != 10 || fs.Lines != 2 || fs.Records != 2 || fs.Ino != 7 || fs.Size != 10 {
			t.Errorf("moved state: %+v", fs)
		}
		if p, _ := v.FilePath(fs.ID); p != "/c/ds/raw_responses.jsonl" {
			t.Errorf("file id %d names %q", fs.ID, p)
		}
		if !v.IsUnread("/c/ds/raw_responses.jsonl") || v.IsUnread("/a/ds/raw_responses.jsonl") {
			t.Error("the unread mark did not move with the file")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReplaceThenForget: an answer replaced by another file's (a redo) is
// counted once, by the newest; forgetting the replacing file forgets the
// replaced one's file too (it repeats the id), so nothing of either stays
// counted, and the id's record, stale, is marked so.
func TestReplaceThenForget(t *testing.T) {
	db := newDB(t)
	files := []string{"/d/ds/raw_responses.jsonl", "/d/ds/raw_responses.redo.jsonl"}
	err := db.Update(func(tx *Tx) error {
		for i, p := range files {
			fs := FileState{Path: p, Dataset: "ds", Stage: Raw}
			if err := tx.PutFile(&fs); err != nil {
				return err
			}
			r := Record{ID: "a", CompletionTokens: int64(10 * (i + 1)), PromptTokens: 1, Finish: []string{"length", "stop"}[i], Time: 1000, File: fs.ID}
			if i == 0 {
				if _, err := tx.Add("ds", Raw, &r); err != nil {
					return err
				}
				ex := Record{ID: "a", CompletionTokens: Unknown, PromptTokens: Unknown, File: fs.ID, Time: 1000}
				if _, err := tx.Add("ds", Excluded, &ex); err != nil {
					return err
				}
				fs.Records = 1
			} else {
				old, err := tx.Replace("ds", Raw, &r)
				if err != nil || old == nil || old.CompletionTokens != 10 {
					return fmt.Errorf("replace: %v %v", old, err)
				}
				fs.Replacing, fs.Records = 1, 1
			}
			if err := tx.PutFile(&fs); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(when string, records, tokens, replaced uint64, stale int) {
		t.Helper()
		db.View(func(v *View) error {
			s, _ := v.Summary("ds")
			raw := s.Stage(Raw)
			if raw.Records != records || raw.CompletionTokens != tokens || raw.Replaced != replaced || raw.Finish["length"] != 0 {
				t.Errorf("%s: raw %+v; want %d records, %d tokens, %d replaced, none cut", when, raw, records, tokens, replaced)
			}
			n := 0
			v.Stale("ds", func(string) error { n++; return nil })
			if n != stale {
				t.Errorf("%s: %d stale ids, want %d", when, n, stale)
			}
			return nil
		})
	}
	check("replaced", 1, 20, 1, 1)
	db.View(func(v *View) error {
		if fs, _, _ := v.File(files[0]); fs.Replaced != 1 || fs.Records != 0 {
			t.Errorf("the replaced answer's file: %+v", fs)
		}
		return nil
	})
	if err := forgetPath(db, files[1]); err != nil {
		t.Fatal(err)
	}
	if err := db.FinishForgets(t.Context(), 10, nil); err != nil {
		t.Fatal(err)
	}
	check("the replacing file forgotten", 0, 0, 0, 1)
}
