package query_test

import (
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/store"
)

// TestRedoChoosingIsUnknown: while a redo is still finding the answers it
// asks again (gen --redo truncated on a large set, or one stopped before
// its feeder read every prompt: store.Pending.Choosing), progress's redo
// and done_pct are unknown, and so is what is to go (query.ToGo), in the
// dataset's row and the total; check blocks on it without a count. Once
// the redo has read every prompt, each is its count again.
func TestRedoChoosingIsUnknown(t *testing.T) {
	root, _ := exportDataset(t)
	db, _ := ingesttest.Index(t, root)
	update := func(fn func(tx *store.Tx) error) {
		t.Helper()
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
	}
	update(func(tx *store.Tx) error {
		if _, err := tx.StartAsking("ds"); err != nil {
			return err
		}
		_, err := tx.AddAsking("ds", []string{"p1", "p2"})
		return err
	})
	prog := answer(t, db, time.Now(), "progress", "ds")
	row := prog.Rows[0]
	for _, col := range []string{"redo", "done_pct"} {
		if v := prog.Get(row, col); v != nil {
			t.Errorf("choosing: %s is %v; want unknown", col, v)
		}
		if v := prog.Get(prog.Total, col); v != nil {
			t.Errorf("choosing: the total's %s is %v; want unknown", col, v)
		}
	}
	if _, ok := query.ToGo(prog, row); ok {
		t.Error("choosing: to go is known")
	}
	chk := answer(t, db, time.Now(), "check", "ds")
	found := false
	for _, r := range chk.Rows {
		if chk.Get(r, "reason") == query.ReasonRedo {
			found = true
			if chk.Get(r, "count") != nil || chk.Get(r, "blocks") != true || !strings.Contains(chk.Get(r, "detail").(string), "2 found") {
				t.Errorf("choosing: check's redo row %v", r)
			}
		}
	}
	if !found {
		t.Errorf("choosing: check does not block on the redo: %v", chk.Rows)
	}

	update(func(tx *store.Tx) error { return tx.ChoseAsking("ds") })
	prog = answer(t, db, time.Now(), "progress", "ds")
	row = prog.Rows[0]
	if r, _ := query.AsFloat(prog.Get(row, "redo")); r != 2 || prog.Get(row, "done_pct") == nil {
		t.Errorf("chosen: redo %v, done_pct %v; want 2 and a share", prog.Get(row, "redo"), prog.Get(row, "done_pct"))
	}
	if _, ok := query.ToGo(prog, row); !ok {
		t.Error("chosen: to go is not known")
	}
}
