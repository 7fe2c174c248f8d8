package store

import (
	"sync"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// ReleaseMapped drops the index file's pages from the process's resident
// memory. bbolt reads the file through a read-only shared map (MAP_SHARED,
// PROT_READ), and every page a read touches stays counted in the process's
// RSS until the map goes: a walk over a million records leaves hundreds of
// MB "resident" that are only the kernel's page cache. ReleaseMapped
// advises the kernel (madvise MADV_DONTNEED) that the mapped pages are not
// needed; the next touch of one maps it again from the page cache (a minor
// fault, no disk read while the kernel keeps the page). The file is
// unchanged and every read returns what it did before.
//
// It is sound because nothing is lost: for a shared file mapping
// MADV_DONTNEED only removes the page table entries, and the mapping's
// contents are by definition the file's (bbolt never writes through the map:
// it writes pages with pwrite, so no page of the map is ever dirty). The
// map cannot move or shrink meanwhile: bbolt remaps only while it holds
// its mmap lock exclusively, and the read transaction under v holds it
// shared; the range released is the transaction's database size, which
// lies inside the map. Pages that other transactions touch at the same
// time are simply faulted in again.
//
// It costs one system call over the file's size; call it every few MB of
// reading, not per record. It is written for Linux (other unix systems
// have madvise too, but may keep the pages).
func (v *View) ReleaseMapped() error { return releaseMapped(v.btx) }

// ReleaseMapped is View.ReleaseMapped in a read transaction of its own.
func (db *DB) ReleaseMapped() error {
	return db.View(func(v *View) error { return v.ReleaseMapped() })
}

// ReleaseMapped is View.ReleaseMapped inside a read-write transaction, for
// a long one whose lookups touch pages all over the file (the kernel maps
// up to 16 neighbouring pages with each one touched). It is as sound: only
// the transaction's own commit remaps the file (when it grows), never
// while the transaction runs, and the nodes it changed are in Go's memory,
// not in the map; what they still point at in the map reads back the same.
func (tx *Tx) ReleaseMapped() error { return releaseMapped(tx.btx) }

// ReleaseMappedAbove is ReleaseMapped when the process's resident file
// pages (ResidentShared) are above n bytes, and nothing otherwise: the
// check a long reader or writer makes every so often to keep the index's
// pages under a budget.
func (tx *Tx) ReleaseMappedAbove(n int64) error { return releaseMappedAbove(tx.btx, n) }

// ReleaseMappedAbove is Tx.ReleaseMappedAbove in a read transaction of
// its own.
func (db *DB) ReleaseMappedAbove(n int64) error {
	return db.View(func(v *View) error { return releaseMappedAbove(v.btx, n) })
}

func releaseMappedAbove(btx *bolt.Tx, n int64) error {
	if r, ok := ResidentShared(); ok && r > n {
		return releaseMapped(btx)
	}
	return nil
}

func releaseMapped(btx *bolt.Tx) error {
	size := btx.Size()
	size -= size % int64(syscall.Getpagesize()) // whole pages of the map only
	if size <= 0 {
		return nil
	}
	return madviseDontNeed(btx.DB().Info().Data, uintptr(size))
}

// madviseDontNeed is madvise(addr, n, MADV_DONTNEED) on memory that Go does
// not manage (bbolt's map), so it takes the address as a uintptr.
func madviseDontNeed(addr, n uintptr) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_MADVISE, addr, n, syscall.MADV_DONTNEED); errno != 0 {
		return errno
	}
	return nil
}

// ResidentShared returns how much of the process's resident memory is
// file-backed or shared (the third field of /proc/self/statm, in bytes):
// the pages of the index's map among them, as ReleaseMapped releases
// them. It is one pread of a file kept open: callers check it every few
// hundred lookups and release the map when it is over their budget. ok is
// false where the kernel does not say (not Linux).
func ResidentShared() (n int64, ok bool) {
	statm.once.Do(func() {
		statm.fd, statm.err = syscall.Open("/proc/self/statm", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	})
	if statm.err != nil {
		return 0, false
	}
	var buf [128]byte
	m, err := syscall.Pread(statm.fd, buf[:], 0)
	if err != nil || m <= 0 {
		return 0, false
	}
	// size resident shared text lib data dt, in pages
	field, pages := 0, int64(0)
	for _, c := range buf[:m] {
		switch {
		case c == ' ' || c == '\n':
			if field == 2 {
				return pages * int64(syscall.Getpagesize()), true
			}
			field, pages = field+1, 0
		case c >= '0' && c <= '9':
			pages = pages*10 + int64(c-'0')
		default:
			return 0, false
		}
	}
	return 0, false
}

// statm is /proc/self/statm, opened once for ResidentShared (the process's
// own, whichever thread reads it).
var statm struct {
	once sync.Once
	fd   int
	err  error
}
