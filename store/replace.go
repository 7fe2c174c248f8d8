package store

import "fmt"

// A redo (gen --redo) appends a new answer for an id that says, in its
// own line, that it replaces the earlier one. The index then counts the
// newest answer and nothing of the one it replaced, and remembers that a
// record or exclusion built from the replaced answer is stale: export
// takes it out of its file before it makes the new answer's.
//
//	datasets/<name>/stale/   id -> empty: ids whose record or exclusion was built from a replaced answer

var bucketStale = []byte("stale")

// Replace puts r in place of the record the stage holds for r.ID, when it
// holds one: the counters lose the old record and gain r, r is listed
// under r.File in the per-file key index, the stage's Replaced counter
// goes up, and, for an answer (stage Raw), the id is no longer being asked
// again (Tx.SetAsking) and, when it has a record or an exclusion made
// before r (owed.go), it is marked stale. The replaced record's file, when it
// is another than r.File, counts it in its stored FileState.Replaced and
// holds one record less; the caller, which stores r.File's state after,
// counts FileState.Replacing there (and Replaced, when the old record is
// of the same file; else one record more), and the answers of the makers
// (FileState.CountAnswer). The replaced record's own file, when another,
// loses its answer from its maker's. It returns the record
// replaced, or nil, changing nothing, when the stage holds none (the caller
// then calls Add). r is checked and cleaned as Add does.
func (tx *Tx) Replace(dataset string, stage Stage, r *Record) (old *Record, err error) {
	d, err := tx.prepare("replace", dataset, stage, r)
	if err != nil {
		return nil, err
	}
	if old, err = d.stored(stage, r.ID); old == nil || err != nil {
		return nil, err
	}
	id := []byte(r.ID)
	if r.Time == 0 {
		r.Time = tx.now
		r.OwnTime = false
	}
	if err := d.stages[stage].Put(id, tx.alloc(r)); err != nil {
		return nil, fmt.Errorf("dataset %q: %w", dataset, err)
	}
	d.added[r.File] = appendChunkEntry(d.added[r.File], stage, id)
	d.count(stage, old, -1)
	d.count(stage, r, 1)
	d.sum.Stages[stage].Replaced++
	if old.File != r.File {
		if err := tx.bumpFile(old.File, func(fs *FileState) { fs.Replaced++; fs.Records--; fs.countMaker(old.Maker, -1) }); err != nil {
			return nil, err
		}
	}
	if stage != Raw {
		return old, nil
	}
	if err := d.unask(id); err != nil {
		return nil, err
	}
	if known, err := d.judgeFrom(id, r.Sum); err != nil || known {
		return old, err
	}
	for _, s := range []Stage{Tokenized, Excluded} {
		if stale, err := d.staleBefore(s, r.ID, r.Time); err != nil {
			return nil, err
		} else if stale {
			return old, d.markStale(id, d.membership(id, Raw)|1<<Raw)
		}
	}
	return old, nil
}

// bumpFile changes the stored state of the file with id file, when the
// index holds one.
func (tx *Tx) bumpFile(file uint32, fn func(*FileState)) error {
	path, ok := tx.FilePath(file)
	if !ok {
		return nil
	}
	fs, ok, err := getFile(tx.btx, path)
	if err != nil || !ok || fs.ID != file {
		return err
	}
	fn(&fs)
	return tx.putState(&fs)
}

// Stale calls fn with each id of dataset whose record or exclusion was
// built from an answer replaced since, in id order.
func (v *View) Stale(dataset string, fn func(id string) error) error {
	b := v.datasetBucket(dataset)
	if b == nil {
		return nil
	}
	sb := b.Bucket(bucketStale)
	if sb == nil {
		return nil
	}
	return sb.ForEach(func(k, _ []byte) error { return fn(string(k)) })
}

// ClearStale says that ids no longer have a record or exclusion built
// from a replaced answer (export took them out of its files).
func (tx *Tx) ClearStale(dataset string, ids []string) error {
	d, err := tx.dataset(dataset)
	if err != nil {
		return err
	}
	if d.staleB == nil {
		return nil
	}
	for _, id := range ids {
		k := []byte(id)
		if d.staleB.Get(k) == nil {
			continue
		}
		if staleOf(d.membership(k, Raw)|d.membership(k, Tokenized)) && d.sum.Pending.Stale > 0 {
			d.sum.Pending.Stale--
		}
		if err := d.staleB.Delete(k); err != nil {
			return err
		}
	}
	if k, _ := d.staleB.Cursor().First(); k == nil {
		d.staleB = nil // none left: Add and remove look no more
		return d.bucket.DeleteBucket(bucketStale)
	}
	return nil
}
