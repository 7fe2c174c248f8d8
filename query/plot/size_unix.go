//go:build unix

package plot

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// terminalSize returns the columns and lines of the terminal w writes to;
// ok is false when w is not a terminal.
func terminalSize(w io.Writer) (width, height int, ok bool) {
	f, isFile := w.(*os.File)
	if !isFile {
		return 0, 0, false
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil || ws.Col == 0 || ws.Row == 0 {
		return 0, 0, false
	}
	return int(ws.Col), int(ws.Row), true
}
