//go:build !unix

package shell

import "os"

// TerminalWidth returns 0 (unknown) where the terminal's size is not read:
// tables are fitted to $COLUMNS there, or not at all.
func TerminalWidth(fd uintptr) int { return 0 }

// notifyResize does nothing where there is no SIGWINCH.
func notifyResize(c chan<- os.Signal) {}
