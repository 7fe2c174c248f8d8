//go:build unix

package shell

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// TerminalWidth returns the columns of the terminal open as fd, read now
// (so a resized window is followed); 0 when fd is not a terminal.
func TerminalWidth(fd uintptr) int {
	ws, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ)
	if err != nil {
		return 0
	}
	return int(ws.Col)
}

// notifyResize relays the terminal's resizes (SIGWINCH) to c.
func notifyResize(c chan<- os.Signal) { signal.Notify(c, unix.SIGWINCH) }
