package gen

import (
	"errors"
	"os"
	"syscall"
	"time"
)

// ownFileWait is how long a run waits for a file descriptor to open one
// of its own files before it fails: time for a crowd of connections, or
// another program sharing the machine's files, to let go.
const ownFileWait = 2 * time.Minute

// openOwn opens path, one of the run's own files (its answers, records,
// prompts), with open. When the process is out of file descriptors
// (EMFILE, ENFILE) it tries again, 10 ms later doubling to 2 s, for up to
// ownFileWait, and says so once in the run's log; another error, one
// that outlasts the wait, or one when the run abandons its requests (a
// second interrupt, a failure) meanwhile, is returned.
func openOwn(ctl *control, path string, open func(string) (*os.File, error)) (*os.File, error) {
	delay, deadline := 10*time.Millisecond, time.Now().Add(ownFileWait)
	var abandoned <-chan struct{}
	if ctl.reqs != nil {
		abandoned = ctl.reqs.Done()
	}
	for {
		f, err := open(path)
		if err == nil || !outOfFiles(err) || time.Now().After(deadline) {
			return f, err
		}
		ctl.once("out of files", "warning: %v; trying again for up to %s (raise ulimit -n; ls /proc/%d/fd lists what is open)",
			err, ownFileWait, os.Getpid())
		select {
		case <-time.After(delay):
		case <-abandoned:
			return nil, err
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// outOfFiles reports whether err says the process (EMFILE) or the system
// (ENFILE) has no file descriptor free.
func outOfFiles(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
