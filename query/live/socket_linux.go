package live

import (
	"net"
	"strconv"

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
