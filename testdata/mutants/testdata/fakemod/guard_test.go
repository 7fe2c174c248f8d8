package fakemod

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestKept(t *testing.T) {
	if !Kept() {
		t.Fatal("Kept() = false")
	}
}

func TestHangs(t *testing.T) {
	if !Hangs() {
		time.Sleep(time.Hour)
	}
}

func TestSlowOnce(t *testing.T) {
	if !SlowOnce() && firstRun(t) {
		time.Sleep(time.Hour)
	}
}

func TestSlowOnceThenFails(t *testing.T) {
	if !SlowOnceThenFails() {
		if firstRun(t) {
			time.Sleep(time.Hour)
		}
		t.Fatal("SlowOnceThenFails() = false")
	}
}

// firstRun says whether t runs for the first time: it leaves a mark in
// $FAKEMOD_MARKS, a folder that outlives the copies of the tree.
func firstRun(t *testing.T) bool {
	dir := os.Getenv("FAKEMOD_MARKS")
	if dir == "" {
		t.Fatal("FAKEMOD_MARKS is not set")
	}
	f, err := os.OpenFile(filepath.Join(dir, t.Name()), os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	return true
}
