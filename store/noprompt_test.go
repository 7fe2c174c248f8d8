package store

import (
	"encoding/json"
	"testing"
)

// TestNoPromptCounted: Overlap.RawNoPrompt counts the answers whose id
// matches no prompt as prompts and answers come and go; a file whose
// counters were written before it was kept says it unknown (never 0)
// until its dataset's next write counts it.
func TestNoPromptCounted(t *testing.T) {
	db := newDB(t)
	noPrompt := func(what string, want uint64, known bool) {
		t.Helper()
		db.View(func(v *View) error {
			s, _ := v.Summary("ds")
			if n, ok := s.NoPrompt(); n != want || ok != known {
				t.Errorf("%s: no_prompt %d (known %v); want %d (known %v)", what, n, ok, want, known)
			}
			return nil
		})
	}
	addAll(t, db, []rec{{Raw, "a", 1, 1, 1}, {Raw, "b", 1, 1, 1}, {Raw, "c", 1, 1, 1}})
	checkOverlap(t, db, "ds", "answers alone")
	noPrompt("answers alone", 3, true)
	addAll(t, db, []rec{{Prompts, "a", 2, 1, 1}, {Prompts, "b", 2, 1, 1}, {Prompts, "z", 2, 1, 1}})
	checkOverlap(t, db, "ds", "prompts a, b, z")
	noPrompt("prompts a, b, z", 1, true)

	// As an older gendex left the counters: without the two keys.
	err := db.Update(func(tx *Tx) error {
		b := tx.btx.Bucket(bucketDatasets).Bucket([]byte("ds"))
		var m map[string]json.RawMessage
		json.Unmarshal(b.Get(keyStats), &m)
		var o map[string]json.RawMessage
		json.Unmarshal(m["overlap"], &o)
		delete(o, "raw_no_prompt")
		delete(o, "no_prompt_known")
		m["overlap"], _ = json.Marshal(o)
		v, _ := json.Marshal(m)
		return b.Put(keyStats, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	noPrompt("counters of an older gendex", 0, false)
	addAll(t, db, []rec{{Raw, "d", 1, 1, 1}})
	checkOverlap(t, db, "ds", "the next write")
	noPrompt("the next write", 2, true)
}
