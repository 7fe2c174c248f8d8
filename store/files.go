package store

import (
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// FileState is what the index remembers of one input file, so that the next
// ingest reads only what was appended since, and notices a file that was
// truncated or replaced.
type FileState struct {
	Path    string `json:"path"`
	ID      uint32 `json:"id"`
	Dataset string `json:"dataset"`
	Stage   Stage  `json:"stage"`

	// Offset is the end of the last complete line indexed; Lines is how many
	// lines lie before it (so the next line is number Lines+1).
	Offset int64 `json:"offset"`
	Lines  int64 `json:"lines"`

	// Identity and size when last read.
	Size    int64  `json:"size"`
	ModTime int64  `json:"mtime_ns"`
	Dev     uint64 `json:"dev"`
	Ino     uint64 `json:"ino"`
	// HeadSum is a hash of the file's first HeadLen bytes.
	HeadLen int64  `json:"head_len"`
	HeadSum uint64 `json:"head_sum"`

	// What the file contributed, for reports and for forgetting it.
	Records    uint64 `json:"records"`
	Duplicates uint64 `json:"duplicates"`
	// ErrorDuplicates are duplicates among the error records a response
	// file holds (they are counted in the errors stage).
	ErrorDuplicates uint64 `json:"error_duplicates,omitempty"`
	Skipped         uint64 `json:"skipped"`
	Unknown         uint64 `json:"unknown_tokens"`
}

// File returns the stored state of path.
func (tx *Tx) File(path string) (FileState, bool, error) {
	return getFile(tx.btx, path)
}

// File returns the stored state of path.
func (v *View) File(path string) (FileState, bool, error) {
	return getFile(v.btx, path)
}

func getFile(btx *bolt.Tx, path string) (FileState, bool, error) {
	var fs FileState
	b := btx.Bucket(bucketFiles)
	if b == nil {
		return fs, false, nil
	}
	v := b.Get([]byte(path))
	if v == nil {
		return fs, false, nil
	}
	if err := json.Unmarshal(v, &fs); err != nil {
		return fs, false, fmt.Errorf("file state of %s: %w", path, err)
	}
	return fs, true, nil
}

// PutFile stores fs, giving it an id when it has none (a file seen for the
// first time, which is counted in its stage's Files).
func (tx *Tx) PutFile(fs *FileState) error {
	files := tx.btx.Bucket(bucketFiles)
	if fs.ID == 0 {
		seq, err := files.NextSequence()
		if err != nil {
			return err
		}
		fs.ID = uint32(seq)
		if err := tx.btx.Bucket(bucketFileIDs).Put(u32key(fs.ID), []byte(fs.Path)); err != nil {
			return err
		}
		d, err := tx.dataset(fs.Dataset)
		if err != nil {
			return err
		}
		d.sum.Stages[fs.Stage].Files++
	}
	v, err := json.Marshal(fs)
	if err != nil {
		return err
	}
	return files.Put([]byte(fs.Path), v)
}

// ForgetFile removes every record of fs from the index and its counters, and
// resets fs so the file can be read again from its first byte.
//
// A record removed this way may have been the first of an id that other
// files of the same dataset repeat (their lines were counted as duplicates,
// not indexed). So every such file, one that shares fs's stages and had
// duplicates, is forgotten too, and returned: the caller must index them
// again, or those ids would be lost.
func (tx *Tx) ForgetFile(fs *FileState) (removed int, siblings []FileState, err error) {
	if fs.ID == 0 {
		return 0, nil, nil
	}
	group := func(s Stage) bool {
		if fs.Stage == Raw || fs.Stage == Errors {
			return s == Raw || s == Errors
		}
		return s == fs.Stage
	}
	var others []FileState
	err = (&View{btx: tx.btx}).Files(func(o FileState) error {
		if o.Path != fs.Path && o.Dataset == fs.Dataset && group(o.Stage) && o.Duplicates+o.ErrorDuplicates > 0 {
			others = append(others, o)
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	n, err := tx.forget(fs)
	if err != nil {
		return 0, nil, err
	}
	removed += n
	for i := range others {
		n, err := tx.forget(&others[i])
		if err != nil {
			return 0, nil, err
		}
		removed += n
		if err := tx.PutFile(&others[i]); err != nil {
			return 0, nil, err
		}
	}
	return removed, others, nil
}

// forget removes fs's records and resets it (see ForgetFile). PutFile
// counts it again and gives it a new id.
func (tx *Tx) forget(fs *FileState) (removed int, err error) {
	removed, err = tx.RemoveFile(fs.Dataset, fs.Stage, fs.ID)
	if err != nil {
		return 0, err
	}
	// Error records read from a response file live in the errors stage.
	if fs.Stage == Raw {
		n, err := tx.RemoveFile(fs.Dataset, Errors, fs.ID)
		if err != nil {
			return 0, err
		}
		removed += n
		if err := tx.AdjustDuplicates(fs.Dataset, Errors, -int64(fs.ErrorDuplicates)); err != nil {
			return 0, err
		}
	}
	if err := tx.AdjustDuplicates(fs.Dataset, fs.Stage, -int64(fs.Duplicates)); err != nil {
		return 0, err
	}
	d, err := tx.dataset(fs.Dataset)
	if err != nil {
		return 0, err
	}
	d.sum.Stages[fs.Stage].Files--
	if err := tx.btx.Bucket(bucketFileIDs).Delete(u32key(fs.ID)); err != nil {
		return 0, err
	}
	*fs = FileState{Path: fs.Path, Dataset: fs.Dataset, Stage: fs.Stage}
	return removed, nil
}

// FilePath returns the path of file id.
func (v *View) FilePath(id uint32) (string, bool) {
	b := v.btx.Bucket(bucketFileIDs)
	if b == nil {
		return "", false
	}
	p := b.Get(u32key(id))
	if p == nil {
		return "", false
	}
	return string(p), true
}

// Files calls fn for every known file, in path order.
func (v *View) Files(fn func(FileState) error) error {
	b := v.btx.Bucket(bucketFiles)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, val []byte) error {
		var fs FileState
		if err := json.Unmarshal(val, &fs); err != nil {
			return fmt.Errorf("file state of %s: %w", k, err)
		}
		return fn(fs)
	})
}

// FilePath returns the path of file id.
func (tx *Tx) FilePath(id uint32) (string, bool) {
	return (&View{btx: tx.btx}).FilePath(id)
}
