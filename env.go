package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/mattn/go-isatty"

	"gendex/store/terminal"
)

// Env is everything a command touches outside its arguments, so tests can
// run commands with buffers and a fixed clock.
type Env struct {
	Stdin                          io.Reader
	Stdout, Stderr                 io.Writer
	StdinTTY, StdoutTTY, StderrTTY bool
	Getenv                         func(string) string
	Now                            func() time.Time
}

// isTerminal reports whether f is a terminal (main decides it once for
// each of stdin, stdout and stderr).
func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// messages returns where a command's own messages go: env.Stderr, each
// line broken between words at the terminal's width (read at each write,
// so a resize is followed) when stderr is a terminal.
func messages(env *Env) io.Writer {
	if f, ok := env.Stderr.(*os.File); ok && env.StderrTTY {
		return wrappedTerminal{f}
	}
	return env.Stderr
}

type wrappedTerminal struct{ f *os.File }

// cols is the terminal's width now (0: unknown).
func cols(f *os.File) int {
	n, _ := terminal.Size(f.Fd())
	return n
}

func (w wrappedTerminal) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.f, terminal.WrapLines(string(p), cols(w.f)-1)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// startProfile writes a CPU profile of the whole process to
// $GENDEX_CPUPROFILE when it is set (for measuring: go tool pprof gendex
// FILE); the returned func ends it.
func startProfile(env *Env) (stop func()) {
	path := env.Getenv("GENDEX_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "gendex: $GENDEX_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}
