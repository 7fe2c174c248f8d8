//go:build !unix

package gen

import "os"

// terminalSize returns 0, 0 (unknown) where the terminal's size is not
// read: the live lines are not fitted there.
func terminalSize(fd uintptr) (cols, rows int) { return 0, 0 }

// notifyResize does nothing where there is no SIGWINCH.
func notifyResize(c chan<- os.Signal) {}
