package store

import (
	"reflect"
	"strings"
	"testing"
)

// TestDropDataset: dropping a dataset removes its records, counters and
// file states and nothing of another dataset; its files are then new to
// the index, and the dataset can be built again from them.
func TestDropDataset(t *testing.T) {
	db := newDB(t)
	fill := func(ds, dir string) {
		t.Helper()
		err := db.Update(func(tx *Tx) error {
			for i, st := range []Stage{Prompts, Raw} {
				fs := FileState{Path: dir + "/" + st.String() + ".jsonl", Dataset: ds, Stage: st}
				if err := tx.PutFile(&fs); err != nil {
					return err
				}
				for _, id := range []string{"a", "b", "c"} {
					r := Record{ID: id, File: fs.ID, Line: int64(i + 1), CompletionTokens: 7, PromptTokens: 3, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: 5000, Finish: "length"}
					if _, err := tx.Add(ds, st, &r); err != nil {
						return err
					}
				}
				fs.Records, fs.Offset, fs.Lines = 3, 30, 3
				fs.Makers = AddMaker(nil, "m", true, nil, 3)
				if err := tx.PutFile(&fs); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	fill("keep", "/k")
	fill("gone", "/g")
	want := state(t, db, "keep")
	var dropped []FileState
	if err := db.Update(func(tx *Tx) (err error) { dropped, err = tx.DropDataset("gone"); return err }); err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 2 {
		t.Errorf("dropped %d files, want 2", len(dropped))
	}
	if got := state(t, db, "keep"); got != want {
		t.Errorf("another dataset changed:\n got %s\nwant %s", got, want)
	}
	db.View(func(v *View) error {
		if v.HasDataset("gone") {
			t.Error("the dropped dataset is still listed")
		}
		if _, ok, _ := v.File("/g/raw.jsonl"); ok {
			t.Error("a dropped dataset's file state is still stored")
		}
		if fs, ok, _ := v.File("/k/raw.jsonl"); !ok || fs.Records != 3 || len(fs.Makers) != 1 || !reflect.DeepEqual(fs.Makers[0], Maker{Model: "m", Simulated: true, Lines: 3}) {
			t.Errorf("the kept file's state: %+v, %v", fs, ok)
		}
		for _, d := range v.Datasets() {
			if d == "gone" {
				t.Error("Datasets lists the dropped one")
			}
		}
		return nil
	})
	fill("gone", "/g") // built again from the same files
	if got, again := state(t, db, "gone"), strings.Replace(state(t, db, "keep"), "Dataset:keep", "Dataset:gone", 1); got != again {
		t.Errorf("rebuilt dataset differs from an identical one:\n got %s\nwant %s", got, again)
	}
}

func TestAddMaker(t *testing.T) {
	var ms []Maker
	ms = AddMaker(ms, "a", false, nil, 2)
	ms = AddMaker(ms, "a", true, nil, 1)
	ms = AddMaker(ms, "a", false, nil, 3)
	ms = AddMaker(ms, "a", false, []byte(`{"t":1}`), 4)
	ms = AddMaker(ms, "a", false, []byte(`{"t":1}`), 1)
	if len(ms) != 3 || ms[0].Lines != 5 || ms[1].Lines != 1 || !ms[1].Simulated || ms[2].Lines != 5 {
		t.Errorf("got %+v", ms)
	}
}
