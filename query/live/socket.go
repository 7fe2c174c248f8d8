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
	"sync"
	"time"

	"golang.org/x/sys/unix"
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
// database's absolute path (symlinks in its folder resolved): <db>.sock
// beside the database when that fits in a socket address (107 bytes) and
// no other user can write the folder (it is this user's, and writable
// neither by its group nor by everyone); otherwise <runtime dir>/<hash of
// the path>.sock, where the runtime dir is $XDG_RUNTIME_DIR/gendex, or
// os.TempDir()/gendex-<uid> when that is unset. Listen and the readers
// check the folder again, through the one open folder they then use, and
// the owner and mode of what they find there.
func SocketPath(db string) string {
	abs := canonical(db)
	beside := abs + ".sock"
	if len(beside) <= maxSocketPath {
		if d, err := openSockDir(filepath.Dir(abs), false); err == nil {
			d.Close()
			return beside
		}
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

// sockDir is a socket's folder, opened once and checked through that open
// file: every later use of the socket (stat, connect, bind, remove) goes
// through the same open folder, so nobody can swap the folder between the
// check and the use (a parent folder's owner renaming it, say).
type sockDir struct {
	fd   int
	path string // for messages, and where the folder cannot be reached by fd
}

// openSockDir opens and checks the folder dir by its rule. A database's
// folder (private false) must be this user's and writable by nobody else,
// neither its group nor everyone: another user must not be able to create,
// remove or replace files in it. A sticky folder such as /tmp is refused
// too: there another user could not replace the socket, but could make one
// of that name first and so keep the writer from serving. The runtime dir
// (private true) must be a real folder (not a symlink) of this user's,
// closed to everyone else.
func openSockDir(dir string, private bool) (*sockDir, error) {
	flags := dirOpenFlags | unix.O_DIRECTORY | unix.O_CLOEXEC
	if private {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Open(dir, flags, 0)
	if err != nil {
		if private && (errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR)) {
			return nil, fmt.Errorf("%w: %s is not a folder (remove it; gendex creates it, mode 0700)", ErrUnsafeSocket, dir)
		}
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	d := &sockDir{fd: fd, path: dir}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		d.Close()
		return nil, &fs.PathError{Op: "stat", Path: dir, Err: err}
	}
	perm, uid := fs.FileMode(st.Mode&0o777), int(st.Uid)
	switch {
	case uid != geteuid() && private:
		err = fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d); set XDG_RUNTIME_DIR or TMPDIR to a folder of yours", ErrUnsafeSocket, dir, uid, geteuid())
	case private && perm&0o077 != 0:
		err = fmt.Errorf("%w: %s has mode %v; it must be private (chmod 700 %s)", ErrUnsafeSocket, dir, perm, dir)
	case uid != geteuid():
		err = fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d): its owner could replace a socket there", ErrUnsafeSocket, dir, uid, geteuid())
	case perm&0o002 != 0:
		err = fmt.Errorf("%w: %s is writable by every user (chmod o-w it)", ErrUnsafeSocket, dir)
	case perm&0o020 != 0:
		err = fmt.Errorf("%w: %s is writable by its group (chmod g-w it)", ErrUnsafeSocket, dir)
	}
	if err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// Close closes the folder.
func (d *sockDir) Close() error { return unix.Close(d.fd) }

// addr is the address that reaches name inside the open folder (see
// dirAddr), or its plain path where that would not fit in a socket address.
func (d *sockDir) addr(name string) string {
	if a := dirAddr(d.fd, name); a != "" && len(a) <= maxSocketPath {
		return a
	}
	return filepath.Join(d.path, name)
}

// checkSocket checks the file name in the folder before anyone connects to
// it or removes it: it must be a socket owned by this user. It returns an
// fs.ErrNotExist error when there is nothing there, and the socket's inode.
func (d *sockDir) checkSocket(name string) (ino uint64, err error) {
	sock := filepath.Join(d.path, name)
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return 0, &fs.PathError{Op: "lstat", Path: sock, Err: err}
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return 0, fmt.Errorf("%w: %s is not a socket (a file of that name is in the way; move it)", ErrUnsafeSocket, sock)
	case int(st.Uid) != geteuid():
		return 0, fmt.Errorf("%w: %s belongs to uid %d, not to you (uid %d): refusing to use it (remove it if you do not know who made it)", ErrUnsafeSocket, sock, st.Uid, geteuid())
	}
	return uint64(st.Ino), nil
}

// openDirOf opens the folder a socket lives in, checked by the rule for
// its kind (the runtime dir's, or a database folder's).
func openDirOf(sock string) (*sockDir, error) {
	dir := filepath.Dir(sock)
	return openSockDir(dir, dir == RuntimeDir())
}

// dialSocket connects to the socket at sock after checking its folder and
// the socket itself, through one open folder, and then the process at the
// other end: it must run as this user (where the system says). The peer's
// pid is returned when known (0 otherwise).
func dialSocket(dial func(addr string) (net.Conn, error), sock string) (c net.Conn, pid int, err error) {
	d, err := openDirOf(sock)
	if err != nil {
		if errors.Is(err, ErrUnsafeSocket) {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("%w: %v", ErrNoWriter, err)
	}
	defer d.Close()
	name := filepath.Base(sock)
	if _, err := d.checkSocket(name); err != nil {
		if errors.Is(err, ErrUnsafeSocket) {
			return nil, 0, err
		}
		return nil, 0, fmt.Errorf("%w: %v", ErrNoWriter, err)
	}
	c, err = dial(d.addr(name))
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %v", ErrNoWriter, err)
	}
	if pid, uid, ok := peerOf(c); ok {
		if uid != geteuid() {
			c.Close()
			return nil, 0, fmt.Errorf("%w: the process serving %s (pid %d) runs as uid %d, not as you (uid %d)", ErrUnsafeSocket, sock, pid, uid, geteuid())
		}
		return c, pid, nil
	}
	return c, 0, nil
}

// Listen opens the Unix socket at path, mode 0600, after checking its
// folder (see SocketPath; the runtime dir is created, mode 0700). A socket
// of this user left there by a process that died is replaced; one that
// answers is not (another writer serves it); anything else there (another
// user's socket, a file) is refused with ErrUnsafeSocket and left alone.
// The folder is opened once and every step goes through it; closing the
// listener removes the socket it made (and nothing that replaced it).
func Listen(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("socket path %s is %d bytes, over the %d a socket address holds (set XDG_RUNTIME_DIR, or TMPDIR, to a shorter folder)", path, len(path), maxSocketPath)
	}
	dir, name := filepath.Dir(path), filepath.Base(path)
	private := dir == RuntimeDir()
	if private {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("creating the socket folder: %w", err)
		}
	}
	d, err := openSockDir(dir, private)
	if err != nil {
		return nil, err
	}
	ln, err := listenIn(d, name, path)
	if err != nil {
		d.Close()
		return nil, err
	}
	return ln, nil
}

func listenIn(d *sockDir, name, path string) (net.Listener, error) {
	addr := d.addr(name)
	switch _, err := d.checkSocket(name); {
	case err == nil:
		if c, err := net.DialTimeout("unix", addr, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another process serves this database", path)
		}
		if err := unix.Unlinkat(d.fd, name, 0); err != nil {
			return nil, fmt.Errorf("removing the stale socket %s: %w", path, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	ln, err := listenPrivate(addr)
	if err != nil {
		return nil, err
	}
	ul := ln.(*net.UnixListener)
	ul.SetUnlinkOnClose(false) // dirListener removes it, through the folder
	// What is there now must be the socket just made: ours.
	ino, err := d.checkSocket(name)
	if err == nil {
		err = unix.Fchmodat(d.fd, name, 0o600, 0)
	}
	if err != nil {
		ul.Close()
		return nil, err
	}
	return &dirListener{UnixListener: ul, dir: d, name: name, ino: ino, path: path}, nil
}

// dirListener is a listener on a socket in an open folder: Close removes
// the socket, if it is still the one made, and closes the folder.
type dirListener struct {
	*net.UnixListener
	dir  *sockDir
	name string
	ino  uint64
	path string
	once sync.Once
}

// Addr is the socket's path (not the folder-relative address it was made by).
func (l *dirListener) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

func (l *dirListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		var st unix.Stat_t
		if unix.Fstatat(l.dir.fd, l.name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && uint64(st.Ino) == l.ino {
			unix.Unlinkat(l.dir.fd, l.name, 0)
		}
		l.dir.Close()
	})
	return err
}
