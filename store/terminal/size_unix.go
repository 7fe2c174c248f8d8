//go:build unix

package terminal

import (
	"os"
	"os/signal"

	"golang.org/x/sys/unix"
)

// Size returns the columns and rows of the terminal open as fd,
// read now (so a resized window is followed); 0, 0 when fd is not a
// terminal.
func Size(fd uintptr) (cols, rows int) {
	ws, err := unix.IoctlGetWinsize(int(fd), unix.TIOCGWINSZ)
	if err != nil {
		return 0, 0
	}
	return int(ws.Col), int(ws.Row)
}

// NotifyResize relays the terminal's resizes (SIGWINCH) to c.
func NotifyResize(c chan<- os.Signal) { signal.Notify(c, unix.SIGWINCH) }
