//go:build !unix

package terminal

import "os"

// Size returns 0, 0 (unknown) where the terminal's size is not
// read: output is fitted to $COLUMNS there, or not at all.
func Size(fd uintptr) (cols, rows int) { return 0, 0 }

// NotifyResize does nothing where there is no SIGWINCH.
func NotifyResize(c chan<- os.Signal) {}
