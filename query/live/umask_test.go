package live

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// TestListenLeavesTheUmaskAlone: files that another goroutine creates
// while sockets are being made get the mode they ask for (less the
// process's umask, unchanged), not the socket's 0600. Listen once set the
// process's umask around bind, and a test's pager script written 0755
// meanwhile came out 0600: "sh: 1: pager.sh: Permission denied" (issue 46).
func TestListenLeavesTheUmaskAlone(t *testing.T) {
	dir := t.TempDir()
	ref := filepath.Join(dir, "ref")
	if err := os.WriteFile(ref, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	want := fi.Mode().Perm() // 0o755 less the umask the process runs with

	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for range 300 {
			ln, err := Listen(filepath.Join(dir, "g.db.sock"))
			if err != nil {
				t.Error(err)
				return
			}
			ln.Close()
		}
	})
	p := filepath.Join(dir, "script.sh")
	for n := 0; ; n++ {
		select {
		case <-done:
			wg.Wait()
			t.Logf("%d files made while 300 sockets were", n)
			return
		default:
		}
		os.Remove(p)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != want {
			<-done
			wg.Wait()
			t.Fatalf("a file written 0755 while Listen ran came out %v (%v), want %v: Listen changed the process's umask", fi.Mode().Perm(), err, want)
		}
	}
}

// TestListenPrivateAtBind: the socket is mode 0600 as bind makes it,
// whatever the umask (here 0, which would leave it 0777), not only once
// Listen's chmod after bind has run.
func TestListenPrivateAtBind(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "g.db.sock")
	old := syscall.Umask(0) // no test of this package runs in parallel
	ln, err := listenPrivate(sock)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if fi, err := os.Lstat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket as bound: %v %v, want mode 0600", fi.Mode(), err)
	}
}
