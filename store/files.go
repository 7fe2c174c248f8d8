package store

import (
	"context"
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
	// IDPath is where the file's lines keep their id ("question_id",
	// "meta.uid"), as given to `ingest --id`; empty: the default rules. It
	// is stored with the records read under it and kept while the file is
	// forgotten, so every later read of the file uses it.
	IDPath string `json:"id_path,omitempty"`
	// Shard is "I/N" when only the prompts of that shard of the file are
	// indexed (a sharded gen's index), as given to ingest.Source.Shard.
	Shard string `json:"shard,omitempty"`

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
	// TailSum is a hash of the TailLen bytes that end at Offset (the last
	// indexed line, or its last bytes, with its newline), so that a file
	// rewritten in place under its offsets is told from one appended to.
	// An index written before it was kept has TailLen 0: unknown.
	TailLen int64  `json:"tail_len,omitempty"`
	TailSum uint64 `json:"tail_sum,omitempty"`

	// What the file contributed, for reports and for forgetting it.
	Records    uint64 `json:"records"`
	Duplicates uint64 `json:"duplicates"`
	// ErrorDuplicates are duplicates among the error records a response
	// file holds (they are counted in the errors stage).
	ErrorDuplicates uint64 `json:"error_duplicates,omitempty"`
	// Replaced counts the file's answers that a later answer of the same
	// id replaced (in this file or another), and Replacing the file's
	// answers that replaced one (see Tx.Replace).
	Replaced  uint64 `json:"replaced,omitempty"`
	Replacing uint64 `json:"replacing,omitempty"`
	Skipped   uint64 `json:"skipped"`
	Unknown   uint64 `json:"unknown_tokens"`
	// Makers counts a response file's answer lines by what made them (the
	// lines' "model" and "simulated"), for saying where a dataset's
	// answers come from and for keeping the simulator's apart. A file
	// indexed before this was kept has none: its makers are unknown.
	Makers []Maker `json:"makers,omitempty"`
	// MakerAnswers reports that each maker's Answers is kept: the file
	// was read from its first byte by an index that keeps them (see
	// FileState.MakerCount).
	MakerAnswers bool `json:"maker_answers,omitempty"`

	// Keyed reports that every record of the file is listed in its
	// dataset's per-file key index, so forgetting it touches only its own
	// records. Files first indexed by schema version 1 are not keyed:
	// forgetting one scans its stages instead, in bounded batches too.
	Keyed bool `json:"keyed,omitempty"`

	// Phase is where the file stands in its life in the index; see Phase.
	Phase Phase `json:"phase,omitempty"`
	// Forget says what is left to remove while Phase is Forgetting.
	Forget *Forgetting `json:"forget,omitempty"`
}

// Phase is the state of a file in the index. A file's life is
//
//	(unknown) --first commit--> PhaseReady, ID set
//	PhaseReady --ForgetFile--> PhaseForgetting, ID 0 --last removal batch--> PhaseReady, ID 0
//	PhaseReady, ID 0 --first commit--> PhaseReady, a new ID
//
// and every arrow is one transaction, so a crash leaves the file in one of
// these states, never between two. A state with ID 0 has nothing in the
// index and Offset 0: the file is read again from its first byte. While a
// file is PhaseForgetting no line of it may be read (PutFile refuses it), because
// its old records still hold the ids its lines would be counted against.
type Phase uint8

const (
	// PhaseReady: the index holds what lies before Offset, under ID.
	PhaseReady Phase = iota
	// PhaseForgetting: the records the file had under Forget.ID are being
	// removed, in batches; DB.FinishForgets resumes the removal.
	PhaseForgetting
)

func (p Phase) String() string {
	switch p {
	case PhaseReady:
		return "ready"
	case PhaseForgetting:
		return "forgetting"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Forgetting is the removal still to do for a file being forgotten. Its
// counters (Files, Duplicates) were already taken off when the removal
// began; each record is taken off the counters in the batch that deletes
// it, so the counters are exact after every commit.
type Forgetting struct {
	ID      uint32 `json:"id"`      // the id the records carry
	Dataset string `json:"dataset"` // where they are
	Stage   Stage  `json:"stage"`
	Keyed   bool   `json:"keyed"` // listed in the per-file key index
	// Where the removal stands in the file's key chunks.
	ChunkPos
	// The scan of an unkeyed file: which of its stages (index into
	// forgetStages), and the last id looked at there.
	ScanPass  int    `json:"scan_pass,omitempty"`
	ScanAfter []byte `json:"scan_after,omitempty"`
	Removed   uint64 `json:"removed"` // records removed so far
}

// forgetStages are the stages a file of stage s puts records in: a
// response file's error records live in the errors stage.
func forgetStages(s Stage) []Stage {
	if s == Raw {
		return []Stage{Raw, Errors}
	}
	return []Stage{s}
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
// first time, or read again after it was forgotten), which counts it in its
// stage's Files. It refuses a file whose old records are still being
// removed (stored Phase Forgetting) and a state that is not PhaseReady: only
// ForgetFile and FinishForgets move a file through Forgetting.
// The stage's Skipped counter moves by the change in fs.Skipped, so it
// stays the sum over the stored states.
func (tx *Tx) PutFile(fs *FileState) error {
	if fs.Phase != PhaseReady {
		return fmt.Errorf("file state of %s: PutFile stores only ready files (phase %s)", fs.Path, fs.Phase)
	}
	old, ok, err := getFile(tx.btx, fs.Path)
	if err != nil {
		return err
	}
	if ok && old.Phase == PhaseForgetting {
		return fmt.Errorf("%s: its old records are still being removed; index it again (the removal is finished first)", fs.Path)
	}
	if ok && old.Skipped > 0 {
		if err := tx.addSkipped(old.Dataset, old.Stage, -int64(old.Skipped)); err != nil {
			return err
		}
	}
	if fs.Skipped > 0 {
		if err := tx.addSkipped(fs.Dataset, fs.Stage, int64(fs.Skipped)); err != nil {
			return err
		}
	}
	if fs.ID == 0 {
		seq, err := tx.btx.Bucket(bucketFiles).NextSequence()
		if err != nil {
			return err
		}
		fs.ID = uint32(seq)
		fs.Keyed = true
		fs.MakerAnswers = true
		if err := tx.btx.Bucket(bucketFileIDs).Put(u32key(fs.ID), []byte(fs.Path)); err != nil {
			return err
		}
		d, err := tx.dataset(fs.Dataset)
		if err != nil {
			return err
		}
		d.sum.Stages[fs.Stage].Files++
	}
	return tx.putState(fs)
}

// addSkipped moves a stage's Skipped counter by delta.
func (tx *Tx) addSkipped(dataset string, stage Stage, delta int64) error {
	d, err := tx.dataset(dataset)
	if err != nil {
		return err
	}
	d.sum.Stages[stage].Skipped += uint64(delta) // wraps to subtract
	return nil
}

func (tx *Tx) putState(fs *FileState) error {
	v, err := json.Marshal(fs)
	if err != nil {
		return err
	}
	return tx.btx.Bucket(bucketFiles).Put([]byte(fs.Path), v)
}

// ForgetFile begins to forget fs, in this transaction: fs is stored reset
// (ID 0, Offset 0, no identity, so that it is read again from its first
// byte) in phase Forgetting, its Duplicates, Skipped and its place in Files
// are taken off the counters, and its records are left for DB.FinishForgets to remove
// in bounded batches. The caller must run FinishForgets after the commit and
// before reading any file of the dataset again; a crash in between is
// mended by the next FinishForgets.
//
// A record removed this way may have been the first of an id that other
// files of the same dataset repeat (their lines were counted as duplicates,
// not indexed). So every such file, one that shares fs's stages and had
// duplicates, is forgotten too, in the same transaction, and returned: the
// caller must index them again, or those ids would be lost. Every file
// forgotten stays listed by View.Unread until the caller says, with
// Tx.MarkRead, that it was read to its end, so a run that stops first
// leaves that work to the next one.
//
// fs must be the stored state; a file with ID 0 has nothing to forget.
func (tx *Tx) ForgetFile(fs *FileState) (siblings []FileState, err error) {
	if fs.ID == 0 {
		return nil, nil
	}
	group := func(s Stage) bool {
		if fs.Stage == Raw || fs.Stage == Errors {
			return s == Raw || s == Errors
		}
		return s == fs.Stage
	}
	err = (&View{btx: tx.btx}).Files(func(o FileState) error {
		if o.Path != fs.Path && o.Dataset == fs.Dataset && group(o.Stage) && o.ID != 0 && o.Duplicates+o.ErrorDuplicates+o.Replaced+o.Replacing > 0 {
			siblings = append(siblings, o)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := tx.beginForget(fs); err != nil {
		return nil, err
	}
	for i := range siblings {
		if err := tx.beginForget(&siblings[i]); err != nil {
			return nil, err
		}
	}
	return siblings, nil
}

// beginForget takes fs's duplicates, skipped lines and file count off the
// counters and stores it reset, in phase Forgetting (see ForgetFile).
func (tx *Tx) beginForget(fs *FileState) error {
	if fs.Phase != PhaseReady {
		return fmt.Errorf("file state of %s: already %s", fs.Path, fs.Phase)
	}
	if fs.Stage == Raw {
		if err := tx.AdjustDuplicates(fs.Dataset, Errors, -int64(fs.ErrorDuplicates)); err != nil {
			return err
		}
	}
	if err := tx.AdjustDuplicates(fs.Dataset, fs.Stage, -int64(fs.Duplicates)); err != nil {
		return err
	}
	d, err := tx.dataset(fs.Dataset)
	if err != nil {
		return err
	}
	d.sum.Stages[fs.Stage].Replaced -= fs.Replacing
	d.sum.Stages[fs.Stage].Files--
	d.sum.Stages[fs.Stage].Skipped -= fs.Skipped
	*fs = FileState{Path: fs.Path, Dataset: fs.Dataset, Stage: fs.Stage, IDPath: fs.IDPath, Shard: fs.Shard, Phase: PhaseForgetting,
		Forget: &Forgetting{ID: fs.ID, Dataset: fs.Dataset, Stage: fs.Stage, Keyed: fs.Keyed}}
	if err := tx.putState(fs); err != nil {
		return err
	}
	if err := tx.btx.Bucket(bucketReread).Put([]byte(fs.Path), []byte{}); err != nil {
		return err
	}
	return tx.btx.Bucket(bucketForgetting).Put([]byte(fs.Path), []byte{})
}

// MarkRead records that path, forgotten earlier, has been read again to its
// end: View.Unread no longer lists it.
func (tx *Tx) MarkRead(path string) error {
	return tx.btx.Bucket(bucketReread).Delete([]byte(path))
}

// IsUnread reports whether path was forgotten and not read again to its end
// since (see Unread).
func (v *View) IsUnread(path string) bool {
	b := v.btx.Bucket(bucketReread)
	return b != nil && b.Get([]byte(path)) != nil
}

// HasUnread reports, in O(1), whether some forgotten file has not been read
// again since (see Unread).
func (v *View) HasUnread() bool {
	b := v.btx.Bucket(bucketReread)
	if b == nil {
		return false
	}
	k, _ := b.Cursor().First()
	return k != nil
}

// Unread calls fn with the state of every file that was forgotten and has
// not been read again to its end since (see Tx.MarkRead): the index lacks
// some or all of its records until it is.
func (v *View) Unread(fn func(FileState) error) error {
	b := v.btx.Bucket(bucketReread)
	if b == nil {
		return nil
	}
	return b.ForEach(func(k, _ []byte) error {
		fs, ok, err := getFile(v.btx, string(k))
		if err != nil || !ok {
			return err
		}
		return fn(fs)
	})
}

// Forgetting reports whether some file's old records are still being
// removed: DB.FinishForgets must run before any file is read.
func (v *View) Forgetting() bool {
	b := v.btx.Bucket(bucketForgetting)
	if b == nil {
		return false
	}
	k, _ := b.Cursor().First()
	return k != nil
}

// DefaultForgetBatch is how many ids FinishForgets looks at per
// transaction when given 0.
const DefaultForgetBatch = 32_768

// FinishForgets removes the old records of every file in phase
// PhaseForgetting, looking at no more than batch ids per transaction (0:
// DefaultForgetBatch; an unkeyed file's scan looks at up to 8*batch keys),
// saving its position with each, and moves each such file to PhaseReady
// (with ID 0) in the transaction that removes its last record. It holds one
// key chunk, or one batch of scanned keys, in memory at a time. After a
// crash, calling it again goes on from the last commit. progress, when not
// nil, is called after each commit. It stops between transactions when ctx
// is done, returning ctx.Err().
func (db *DB) FinishForgets(ctx context.Context, batch int, progress func(path string, removed uint64, done bool)) error {
	if batch <= 0 {
		batch = DefaultForgetBatch
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var pending bool
		if err := db.View(func(v *View) error { pending = v.Forgetting(); return nil }); err != nil {
			return err
		}
		if !pending {
			return nil
		}
		var path string
		var fs FileState
		var done bool
		err := db.Update(func(tx *Tx) (err error) {
			path, done = "", false
			k, _ := tx.btx.Bucket(bucketForgetting).Cursor().First()
			if k == nil {
				return nil
			}
			path = string(k)
			fs, done, err = tx.forgetStep(path, batch)
			return err
		})
		if err != nil {
			return fmt.Errorf("removing the old records of %s: %w", path, err)
		}
		if path == "" {
			return nil
		}
		if progress != nil && fs.Forget != nil {
			progress(path, fs.Forget.Removed, done)
		}
	}
}

// forgetStep removes one batch of path's old records and stores where the
// removal stands; done reports that it finished.
func (tx *Tx) forgetStep(path string, batch int) (fs FileState, done bool, err error) {
	fs, ok, err := getFile(tx.btx, path)
	if err != nil {
		return fs, false, err
	}
	if !ok || fs.Phase != PhaseForgetting || fs.Forget == nil {
		return fs, true, tx.btx.Bucket(bucketForgetting).Delete([]byte(path))
	}
	f := fs.Forget
	var n int
	// Records listed in the key index go first (an unkeyed file may have
	// some: lines appended since the upgrade); then an unkeyed file's
	// stages are scanned.
	n, done, err = tx.removeKeyed(f.Dataset, f.ID, &f.ChunkPos, batch)
	if err != nil {
		return fs, false, err
	}
	if done && !f.Keyed {
		stages := forgetStages(f.Stage)
		for done = false; !done && n < batch; {
			m, next, err := tx.removeScan(f.Dataset, stages[f.ScanPass], f.ID, f.ScanAfter, batch-n)
			if err != nil {
				return fs, false, err
			}
			n += m
			f.ScanAfter = next
			if next == nil {
				f.ScanPass++
				done = f.ScanPass == len(stages)
			} else {
				break // the scan's share of this transaction is spent
			}
		}
	}
	f.Removed += uint64(n)
	if done {
		if err := tx.btx.Bucket(bucketFileIDs).Delete(u32key(f.ID)); err != nil {
			return fs, false, err
		}
		if err := tx.btx.Bucket(bucketForgetting).Delete([]byte(path)); err != nil {
			return fs, false, err
		}
		fs.Phase = PhaseReady
		removed := f.Removed
		fs.Forget = nil
		err = tx.putState(&fs)
		fs.Forget = &Forgetting{Removed: removed}
		return fs, true, err
	}
	return fs, false, tx.putState(&fs)
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

// MoveFile moves the stored state of the file at from to the path to, in
// this transaction: the same id, offsets, counts and phase, so that every
// record read from it is found at the new path and nothing of it is read
// again. The identity (size, mtime, device, inode) is updated from fi
// when given, since a copy has its own. The caller decides that the file
// at to is the one the index read at from (a folder moved or copied); it
// refuses a move onto a path the index already holds.
func (tx *Tx) MoveFile(from, to string, fi *FileIdentity) (FileState, error) {
	fs, ok, err := getFile(tx.btx, from)
	if err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("%s: not in the index", from)
		}
		return fs, err
	}
	if _, taken, err := getFile(tx.btx, to); err != nil || taken {
		if err == nil {
			err = fmt.Errorf("%s: the index already holds a file there", to)
		}
		return fs, err
	}
	files := tx.btx.Bucket(bucketFiles)
	if err := files.Delete([]byte(from)); err != nil {
		return fs, err
	}
	for _, b := range [...][]byte{bucketForgetting, bucketReread} {
		bk := tx.btx.Bucket(b)
		if bk.Get([]byte(from)) == nil {
			continue
		}
		if err := bk.Delete([]byte(from)); err != nil {
			return fs, err
		}
		if err := bk.Put([]byte(to), []byte{}); err != nil {
			return fs, err
		}
	}
	for _, id := range [...]uint32{fs.ID, forgetID(fs)} {
		if id != 0 {
			if err := tx.btx.Bucket(bucketFileIDs).Put(u32key(id), []byte(to)); err != nil {
				return fs, err
			}
		}
	}
	fs.Path = to
	if fi != nil {
		fs.Size, fs.ModTime, fs.Dev, fs.Ino = fi.Size, fi.ModTime, fi.Dev, fi.Ino
	}
	return fs, tx.putState(&fs)
}

// FileIdentity is what tells one file from another on a disk.
type FileIdentity struct {
	Size, ModTime int64
	Dev, Ino      uint64
}
