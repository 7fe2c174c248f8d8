package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// tokenSay says a token gendex made (no $GENDEX_TOKEN) where its user
// reads it and no log does. On a terminal the line that names it holds
// it. Off one (a batch job's output, such as slurm-%j.out, is often
// readable by the project group: the very users the token keeps out), it
// goes to a file only its owner can read, and the line names the file.
// The file lives beside the index (PATH is "<index>.<what>.token"): the
// index's folder is the user's, where they look for the run's files, and
// the name says which command's token it holds, so gen's and each
// gendex web's (what names the port) do not clash.
type tokenSay struct {
	terminal bool   // the line goes to a terminal
	path     string // the file, off a terminal
	written  string // the token the file holds, once written
}

// newTokenSay says tokens for the command serving what on index db; the
// line it names them in goes to a terminal when terminal is true.
func newTokenSay(terminal bool, db, what string) *tokenSay {
	return &tokenSay{terminal: terminal, path: absPath(db) + "." + what + ".token"}
}

// say returns how the line names token: the token itself on a terminal,
// else "$(cat PATH)", the file written first.
func (s *tokenSay) say(token string) (string, error) {
	if s.terminal {
		return token, nil
	}
	if err := writePrivate(s.path, token+"\n"); err != nil {
		return "", fmt.Errorf("keeping the token out of the log: %w (set GENDEX_TOKEN to a secret of yours, or run on a terminal)", err)
	}
	s.written = token
	return "$(cat " + s.path + ")", nil
}

// remove removes the file when it still holds the token written (best
// effort: a later run may have replaced it with its own).
func (s *tokenSay) remove() {
	if s.written == "" {
		return
	}
	if b, err := os.ReadFile(s.path); err == nil && string(b) == s.written+"\n" {
		os.Remove(s.path)
	}
}

// writePrivate writes data to a new file at path that only its owner can
// read from the instant it exists (created mode 0600, never chmod-ed
// after; a link there is not followed). A file of this user already there
// (an earlier run's, whatever its mode) is replaced by a new one; anything
// else there (another user's file, a link, a folder) is refused.
func writePrivate(path, data string) error {
	create := func() (*os.File, error) {
		return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	}
	f, err := create()
	if errors.Is(err, fs.ErrExist) {
		fi, lerr := os.Lstat(path)
		if lerr != nil {
			return lerr
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !fi.Mode().IsRegular():
			return fmt.Errorf("%s is in the way (%s, not a file): remove it", path, kind(fi.Mode()))
		case !ok || int(st.Uid) != os.Geteuid():
			return fmt.Errorf("%s is in the way (a file not yours): remove it", path)
		}
		if err := os.Remove(path); err != nil {
			return err
		}
		f, err = create() // O_EXCL: a file another put there meanwhile is refused
	}
	if err != nil {
		return err
	}
	if _, err := f.WriteString(data); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	return f.Close()
}

// kind names what a file that is not a plain one is.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a link"
	case m.IsDir():
		return "a folder"
	}
	return "a special file"
}
