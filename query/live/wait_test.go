package live_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/live"
	"gendex/store"
)

// silentWriter listens on a fresh socket and accepts connections, then
// handles each with h (nil: never answers), until the test ends.
func silentWriter(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "g.db.sock")
	ln, err := live.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if h == nil {
		go func() {
			var conns []net.Conn
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				conns = append(conns, c) // read nothing, answer nothing
			}
		}()
		return sock
	}
	hs := &http.Server{Handler: h}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	return sock
}

// TestRemoteGivesUpOnSilentWriter: a writer that accepts the question and
// then sends nothing, or stops in the middle of an answer, gets an error
// wrapping ErrNotAnswering after the Remote's timeouts, naming the process
// (here this one) and what to check; never a hang.
func TestRemoteGivesUpOnSilentWriter(t *testing.T) {
	q, _ := query.Parse([]string{"progress"})
	release := make(chan struct{})
	defer close(release)
	for name, h := range map[string]http.HandlerFunc{
		"no header": nil,
		"stops mid-answer": func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, `{"columns":["dataset"]}`+"\n")
			http.NewResponseController(w).Flush()
			<-release
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := live.NewRemote(silentWriter(t, h))
			r.FirstByteTimeout, r.ReadTimeout = 300*time.Millisecond, 300*time.Millisecond
			defer r.Close()
			var c query.Collect
			done := make(chan error, 1)
			go func() { done <- r.Ask(t.Context(), q, time.Now(), &c) }()
			var err error
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("Ask still waits on a writer that sends nothing")
			}
			if !errors.Is(err, live.ErrNotAnswering) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
				t.Errorf("Ask: %v; want ErrNotAnswering naming pid %d", err, os.Getpid())
			}
			if c.Result.Columns != nil {
				t.Errorf("part of an answer reached the sink: %+v", c.Result)
			}
		})
	}
}

// slowSource holds each read transaction open for d: an answer that takes
// that long to compute.
type slowSource struct {
	src query.Source
	d   time.Duration
}

func (s slowSource) View(fn func(*store.View) error) error {
	return s.src.View(func(v *store.View) error {
		time.Sleep(s.d)
		return fn(v)
	})
}

// TestLongAnswerIsNotSilence: a writer that takes longer than the
// Remote's timeouts to compute an answer keeps it waiting (its header
// comes at once, then a blank line every second), and the answer arrives.
// The answer takes over twice the timeouts, which are three heartbeats
// each: a late heartbeat under load is not silence.
func TestLongAnswerIsNotSilence(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	sock, _ := serve(t, &live.Server{Src: slowSource{db, 7 * time.Second}})
	r := live.NewRemote(sock)
	r.FirstByteTimeout, r.ReadTimeout = 3*time.Second, 3*time.Second
	defer r.Close()
	q, _ := query.Parse([]string{"progress"})
	var c query.Collect
	if err := r.Ask(t.Context(), q, time.Now(), &c); err != nil {
		t.Fatal(err)
	}
	if len(c.Result.Rows) == 0 {
		t.Errorf("no rows: %+v", c.Result)
	}
}

// TestSocketFolderRule: a database folder that another user could write
// (its group, everyone, or its owner being someone else) never holds the
// socket: SocketPath points to the runtime dir and Listen refuses it.
func TestSocketFolderRule(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	for _, c := range []struct {
		mode  os.FileMode
		owner int
		why   string
	}{
		{0o700, -1, ""},
		{0o755, -1, ""},
		{0o770, -1, "chmod g-w"},
		{0o775, -1, "chmod g-w"},
		{0o757, -1, "chmod o-w"},
		{0o757 | os.ModeSticky, -1, "chmod o-w"}, // as /tmp: another user could make <db>.sock first
		{0o700, 4242, "uid 4242"},
	} {
		dir := filepath.Join(t.TempDir(), "d")
		os.Mkdir(dir, c.mode)
		if err := os.Chmod(dir, c.mode); err != nil {
			t.Fatal(err)
		}
		if c.owner >= 0 {
			if os.Geteuid() != 0 {
				continue // needs root to give a folder away
			}
			if err := os.Chown(dir, c.owner, c.owner); err != nil {
				t.Fatal(err)
			}
		}
		db := filepath.Join(dir, "g.db")
		got := live.SocketPath(db)
		beside := got == db+".sock"
		if beside != (c.why == "") {
			t.Errorf("folder mode %v owner %d: SocketPath = %s", c.mode, c.owner, got)
		}
		if c.why == "" {
			continue
		}
		if filepath.Dir(got) != live.RuntimeDir() {
			t.Errorf("folder mode %v owner %d: SocketPath = %s, not in the runtime dir %s", c.mode, c.owner, got, live.RuntimeDir())
		}
		if ln, err := live.Listen(db + ".sock"); !errors.Is(err, live.ErrUnsafeSocket) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("Listen in a folder of mode %v owner %d: %v; want ErrUnsafeSocket saying %q", c.mode, c.owner, err, c.why)
			if ln != nil {
				ln.Close()
			}
		}
	}
}

// TestListenRemovesOnlyItsSocket: closing the listener removes the socket
// it made, through its open folder, and leaves one that replaced it.
func TestListenRemovesOnlyItsSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "g.db.sock")
	ln, err := live.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	if ln.Addr().String() != sock {
		t.Errorf("Addr = %s, want %s", ln.Addr(), sock)
	}
	if fi, err := os.Lstat(sock); err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket: %v %v", fi, err)
	}
	ln.Close()
	if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the socket outlived its listener: %v", err)
	}
	ln, err = live.Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(sock)
	other, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ln.Close()
	if _, err := os.Lstat(sock); err != nil {
		t.Errorf("closing a listener removed the socket that replaced its own: %v", err)
	}
}
