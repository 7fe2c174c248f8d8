package store

import "fmt"

// DropDataset removes dataset name from the index in this transaction: its
// records, counters and histograms, and the stored state of every file
// read into it (so a later run reads such a file again from its first
// byte, as a file never seen). The files themselves are not touched. It
// returns the states of the files it removed; dropping a dataset the index
// does not hold removes nothing.
func (tx *Tx) DropDataset(name string) ([]FileState, error) {
	delete(tx.sets, name)
	var dropped []FileState
	err := (&View{btx: tx.btx}).Files(func(fs FileState) error {
		if fs.Dataset == name { // a file being forgotten keeps its dataset
			dropped = append(dropped, fs)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	files, ids := tx.btx.Bucket(bucketFiles), tx.btx.Bucket(bucketFileIDs)
	for _, fs := range dropped {
		key := []byte(fs.Path)
		for _, b := range [...][]byte{bucketForgetting, bucketReread} {
			if err := tx.btx.Bucket(b).Delete(key); err != nil {
				return nil, err
			}
		}
		for _, id := range [...]uint32{fs.ID, forgetID(fs)} {
			if id != 0 {
				if err := ids.Delete(u32key(id)); err != nil {
					return nil, err
				}
			}
		}
		if err := files.Delete(key); err != nil {
			return nil, err
		}
	}
	sets := tx.btx.Bucket(bucketDatasets)
	if sets.Bucket([]byte(name)) != nil {
		if err := sets.DeleteBucket([]byte(name)); err != nil {
			return nil, fmt.Errorf("dataset %q: %w", name, err)
		}
	}
	return dropped, nil
}

func forgetID(fs FileState) uint32 {
	if fs.Forget == nil {
		return 0
	}
	return fs.Forget.ID
}
