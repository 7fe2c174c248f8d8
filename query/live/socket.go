package live

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// maxSocketPath is the longest path a Unix socket address holds on Linux:
// sun_path is 108 bytes, one of them the terminating NUL.
const maxSocketPath = 107

// ErrUnsafeSocket marks a socket, or its folder, that another user could
// have made or could replace: gendex neither connects to it nor removes it.
var ErrUnsafeSocket = errors.New("unsafe socket")

// geteuid is os.Geteuid; a variable so that tests can play another user.
var geteuid = os.Geteuid

// SocketPath is where the writer of the index at db serves questions, and
// where readers look for it. Both sides compute it the same way from the
// database's absolute path (symlinks in its folder resolved):
// <db>.sock beside the database when that fits in a socket address (107
// bytes) and the folder is not writable by others; otherwise <runtime dir>/<hash of the path>.sock, where the runtime
// dir is $XDG_RUNTIME_DIR/gendex, or os.TempDir()/gendex-<uid> when that is
// unset. SocketPath checks nothing beyond that choice: Listen and the
// readers check the owner and mode of what they find there.
func SocketPath(db string) string {
	abs := canonical(db)
	beside := abs + ".sock"
	if len(beside) <= maxSocketPath && sharedDirOK(filepath.Dir(abs)) == nil {
		return beside
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(RuntimeDir(), hex.EncodeToString(sum[:12])+".sock")
}

// RuntimeDir is the private folder for sockets whose database path is too
// long, or whose database folder is unsafe, to hold them beside it.
func RuntimeDir() string {
	if x := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(x) {
		return filepath.Join(x, "gendex")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("gendex-%d", geteuid()))
}

// canonical is db's absolute path with its folder's symlinks resolved (the
// file itself may not exist yet), so that two processes that reach the
// same database by different paths agree on its socket.
func canonical(db string) string {
	abs, err := filepath.Abs(db)
	if err != nil {
		return db
	}
	if dir, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(dir, filepath.Base(abs))
	}
	return abs
}

// sharedDirOK checks a database's folder before a socket is put or looked
// for in it: another user must not be able to create or replace files in
// it, so it must not be writable by others. A sticky folder such as /tmp
// is refused too: there another user could not replace the socket, but
// could make one of that name first and so keep the writer from serving.
func sharedDirOK(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o002 != 0 {
		return fmt.Errorf("%w: %s is writable by every user (chmod o-w it)", ErrUnsafeSocket, dir)
	}
	return nil
}

// privateDirOK checks the runtime dir: a real folder (not a symlink) owned
// by this user and closed to everyone else.
func privateDirOK(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("%w: %s is not a folder (remove it; gendex creates it, mode 0700)", ErrUnsafeSocket, dir)
	case st == nil || int(st.Uid) != geteuid():
		return fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d); set XDG_RUNTIME_DIR or TMPDIR to a folder of yours", ErrUnsafeSocket, dir, ownerOf(st), geteuid())
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%w: %s has mode %v; it must be private (chmod 700 %s)", ErrUnsafeSocket, dir, fi.Mode().Perm(), dir)
	}
	return nil
}

func ownerOf(st *syscall.Stat_t) int {
	if st == nil {
		return -1
	}
	return int(st.Uid)
}

// checkDir checks the folder a socket lives in, by the rule for its kind.
func checkDir(sock string) error {
	dir := filepath.Dir(sock)
	if dir == RuntimeDir() {
		return privateDirOK(dir)
	}
	return sharedDirOK(dir)
}

// checkSocket checks an existing file at sock before anyone connects to it
// or removes it: it must be a socket owned by this user. It returns an
// fs.ErrNotExist error when there is nothing there.
func checkSocket(sock string) error {
	fi, err := os.Lstat(sock)
	if err != nil {
		return err
	}
	st, _ := fi.Sys().(*syscall.Stat_t)
	switch {
	case fi.Mode()&fs.ModeSocket == 0:
		return fmt.Errorf("%w: %s is not a socket (a file of that name is in the way; move it)", ErrUnsafeSocket, sock)
	case st == nil || int(st.Uid) != geteuid():
		return fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d): refusing to use it (remove it if you do not know who made it)", ErrUnsafeSocket, sock, ownerOf(st), geteuid())
	}
	return nil
}

// Listen opens the Unix socket at path, mode 0600, after checking its
// folder (see SocketPath; the runtime dir is created, mode 0700). A socket
// of this user left there by a process that died is replaced; one that
// answers is not (another writer serves it); anything else there (another
// user's socket, a file) is refused with ErrUnsafeSocket and left alone.
func Listen(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes, over the %d a socket address holds (set XDG_RUNTIME_DIR, or TMPDIR, to a shorter folder)", path, len(path), maxSocketPath)
	}
	if dir := filepath.Dir(path); dir == RuntimeDir() {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating the socket folder: %w", err)
		}
	}
	if err := checkDir(path); err != nil {
		return nil, err
	}
	switch err := checkSocket(path); {
	case err == nil:
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another process serves this database", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	old := syscall.Umask(0o177)
	ln, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, err
	}
	// What is at path now must be the socket just made: ours, and closed.
	if err := checkSocket(path); err != nil {
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(true)
	return ln, nil
}
