package store

import (
	"encoding/json"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestFailedCountsPrompts: Overlap.Failed counts the prompts with a final
// error and no answer, never an error whose prompt is not indexed, so
// Answers() + Failed + MissingRaw() is the prompts, and Owed's Answered +
// Failed + ToGo too. A summary written before the counter (no "failed"
// key) is recounted when read, and kept so by the next write.
func TestFailedCountsPrompts(t *testing.T) {
	db := newDB(t)
	addAll(t, db, []rec{{Prompts, "a", 1, 1, 1}, {Prompts, "b", 1, 1, 1}, {Prompts, "c", 1, 1, 1}, {Prompts, "d", 1, 1, 1},
		{Raw, "a", 2, 1, 1}, {Errors, "b", 3, 1, 1}, {Errors, "gone", 3, 1, 1}, {Errors, "a", 3, 1, 1}})
	want := func(when string, answers, failed uint64) {
		t.Helper()
		o := checkOverlap(t, db, "ds", when)
		db.View(func(v *View) error {
			s, _ := v.Summary("ds")
			owed := s.Owed()
			if s.Answers() != answers || o.Failed != failed || owed.Answered+owed.Failed+owed.ToGo() != s.Stage(Prompts).Records {
				t.Errorf("%s: %d answers, %d failed, owed %+v of %d prompts; want %d answers, %d failed", when, s.Answers(), o.Failed, owed, s.Stage(Prompts).Records, answers, failed)
			}
			return nil
		})
	}
	want("a answered, b failed, an error without a prompt", 1, 1)

	// The counters as a gendex before Failed wrote them.
	err := db.bolt.Update(func(btx *bolt.Tx) error {
		b := btx.Bucket(bucketDatasets).Bucket([]byte("ds"))
		var m map[string]any
		if err := json.Unmarshal(b.Get(keyStats), &m); err != nil {
			return err
		}
		delete(m["overlap"].(map[string]any), "failed")
		old, _ := json.Marshal(m)
		return b.Put(keyStats, old)
	})
	if err != nil {
		t.Fatal(err)
	}
	want("read from a summary without the counter", 1, 1)
	addAll(t, db, []rec{{Errors, "c", 3, 1, 1}})
	want("c failed, written after", 1, 2)
	addAll(t, db, []rec{{Raw, "b", 2, 1, 1}})
	want("b answered after its error", 2, 1)
}
