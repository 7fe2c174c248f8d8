package gen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gendex/ingest"
)

// TestOpenOwnWaitsForAFile: a run out of file descriptors (a real
// RLIMIT_NOFILE, in a child process of its own) waits for one to open
// its answer file, says so once, and opens it when one is free; another
// error is returned at once.
func TestOpenOwnWaitsForAFile(t *testing.T) {
	if os.Getenv("GENDEX_TEST_OUT_OF_FILES") != "" {
		outOfFilesChild(os.Getenv("GENDEX_TEST_OUT_OF_FILES"))
		return
	}
	var log bytes.Buffer
	ctl := &control{log: &log}
	missing := filepath.Join(t.TempDir(), "no such folder", "raw_responses.jsonl")
	if _, err := openOwn(ctl, missing, ingest.OpenOutput); !errors.Is(err, os.ErrNotExist) || log.Len() > 0 {
		t.Errorf("a missing folder: %v, log %q; want the error at once, nothing said", err, log.String())
	}

	path := filepath.Join(t.TempDir(), "raw_responses.jsonl")
	cmd := exec.Command(os.Args[0], "-test.run=^TestOpenOwnWaitsForAFile$")
	cmd.Env = append(os.Environ(), "GENDEX_TEST_OUT_OF_FILES="+path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the child: %v\n%s", err, out)
	}
	got := string(out)
	if !strings.Contains(got, "first open: too many open files") {
		t.Fatalf("the child's first open did not run out of files:\n%s", got)
	}
	if n := strings.Count(got, "trying again for up to"); n != 1 || !strings.Contains(got, "opened after the limit was raised") {
		t.Errorf("the child said it waits %d times (want once), and then:\n%s", n, got)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the answer file: %v", err)
	}
}

// TestOpenOwnGivesUpWhenAbandoned: a run that abandons its requests (a
// failure, a second interrupt) while it waits for a file descriptor stops
// waiting at once, with the open's error.
func TestOpenOwnGivesUpWhenAbandoned(t *testing.T) {
	t.Parallel()
	reqs, cancel := context.WithCancel(t.Context())
	var log bytes.Buffer
	ctl := &control{log: &log, reqs: reqs}
	opens := 0
	outOfFiles := func(string) (*os.File, error) {
		if opens++; opens == 3 {
			cancel()
		}
		return nil, &os.PathError{Op: "open", Path: "raw_responses.jsonl", Err: syscall.EMFILE}
	}
	done := make(chan error, 1)
	go func() {
		_, err := openOwn(ctl, "raw_responses.jsonl", outOfFiles)
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.EMFILE) || opens != 3 {
			t.Errorf("abandoned after the third open: %v after %d opens; want EMFILE after 3", err, opens)
		}
	case <-time.After(time.Minute): // ownFileWait is 2 minutes
		t.Fatal("openOwn still waits for a file descriptor after the run abandoned its requests")
	}
}

// outOfFilesChild lowers its open-file limit to the file descriptors it
// holds, raises it again after a while, and meanwhile opens path as gen
// opens its answer file, saying what happened on stdout.
func outOfFilesChild(path string) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	// The runtime's poller opens a descriptor of its own at the first
	// pollable file: it must have it before the limit is lowered.
	if r, w, err := os.Pipe(); err == nil {
		r.Close()
		w.Close()
	}
	low := lim
	low.Cur = lowestFreeFD()
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	if _, err := os.Open(os.Args[0]); err != nil {
		fmt.Printf("first open: %v\n", errors.Unwrap(err))
	}
	time.AfterFunc(300*time.Millisecond, func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim) })
	var log bytes.Buffer
	f, err := openOwn(&control{log: &log}, path, ingest.OpenOutput)
	fmt.Print(log.String())
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	f.Close()
	fmt.Println("opened after the limit was raised")
}

// lowestFreeFD is the file descriptor the next open takes.
func lowestFreeFD() uint64 {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return 0
	}
	defer f.Close()
	return uint64(f.Fd())
}
