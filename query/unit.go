package query

import (
	"strings"

	"gendex/store"
)

// A dataset of several samples per prompt (gen --samples) keys each
// answer by its unit (store.UnitID: the prompt's id, NUL, the sample).
// The questions never show that key: they name a unit as query missing
// does, by its id and a sample column, and take it back the same way
// (list --after ID --after-sample S, show ID --sample S). A turn's key is
// its unit's with "#i" after it; its id is shown as ID#i.

// sampledStage reports whether the records of stage st of dataset name
// are named by id and sample: the dataset has several samples per prompt
// and st is an answer stage (prompts are keyed by their id alone).
func sampledStage(v *store.View, name string, st store.Stage) (bool, error) {
	if st == store.Prompts {
		return false, nil
	}
	s, err := v.Summary(name)
	return s.Samples() > 1, err
}

// unitOf is the id and sample a record of stage st is keyed by (key): the
// prompt's id (a turn's with its "#i") and the sample.
func unitOf(st store.Stage, key string) (id string, sample int) {
	turn := ""
	if st == store.Turns {
		if i := strings.LastIndexByte(key, '#'); i >= 0 {
			key, turn = key[:i], key[i:]
		}
	}
	id, sample = store.SplitUnit(key)
	return id + turn, sample
}

// unitKey is unitOf undone: the key of sample s of id in stage st (id
// itself for sample 0, and for the prompts stage).
func unitKey(st store.Stage, id string, s int) string {
	if s <= 0 || st == store.Prompts {
		return id
	}
	turn := ""
	if st == store.Turns {
		if i := strings.LastIndexByte(id, '#'); i >= 0 {
			id, turn = id[:i], id[i:]
		}
	}
	return store.UnitID(id, s) + turn
}
