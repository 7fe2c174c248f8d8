package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// SchemaVersion is the layout version written into new files. Open refuses a
// file with another version rather than misreading it, except versions 1
// to 3, which a read-write Open upgrades in place (see init). Version 3
// adds Stats.Skipped; a read-only Open of an older file sums it from the
// file states for each Summary. Version 4 adds the turns and excluded
// stages: a version 3 file has none of their records (so its
// Overlap.RawExcluded, absent, is rightly 0), so it is read as it is and its
// version number raised by the first read-write Open (older binaries then
// refuse it rather than miscount the new stages). Version 5 keys a
// sample's answers by its unit (UnitID) and counts units (Record.Samples,
// Stats.Samples, Summary.Done): a version 4 file has no sampled record, so
// it is read as it is and raised the same way, so that an older binary,
// which would key a sample's answer by its prompt and drop the counters it
// does not know, refuses it.
const SchemaVersion = 5

// DefaultTimeout is how long Open waits for the file lock held by another process.
const DefaultTimeout = 2 * time.Second

// ErrLocked is returned by Open when another process holds the database.
var ErrLocked = errors.New("database is in use by another process")

// Options configures Open.
type Options struct {
	// ReadOnly opens the file with a shared lock and never creates it.
	ReadOnly bool
	// Timeout is how long to wait for the file lock; 0 means DefaultTimeout.
	Timeout time.Duration
	// NoSync skips fsync on commit. Only for throwaway benchmark files.
	NoSync bool
	// FailCommit, when set, is called before each read-write transaction
	// commits, with n counting those transactions from 1 since Open; an
	// error it returns rolls the transaction back and is returned by
	// Update. It exists for crash-safety tests: failing commit n leaves the
	// file exactly as a crash just before that commit would.
	FailCommit func(n int) error
	// InitialMmapSize, when positive, replaces a writer's initial 1 GiB
	// map of the file. Tests set a small one so that bbolt remaps as the
	// index grows (a remap waits for every open read transaction).
	InitialMmapSize int
}

// DB is an open index.
type DB struct {
	bolt       *bolt.DB
	path       string
	failCommit func(n int) error
	commits    atomic.Int64
	// skippedFromFiles: the file predates Stats.Skipped and is open
	// read-only, so View.Summary sums it from the file states.
	skippedFromFiles bool
	// held are the runs going on in this process (HoldRun).
	held sync.Map
}

// Open opens (read-write: creating) the index at path.
func Open(path string, opts Options) (*DB, error) {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	if opts.ReadOnly {
		if err := checkReadable(path); err != nil {
			return nil, err
		}
	} else if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("open index: %w", err)
		}
	}
	bopts := &bolt.Options{
		Timeout:      timeout,
		ReadOnly:     opts.ReadOnly,
		NoSync:       opts.NoSync,
		FreelistType: bolt.FreelistMapType,
	}
	if !opts.ReadOnly {
		// Address space, not memory: a large map spares the writer the
		// remaps (and re-copies of every open node) as the file grows.
		bopts.InitialMmapSize = 1 << 30
		if opts.InitialMmapSize > 0 {
			bopts.InitialMmapSize = opts.InitialMmapSize
		}
	}
	if fs := networkFS(path); fs != "" && os.Getenv("GENDEX_NETWORK_DB") != "1" {
		return nil, networkRefusal(path, fs)
	}
	bdb, err := bolt.Open(path, 0o600, bopts)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("open index %s: %w: %s", path, ErrLocked, lockHolders(path))
		}
		return nil, badIndex(path, err)
	}
	db := &DB{bolt: bdb, path: path, failCommit: opts.FailCommit}
	if err := db.init(opts.ReadOnly); err != nil {
		bdb.Close()
		return nil, err
	}
	return db, nil
}

func (db *DB) init(readOnly bool) error {
	check := func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if m == nil {
			if readOnly {
				return nil // an empty file: every question answers with no datasets
			}
			return errNeedInit
		}
		v := m.Get(keyVersion)
		if len(v) == 1 && (v[0] == 1 || v[0] == 2) && readOnly {
			db.skippedFromFiles = true
		}
		if len(v) == 1 && v[0] == 2 {
			return errNeedInit // Stats.Skipped is summed from the file states
		}
		if len(v) == 1 && (v[0] == 3 || v[0] == 4) {
			if readOnly {
				return nil
			}
			return errNeedInit // only the version number changes
		}
		if len(v) == 1 && v[0] == 1 {
			// Version 1 lacks the forgetting bucket and the per-file key
			// index. Its files' states have Keyed false, so forgetting one
			// falls back to scanning its stages (see Forgetting); nothing
			// is rebuilt at open.
			if readOnly {
				return nil
			}
			return errNeedInit
		}
		if len(v) != 1 || int(v[0]) != SchemaVersion {
			return Kind(ErrBadIndex, fmt.Errorf("open index %s: schema version %v, this gendex reads %d (re-create it with 'gendex ingest')", db.path, v, SchemaVersion))
		}
		return nil
	}
	err := db.bolt.View(check)
	if !errors.Is(err, errNeedInit) || readOnly {
		if errors.Is(err, errNeedInit) {
			err = nil
		}
		return err
	}
	return db.bolt.Update(func(btx *bolt.Tx) error {
		upgrade := btx.Bucket(bucketMeta) != nil
		for _, name := range [][]byte{bucketMeta, bucketFiles, bucketFileIDs, bucketDatasets, bucketForgetting, bucketReread} {
			if _, err := btx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		if upgrade {
			if err := sumSkipped(btx); err != nil {
				return fmt.Errorf("open index %s: upgrading it: %w", db.path, err)
			}
		}
		return btx.Bucket(bucketMeta).Put(keyVersion, []byte{SchemaVersion})
	})
}

// sumSkipped sets every stage's Skipped counter to the sum of its files'
// Skipped: the upgrade of a file written before the counter existed.
func sumSkipped(btx *bolt.Tx) error {
	tx := newTx(btx)
	sums := map[string]*[numStages]uint64{}
	err := (&View{btx: btx}).Files(func(fs FileState) error {
		if fs.Phase == PhaseReady && fs.Skipped > 0 && fs.Stage < numStages {
			if sums[fs.Dataset] == nil {
				sums[fs.Dataset] = new([numStages]uint64)
			}
			sums[fs.Dataset][fs.Stage] += fs.Skipped
		}
		return nil
	})
	if err != nil {
		return err
	}
	for name, n := range sums {
		d, err := tx.dataset(name)
		if err != nil {
			return err
		}
		for st := range n {
			d.sum.Stages[st].Skipped = n[st]
		}
	}
	return tx.flush()
}

var errNeedInit = errors.New("need init")

// Path returns the file the index lives in.
func (db *DB) Path() string { return db.path }

// Close releases the file and its lock.
func (db *DB) Close() error { return db.bolt.Close() }

// Update runs fn in one read-write transaction, committed (and fsynced) when
// fn returns nil. Counters touched through tx are written before the commit,
// so records and counters are never out of step.
func (db *DB) Update(fn func(*Tx) error) error {
	return db.bolt.Update(func(btx *bolt.Tx) error {
		tx := newTx(btx)
		if err := fn(tx); err != nil {
			return err
		}
		if err := tx.flush(); err != nil {
			return err
		}
		if db.failCommit != nil {
			return db.failCommit(int(db.commits.Add(1)))
		}
		return nil
	})
}

// View runs fn in a read-only snapshot. Nothing read may be kept past fn's
// return unless copied (every View method returns copies).
func (db *DB) View(fn func(*View) error) error {
	return db.bolt.View(func(btx *bolt.Tx) error {
		return fn(&View{btx: btx, skippedFromFiles: db.skippedFromFiles, db: db})
	})
}

// lockHolders says who holds the lock on the file at path, for ErrLocked's
// message: a writer (it holds the file exclusively) or a reader (shared),
// and, where Linux tells (/proc/locks, else /proc/*/fd), which process,
// with its command line; and what to do.
func lockHolders(path string) string {
	const what = "a writer ('gendex gen', 'gendex ingest', 'gendex export' or 'gendex drop') or a reader (an older gendex's 'gendex query ... | less' or 'gendex shell', or a bbolt tool)"
	const todo = "wait for it to finish, or stop it"
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Sprintf("held by %s that is still running: %s", what, todo)
	}
	var parts []string
	for _, h := range flockHolders(fi) {
		who := "a reader"
		if h.write {
			who = "a writer"
		}
		parts = append(parts, fmt.Sprintf("%s (pid %d%s)", who, h.pid, describePid(h.pid)))
	}
	if len(parts) > 0 {
		return fmt.Sprintf("held by %s, still running: %s", strings.Join(parts, " and "), todo)
	}
	for _, pid := range openedBy(fi) {
		parts = append(parts, fmt.Sprintf("pid %d%s", pid, describePid(pid)))
	}
	if len(parts) > 0 {
		return fmt.Sprintf("held by %s that is still running, with it open: %s; %s", what, strings.Join(parts, ", "), todo)
	}
	return fmt.Sprintf("held by %s that is still running ('fuser -v %s' names it): %s", what, path, todo)
}

type flockHolder struct {
	pid   int
	write bool
}

// flockHolders reads /proc/locks for the flock locks held (not waited
// for) on the file fi: "1: FLOCK  ADVISORY  WRITE 6510 fe:00:9977985 0 EOF",
// the device as major:minor in hex.
func flockHolders(fi os.FileInfo) []flockHolder {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return nil
	}
	dev := uint64(st.Dev)
	want := fmt.Sprintf("%02x:%02x:%d", unix.Major(dev), unix.Minor(dev), st.Ino)
	var out []flockHolder
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != want {
			continue // another file, another kind of lock, or a waiter ("->")
		}
		pid, err := strconv.Atoi(f[4])
		if err != nil || pid <= 0 {
			continue
		}
		out = append(out, flockHolder{pid: pid, write: f[3] == "WRITE"})
	}
	return out
}

// openedBy lists the other processes that have the file fi open
// (/proc/*/fd), for when /proc/locks does not name the lock's holder.
func openedBy(fi os.FileInfo) []int {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		fds, err := os.ReadDir(filepath.Join("/proc", p.Name(), "fd"))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if ofi, err := os.Stat(filepath.Join("/proc", p.Name(), "fd", fd.Name())); err == nil && os.SameFile(fi, ofi) {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// describePid is ": its command line", ": this process", or "".
func describePid(pid int) string {
	if pid == os.Getpid() {
		return ": this process, through another handle"
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(b) == 0 {
		return ""
	}
	return ": " + strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// networkRefusal is the error of an index asked for on network
// filesystem fs: it says where to keep it, for a writer and for a reader
// (a login node's ingest --follow) alike.
func networkRefusal(path, fs string) error {
	return fmt.Errorf("open index %s: it is on %s, a network filesystem, where the index's lock and memory map are not reliable (two writers on two machines could both take it): keep --db on this machine's local disk (for example --db /tmp/%s, or under $TMPDIR) and only the JSONL files on the shared folder; a reader elsewhere indexes those files into an index of its own (gendex --db /tmp/%s ingest --follow FOLDER); GENDEX_NETWORK_DB=1 opens it anyway", path, fs, localName(path), localName(path))
}

// localName is a name for an index on local disk, after the one path
// names: its file name with the user's name before it, so that users of
// one machine's /tmp do not share one.
func localName(path string) string {
	user := os.Getenv("USER")
	if user == "" {
		user = "gendex"
	}
	return user + "-" + filepath.Base(path)
}
