//go:build !unix

package format

import "os"

// TerminalSize returns 0, 0 (unknown) where the terminal's size is not
// read: output is fitted to $COLUMNS there, or not at all.
func TerminalSize(fd uintptr) (cols, rows int) { return 0, 0 }

// NotifyResize does nothing where there is no SIGWINCH.
func NotifyResize(c chan<- os.Signal) {}
