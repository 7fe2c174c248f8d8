//go:build !linux

package live

import (
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// dirOpenFlags opens a folder to check it (no O_PATH here).
const dirOpenFlags = unix.O_RDONLY

// dirAddr is "": without /proc, the socket is reached by its path, after
// the folder's checks.
func dirAddr(fd int, name string) string { return "" }

// peerOf does not know the peer here.
func peerOf(c net.Conn) (pid, uid int, ok bool) { return 0, 0, false }

// listenPrivate listens on a new Unix socket at addr under umask 0177, so
// that it is mode 0600 from the moment it exists. The umask is the whole
// process's meanwhile (files another goroutine makes then get it too);
// Linux needs none (see socket_linux.go).
func listenPrivate(addr string) (net.Listener, error) {
	old := syscall.Umask(0o177)
	defer syscall.Umask(old)
	return net.Listen("unix", addr)
}
