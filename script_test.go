package main

import (
	"path/filepath"
	"testing"
)

// shScript writes a shell script at path and returns the command line that
// runs it: "sh PATH". Tests run the scripts they write through sh, which
// reads them, and never exec them: a child that a parallel test forks
// while the script is open for writing keeps it open so until its own
// exec, and the kernel refuses to exec a file open for writing (ETXTBSY,
// golang/go#22315); and the script's mode, which the umask decides, does
// not matter (issue 46: a pager.sh written 0755 once came out 0600).
func shScript(t *testing.T, path, script string) string {
	t.Helper()
	writeTestFile(t, path, script)
	return "sh " + filepath.Clean(path)
}
