package store

import (
	"encoding/json"
	"fmt"
)

// A redo of a list of ids (gen --redo FILE) is held in each dataset it
// asks answers of again, from its first start:
//
//	datasets/<name>/redo_mark  -> {"list": digest of the list's ids, "tag": the redo's tag}
//
// Every answer line the redo writes carries its tag, so an id of the list
// is done when its newest line carries it: a redo started again with the
// same list (a resume) skips what it did, whatever the list's timestamps;
// another list is another redo, with a tag of its own.

var keyRedoMark = []byte("redo_mark")

// RedoMark is the redo of a list of ids a dataset holds.
type RedoMark struct {
	// List is a digest of the list's ids: the same ids, the same redo.
	List string `json:"list"`
	// Tag is written in every answer line of the redo ("redo_tag").
	Tag string `json:"tag"`
}

// SetRedoMark holds m as dataset's redo of a list, in place of any
// earlier one.
func (tx *Tx) SetRedoMark(dataset string, m RedoMark) error {
	d, err := tx.dataset(dataset)
	if err != nil {
		return err
	}
	v, err := json.Marshal(m)
	if err != nil {
		return err
	}
	if err := d.bucket.Put(keyRedoMark, v); err != nil {
		return fmt.Errorf("dataset %q: %w", dataset, err)
	}
	return nil
}

// RedoMark returns the redo of a list dataset holds (ok false: none).
func (v *View) RedoMark(dataset string) (m RedoMark, ok bool, err error) {
	b := v.datasetBucket(dataset)
	if b == nil {
		return m, false, nil
	}
	val := b.Get(keyRedoMark)
	if val == nil {
		return m, false, nil
	}
	if err := json.Unmarshal(val, &m); err != nil {
		return m, false, fmt.Errorf("dataset %q: reading its redo mark: %w", dataset, err)
	}
	return m, true, nil
}
