//go:build unix

package gen

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// terminalSize returns the columns and rows of the terminal open as fd,
// read now (so a resized window is followed); 0, 0 when fd is not a
// terminal.
func terminalSize(fd uintptr) (cols, rows int) {
	ws, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}

// notifyResize relays the terminal's resizes (SIGWINCH) to c.
func notifyResize(c chan<- os.Signal) { signal.Notify(c, unix.SIGWINCH) }
