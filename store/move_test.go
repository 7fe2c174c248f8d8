package store

import "testing"

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
