package store

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fillReleaseDB adds n raw records (with a long finish reason, so that the
// file has many pages) in transactions of 5,000.
func fillReleaseDB(t *testing.T, db *DB, from, n int) {
	t.Helper()
	for lo := from; lo < from+n; lo += 5000 {
		err := db.Update(func(tx *Tx) error {
			for i := lo; i < min(lo+5000, from+n); i++ {
				r := Record{ID: fmt.Sprintf("r%08d", i), Shape: ShapeFlat, PromptTokens: int64(i % 900), CompletionTokens: int64(i % 700),
					CachedTokens: Unknown, ReasoningTokens: Unknown, Finish: strings.Repeat("s", 40), File: 1, Offset: int64(i) * 1000, Length: 999, Line: int64(i + 1), Sum: uint32(i)}
				if _, err := tx.Add("d", Raw, &r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func readAll(t *testing.T, v *View) []Record {
	t.Helper()
	var out []Record
	if err := v.Each("d", Raw, func(r *Record) error { out = append(out, *r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReleaseMappedKeepsData: what a transaction reads after releasing the
// map (in the same transaction and in the next) is what it read before,
// also while a writer commits and remaps (a small initial map makes it
// remap as the file grows).
func TestReleaseMappedKeepsData(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "gendex.db"), Options{NoSync: true, InitialMmapSize: 1 << 16})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	fillReleaseDB(t, db, 0, 20000)
	var want []Record
	err = db.View(func(v *View) error {
		want = readAll(t, v)
		if err := v.ReleaseMapped(); err != nil {
			return err
		}
		if got := readAll(t, v); !reflect.DeepEqual(got, want) {
			t.Fatal("records read after ReleaseMapped differ from those read before")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) != 20000 {
		t.Fatalf("%d records", len(want))
	}

	// Inside a write transaction: what it reads, and what it changed, are
	// the same after a release.
	err = db.Update(func(tx *Tx) error {
		d, err := tx.dataset("d")
		if err != nil {
			return err
		}
		if err := d.stages[Raw].Delete([]byte("r00000007")); err != nil {
			return err
		}
		before := d.get(Raw, []byte("r00015000"))
		if err := tx.ReleaseMapped(); err != nil {
			return err
		}
		if after := d.get(Raw, []byte("r00015000")); string(after) != string(before) || before == nil {
			t.Errorf("a write transaction reads %x after ReleaseMapped, %x before", after, before)
		}
		if d.get(Raw, []byte("r00000007")) != nil {
			t.Error("a record the transaction deleted is back after ReleaseMapped")
		}
		return errors.New("roll back")
	})
	if err == nil || err.Error() != "roll back" {
		t.Fatal(err)
	}

	// A writer grows the file (and remaps) while readers release and read.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := db.ReleaseMapped(); err != nil {
					t.Error(err)
					return
				}
				err := db.View(func(v *View) error {
					r, ok, err := v.Get("d", Raw, "r00012345")
					if err != nil || !ok || !reflect.DeepEqual(r, want[12345]) {
						t.Errorf("Get after release: %+v %v %v", r, ok, err)
					}
					return v.ReleaseMapped()
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	fillReleaseDB(t, db, 20000, 30000)
	close(stop)
	wg.Wait()
	err = db.View(func(v *View) error {
		all := readAll(t, v)
		if len(all) != 50000 || !reflect.DeepEqual(all[:20000], want) {
			t.Errorf("after the concurrent writes: %d records, first 20000 equal: %v", len(all), reflect.DeepEqual(all[:20000], want))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rssFileKB is the process's resident file-backed memory (RssFile in
// /proc/self/status), in kB.
func rssFileKB(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip("no /proc/self/status:", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestReleaseMappedDropsRSS: pages a walk touched count in RSS until
// ReleaseMapped, and no longer after it.
func TestReleaseMappedDropsRSS(t *testing.T) {
	db := newDB(t)
	fillReleaseDB(t, db, 0, 50000)
	fi, err := os.Stat(db.Path())
	if err != nil {
		t.Fatal(err)
	}
	if err := db.ReleaseMapped(); err != nil {
		t.Fatal(err)
	}
	var before, touched, after int64
	var shared [3]int64 // ResidentShared at the same three moments
	resident := func() int64 {
		n, ok := ResidentShared()
		if !ok {
			t.Fatal("ResidentShared: not ok where /proc/self/status exists")
		}
		return n >> 10
	}
	err = db.View(func(v *View) error {
		before, shared[0] = rssFileKB(t), resident()
		readAll(t, v)
		touched, shared[1] = rssFileKB(t), resident()
		if err := v.ReleaseMapped(); err != nil {
			return err
		}
		after, shared[2] = rssFileKB(t), resident()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	file := fi.Size() >> 10
	t.Logf("file %d kB; RssFile %d kB, after the walk %d kB, after ReleaseMapped %d kB", file, before, touched, after)
	if touched-before < file/4 {
		t.Fatalf("the walk added %d kB of RssFile for a %d kB file: the test does not see mapped pages", touched-before, file)
	}
	if touched-after < (touched-before)*3/4 {
		t.Errorf("ReleaseMapped dropped %d kB of the %d kB the walk added", touched-after, touched-before)
	}
	t.Logf("ResidentShared: %d, %d, %d kB", shared[0], shared[1], shared[2])
	if shared[1]-shared[0] < (touched-before)*3/4 || shared[1]-shared[2] < (touched-after)*3/4 {
		t.Errorf("ResidentShared does not follow the mapped pages as RssFile does")
	}
}

func BenchmarkResidentShared(b *testing.B) {
	for b.Loop() {
		if _, ok := ResidentShared(); !ok {
			b.Skip("no /proc/self/statm")
		}
	}
}

// TestKeepMappedUnder: a walk of a view that keeps the map under a budget
// (here none: every check releases) leaves few of the pages it read
// resident, and reads the same records.
func TestKeepMappedUnder(t *testing.T) {
	db := newDB(t)
	fillReleaseDB(t, db, 0, 50000)
	var want []Record
	var plain int64
	err := db.View(func(v *View) error {
		if err := v.ReleaseMapped(); err != nil {
			return err
		}
		before := rssFileKB(t)
		want = readAll(t, v)
		plain = rssFileKB(t) - before
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(v *View) error {
		if err := v.ReleaseMapped(); err != nil {
			return err
		}
		v.KeepMappedUnder(1)
		before := rssFileKB(t)
		got := readAll(t, v)
		var missing []string
		if err := v.Missing("d", Raw, func(id string) error { missing = append(missing, id); return nil }, Prompts); err != nil {
			return err
		}
		kept := rssFileKB(t) - before
		t.Logf("a walk adds %d kB of RssFile; walking twice while keeping the map under 1 byte, %d kB", plain, kept)
		if !reflect.DeepEqual(got, want) || len(missing) != len(want) {
			t.Errorf("the walks read %d records and %d missing ids; want %d of each", len(got), len(missing), len(want))
		}
		if plain < 1024 || kept > plain/2 {
			t.Errorf("keeping the map under 1 byte, RssFile grew %d kB; %d kB without", kept, plain)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReleaseMappedAbove: the pages a walk touched are released only when
// the process's resident file pages are above the budget given.
func TestReleaseMappedAbove(t *testing.T) {
	db := newDB(t)
	fillReleaseDB(t, db, 0, 50000)
	if err := db.ReleaseMapped(); err != nil {
		t.Fatal(err)
	}
	before := rssFileKB(t)
	if err := db.View(func(v *View) error { readAll(t, v); return nil }); err != nil {
		t.Fatal(err)
	}
	touched := rssFileKB(t)
	if touched-before < 1024 {
		t.Fatalf("the walk added %d kB of RssFile: the test does not see mapped pages", touched-before)
	}
	if err := db.ReleaseMappedAbove(1 << 40); err != nil {
		t.Fatal(err)
	}
	if kept := rssFileKB(t); touched-kept > (touched-before)/4 {
		t.Errorf("under the budget, %d of the %d kB the walk added were released", touched-kept, touched-before)
	}
	if err := db.ReleaseMappedAbove(0); err != nil {
		t.Fatal(err)
	}
	if after := rssFileKB(t); touched-after < (touched-before)*3/4 {
		t.Errorf("over the budget, %d of the %d kB the walk added were released", touched-after, touched-before)
	}
}
