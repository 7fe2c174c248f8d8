package live

import (
	"context"
	"net"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// dirOpenFlags opens a folder for lookups only: O_PATH needs no read
// permission on it.
const dirOpenFlags = unix.O_PATH

// dirAddr reaches name through the open folder fd: the kernel resolves
// /proc/self/fd/N to that very folder, whatever its path now names.
func dirAddr(fd int, name string) string {
	return "/proc/self/fd/" + strconv.Itoa(fd) + "/" + name
}

// peerOf is the pid and uid of the process at the other end of a Unix
// socket connection (SO_PEERCRED: the process that made the listening
// socket).
func peerOf(c net.Conn) (pid, uid int, ok bool) {
	uc, isUnix := c.(*net.UnixConn)
	if !isUnix {
		return 0, 0, false
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, false
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil || cerr != nil {
		return 0, 0, false
	}
	return int(cred.Pid), int(cred.Uid), true
}

// listenPrivate listens on a new Unix socket at addr, mode 0600 from the
// moment it exists: Linux gives the socket's file the mode of the socket
// itself (less the umask), so an fchmod before bind leaves no instant in
// which another user could connect. It does not set the umask: that is
// the whole process's, and every file, folder and child process another
// goroutine made meanwhile would get it (a test's script written 0755
// came out 0600 and could not run: issue 46).
func listenPrivate(addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) { err = unix.Fchmod(int(fd), 0o600) }); cerr != nil {
			return cerr
		}
		return err
	}}
	return lc.Listen(context.Background(), "unix", addr)
}
