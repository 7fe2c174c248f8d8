package store

import (
	"fmt"
	"testing"
)

// TestAskedSamplesCountedBeforeAnswers: a dataset gen asks 3 samples per
// prompt of counts them before any answer names them (its Summary, for
// every reader: samples, the answers owed, the missing units); a run of
// one sample over it, still unanswered, clears that; answers that name
// their samples count as ever.
func TestAskedSamplesCountedBeforeAnswers(t *testing.T) {
	db := newDB(t)
	summary := func() Summary {
		t.Helper()
		var s Summary
		if err := db.View(func(v *View) (err error) { s, err = v.Summary("ds"); return err }); err != nil {
			t.Fatal(err)
		}
		return s
	}
	addUnits(t, db, []unitRec{{Prompts, "p0", -1, 1}, {Prompts, "p1", -1, 1}})
	update := func(fn func(tx *Tx) error) {
		t.Helper()
		if err := db.Update(fn); err != nil {
			t.Fatal(err)
		}
	}
	update(func(tx *Tx) error { return tx.AskSamples("ds", 3) })
	if s := summary(); s.Samples() != 3 || s.Units() != 6 || s.MissingRaw() != 6 {
		t.Errorf("asked 3: samples %d, units %d, missing %d; want 3, 6, 6", s.Samples(), s.Units(), s.MissingRaw())
	}
	var missing []string
	db.View(func(v *View) error {
		return v.Missing("ds", Prompts, func(id string) error {
			missing = append(missing, fmt.Sprintf("%q", id))
			return nil
		}, Raw, Errors)
	})
	if len(missing) != 6 {
		t.Errorf("missing %v; want each of 2 prompts' 3 samples", missing)
	}
	update(func(tx *Tx) error { return tx.AskSamples("ds", 1) })
	if s := summary(); s.Samples() != 1 || s.Units() != 2 {
		t.Errorf("asked 1 after 3: samples %d, units %d; want 1, 2", s.Samples(), s.Units())
	}
	addUnits(t, db, []unitRec{{Raw, "p0", 2, 2}}) // an answer of sample 2 of 3
	if s := summary(); s.Samples() != 3 || s.MissingRaw() != 5 {
		t.Errorf("an answer naming 3 samples: samples %d, missing %d; want 3, 5", s.Samples(), s.MissingRaw())
	}
}
