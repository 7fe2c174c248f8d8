package query

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gendex/store"
)

// The disk check: before any verdict, every file the index counts for a
// dataset is compared with the disk. A file the index no longer describes
// (gone, cut, replaced, rewritten, an answer line edited in place) or one
// with lines it has not read (appended to, forgotten and not read again)
// makes the dataset not ready: a stale index is never "ready". Whether a
// file changed is ingest's own decision (CheckReaders.FileChanged), the
// one every writer takes when it opens the index; an answer file written
// since it was read also has each answer line it holds compared with the
// CRC the index keeps of it.

// The disk check's reasons.
const (
	ReasonBehind        = "index_behind"     // lines on disk the index has not read
	ReasonChanged       = "files_changed"    // files no longer what the index read
	ReasonUnreadable    = "files_unreadable" // files the check could not look at
	ReasonDiskUnchecked = "disk_unchecked"   // the files were not compared with the disk (a note)
)

// A diskNote is what the disk check says of one file: why it is behind
// or changed, and the command that mends it when the index is free.
type diskNote struct {
	path, why, fix string
}

// diskFindings is what the disk check found, by reason.
type diskFindings struct {
	behind, changed, unreadable []diskNote
}

// checkDisk compares every file the index counts for dataset name with
// the disk (see the top of this file), each file by changed
// (CheckReaders.FileChanged; nil: a note says the disk was not compared).
func checkDisk(v *store.View, name string, changed func(store.FileState) (string, error)) ([]finding, error) {
	if changed == nil {
		return []finding{{reason: ReasonDiskUnchecked, detail: "the files were not compared with the disk: this reader of the index cannot"}}, nil
	}
	var d diskFindings
	written := map[uint32]*lineCheck{} // answer files written since they were read
	err := v.Files(func(f store.FileState) error {
		if f.Dataset != name {
			return nil
		}
		if lc := d.lookAt(v, f, changed); lc != nil {
			written[f.ID] = lc
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := checkLines(v, name, written); err != nil {
		return nil, err
	}
	for _, lc := range written {
		if lc.bad > 0 {
			d.changed = append(d.changed, diskNote{path: lc.path, why: lc.why(), fix: rereadCommand(lc.path)})
		}
	}
	return d.findings(writerOf(v)), nil
}

// lookAt sorts one file of the dataset into d; it returns the file's
// line check when the file is an answer file written since it was read
// (its lines are then compared with their CRCs), nil otherwise.
func (d *diskFindings) lookAt(v *store.View, f store.FileState, changed func(store.FileState) (string, error)) *lineCheck {
	if f.Phase == store.PhaseForgetting || f.ID == 0 && v.IsUnread(f.Path) {
		d.behind = append(d.behind, diskNote{path: f.Path, why: "forgotten and not read again since: the index lacks its lines", fix: rereadCommand(f.Path)})
		return nil
	}
	if f.ID == 0 { // forgotten as gone, and not read since: nothing of it is counted
		if fi, err := os.Stat(f.Path); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
			d.behind = append(d.behind, diskNote{path: f.Path, why: fmt.Sprintf("a file the index counts nothing of (%d bytes)", fi.Size()), fix: ingestCommand(f)})
		}
		return nil
	}
	why, err := changed(f)
	var fi os.FileInfo
	if err == nil && why == "" {
		fi, err = os.Stat(f.Path)
	}
	switch {
	case err != nil:
		d.unreadable = append(d.unreadable, diskNote{path: f.Path, why: err.Error()})
		return nil
	case why != "":
		if _, err := os.Stat(f.Path); errors.Is(err, os.ErrNotExist) {
			why += " (if its folder moved: gendex relocate OLD_FOLDER NEW_FOLDER keeps what was read)"
		}
		d.changed = append(d.changed, diskNote{path: f.Path, why: why, fix: rereadCommand(f.Path)})
		return nil
	}
	if fi.Size() > f.Offset {
		past, torn, err := pastOffset(f.Path, f.Offset, fi.Size())
		if err != nil {
			d.unreadable = append(d.unreadable, diskNote{path: f.Path, why: err.Error()})
			return nil
		}
		fix := ingestCommand(f)
		if torn {
			fix = fmt.Sprintf("echo >> %s if its last line is whole, then %s; else truncate -s %d %s", quoteArg(f.Path), fix, f.Offset, quoteArg(f.Path))
		}
		d.behind = append(d.behind, diskNote{path: f.Path, why: past, fix: fix})
	}
	if (f.Stage == store.Raw || f.Stage == store.Turns) && (fi.Size() != f.Size || fi.ModTime().UnixNano() != f.ModTime) {
		return &lineCheck{path: f.Path}
	}
	return nil
}

// pastMax is how much of what lies past a file's offset is read to count
// its lines.
const pastMax = 16 << 20

// pastOffset says what lies between off and size in the file at path:
// how many lines, and torn when it is only a line without its newline
// (which no reader indexes until it ends).
func pastOffset(path string, off, size int64) (what string, torn bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	n := min(size-off, pastMax)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return "", false, err
	}
	lines := bytes.Count(buf, []byte{'\n'})
	switch {
	case n < size-off:
		return fmt.Sprintf("%d bytes past where it was read (%s and more)", size-off, lineCount(lines)), false, nil
	case lines == 0:
		return fmt.Sprintf("a last line without a newline (%d bytes), not read until it ends", n), true, nil
	case buf[n-1] != '\n':
		return fmt.Sprintf("%s past where it was read, then a line without a newline (%d bytes in all)", lineCount(lines), n), false, nil
	}
	return fmt.Sprintf("%s past where it was read (%d bytes)", lineCount(lines), n), false, nil
}

// lineCount is "1 line" or "N lines".
func lineCount(n int) string {
	if n == 1 {
		return "1 line"
	}
	return fmt.Sprintf("%d lines", n)
}

// A lineCheck is the comparison of one answer file's lines with the CRCs
// the index keeps of them.
type lineCheck struct {
	path       string
	f          *os.File
	err        error // opening it
	lines, bad uint64
	first      int64 // the first line that differs
}

func (lc *lineCheck) why() string {
	if lc.err != nil {
		return fmt.Sprintf("its answer lines cannot be read (%v)", lc.err)
	}
	return fmt.Sprintf("%d of its %d answer lines differ from what the index read (the first at line %d): edited in place", lc.bad, lc.lines, lc.first)
}

// checkLines compares each answer line of the files in written (by file
// id) with the CRC the index keeps of it, at its offset.
func checkLines(v *store.View, name string, written map[uint32]*lineCheck) error {
	if len(written) == 0 {
		return nil
	}
	defer func() {
		for _, lc := range written {
			if lc.f != nil {
				lc.f.Close()
			}
		}
	}()
	for _, stage := range []store.Stage{store.Raw, store.Turns} {
		err := v.Each(name, stage, func(r *store.Record) error {
			lc := written[r.File]
			if lc == nil {
				return nil
			}
			if lc.f == nil && lc.err == nil {
				lc.f, lc.err = os.Open(lc.path)
			}
			lc.lines++
			if lc.err == nil && sameLine(lc.f, r) {
				return nil
			}
			if lc.bad++; lc.first == 0 || r.Line < lc.first {
				lc.first = r.Line
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// sameLine reports whether f holds r's line at its offset, as indexed.
func sameLine(f *os.File, r *store.Record) bool {
	line := make([]byte, r.Length)
	_, err := f.ReadAt(line, r.Offset)
	return err == nil && store.LineSum(line) == r.Sum
}

// writerOf names the process that holds the index for writing when it is
// the one answering (gen or ingest: see store.View.Writing), "" when the
// index is read by a reader alone.
func writerOf(v *store.View) string {
	if !v.Writing() {
		return ""
	}
	who := fmt.Sprintf("the process that writes the index (pid %d)", os.Getpid())
	_ = v.Runs(func(r *store.Run) error {
		if r.Held && !r.Ended() {
			kind := r.Kind
			if kind == "follow" {
				kind = "ingest --follow"
			}
			who = fmt.Sprintf("the %s run that writes the index (pid %d)", kind, r.Pid)
		}
		return nil
	})
	return who
}

// findings makes d's reasons. A writer that holds the index (writer, its
// name) reads what is appended as it goes: lines past what it has
// committed are behind for a moment, and their fix is to wait; a changed
// file's fix waits for it to end (the index is its until then).
func (d *diskFindings) findings(writer string) []finding {
	var fs []finding
	if len(d.changed) > 0 {
		fix := fixOf(d.changed)
		if writer != "" { // a writer replaces its own files too (export's rewrite), and reads them again
			fix = "wait for " + writer + " to end, then gendex check again; if they are still named: " + fix
		}
		fs = append(fs, finding{reason: ReasonChanged, blocks: true, count: uint64(len(d.changed)),
			detail: "files no longer what the index read: " + notesOf(d.changed), fix: fix})
	}
	if len(d.behind) > 0 {
		detail, fix := "files with lines the index has not read: "+notesOf(d.behind), fixOf(d.behind)
		if writer != "" {
			detail += "; " + writer + " reads what is written as it goes"
			fix = "wait for " + writer + " to read them (gendex query runs), then gendex check again"
		}
		fs = append(fs, finding{reason: ReasonBehind, blocks: true, count: uint64(len(d.behind)), detail: detail, fix: fix})
	}
	if len(d.unreadable) > 0 {
		fs = append(fs, finding{reason: ReasonUnreadable, blocks: true, count: uint64(len(d.unreadable)),
			detail: "files the check could not look at: " + notesOf(d.unreadable),
			fix:    "make them readable to this user (or mount their disk), then gendex check again"})
	}
	return fs
}

// notesMax is how many files a reason names; the rest are counted.
const notesMax = 5

// notesOf names the files of ns with what the check found of each.
func notesOf(ns []diskNote) string {
	sort.Slice(ns, func(i, j int) bool { return ns[i].path < ns[j].path })
	var parts []string
	for i, n := range ns {
		if i == notesMax {
			parts = append(parts, fmt.Sprintf("and %d more", len(ns)-notesMax))
			break
		}
		parts = append(parts, n.path+": "+n.why)
	}
	return strings.Join(parts, "; ")
}

// fixOf is the commands that mend ns: each file's, the re-reads joined
// in one.
func fixOf(ns []diskNote) string {
	var reread, others []string
	seen := map[string]bool{}
	for _, n := range ns {
		switch {
		case n.fix == rereadCommand(n.path):
			reread = append(reread, quoteArg(n.path))
		case !seen[n.fix]:
			seen[n.fix] = true
			others = append(others, n.fix)
		}
	}
	if len(reread) > 0 {
		others = append(others, "gendex ingest --reread "+strings.Join(reread, " "))
	}
	return strings.Join(others, "; ")
}

// rereadCommand is the command that makes the index forget the file at
// path and read it again whole (or forget it, when it is gone).
func rereadCommand(path string) string { return "gendex ingest --reread " + quoteArg(path) }

// ingestCommand is the command that reads what is new in f's file into
// f's dataset and stage: `gendex ingest FILE` when its folder and name
// say them (as ingest names a file), with --dataset and --stage when not.
func ingestCommand(f store.FileState) string {
	base, prefix := filepath.Base(f.Path), f.Stage.String()
	if f.Stage == store.Raw {
		prefix = "raw_responses"
	}
	if f.Dataset == filepath.Base(filepath.Dir(f.Path)) && strings.HasPrefix(base, prefix) && strings.HasSuffix(base, ".jsonl") {
		return "gendex ingest " + quoteArg(f.Path)
	}
	return fmt.Sprintf("gendex ingest --dataset %s --stage %s %s", quoteArg(f.Dataset), f.Stage, quoteArg(f.Path))
}

// quoteArg quotes s for a POSIX shell when it needs it, so that a fix
// pastes as printed.
func quoteArg(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:=@%+,-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
