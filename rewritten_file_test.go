package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rewriteRun is a gen run over the demo's B1_ids prompts by the built-in
// simulator, in its own folder, for a test that rewrites its answers.
type rewriteRun struct {
	t                   *testing.T
	bin, dir, db, out   string
	prompts, answerFile string
}

func newRewriteRun(t *testing.T) *rewriteRun {
	t.Helper()
	bin := gendexBinary(t)
	dir := t.TempDir()
	prompts := filepath.Join(dir, "prompts", "B1_ids")
	if err := os.MkdirAll(prompts, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join("testdata", "demo", "B1_ids", "prompts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(prompts, "prompts.jsonl"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &rewriteRun{t: t, bin: bin, dir: dir, db: filepath.Join(dir, "g.db"), out: filepath.Join(dir, "out"), prompts: prompts}
	r.answerFile = filepath.Join(r.out, "B1_ids", "raw_responses.jsonl")
	if code, _, stderr := r.run("gen", "--server", "sim", "--max-new-tokens", "40", "--out", r.out, prompts); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, stderr)
	}
	return r
}

func (r *rewriteRun) run(args ...string) (int, string, string) {
	r.t.Helper()
	return runGendex(r.t, r.bin, "", append([]string{"--db", r.db}, args...)...)
}

// rewriteInPlace rewrites the answer file through its own inode (as a
// tool that annotates lines in place does): edit makes each line's new
// bytes from its index and bytes.
func (r *rewriteRun) rewriteInPlace(edit func(i int, line []byte) []byte) {
	r.t.Helper()
	data, err := os.ReadFile(r.answerFile)
	if err != nil {
		r.t.Fatal(err)
	}
	var out []byte
	for i, l := range bytes.SplitAfter(data, []byte("\n")) {
		if len(l) > 0 {
			out = append(out, edit(i, l)...)
		}
	}
	f, err := os.OpenFile(r.answerFile, os.O_WRONLY, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	if _, err := f.WriteAt(out, 0); err != nil {
		r.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		r.t.Fatal(err)
	}
}

// annotate adds a field to every line that starts after the file's first
// 4 KiB: the same inode, the same first bytes, a longer file. It returns
// the id of the last line it annotated (answers are in the order they
// finished, so no id is known to be past 4 KiB before the file is read).
func (r *rewriteRun) annotate() (lastID string) {
	at := 0
	r.rewriteInPlace(func(_ int, l []byte) []byte {
		start := at
		at += len(l)
		if start < 4096 {
			return l
		}
		var line struct{ ID string }
		if err := json.Unmarshal(l, &line); err != nil {
			r.t.Fatalf("%s: %v", r.answerFile, err)
		}
		lastID = line.ID
		return bytes.Replace(l, []byte("{"), []byte(`{"note":"checked",`), 1)
	})
	if lastID == "" {
		r.t.Fatalf("%s: no line starts past its first 4 KiB", r.answerFile)
	}
	return lastID
}

// checkExport checks that export wrote one record or exclusion for each of
// the 50 answers, each line the answer's, and said nothing of records it
// did not write.
func (r *rewriteRun) checkExport(code int, stderr string) {
	r.t.Helper()
	if code != 0 {
		r.t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	seen := map[string]int{}
	for _, name := range []string{"tokenized.jsonl", "excluded.jsonl"} {
		for _, l := range jsonLines(r.t, filepath.Join(r.dir, "x", "B1_ids", name)) {
			seen[idOfLine(r.t, l)]++
		}
	}
	answers := jsonLines(r.t, r.answerFile)
	for _, a := range answers {
		if id := idOfLine(r.t, a); seen[id] != 1 {
			r.t.Errorf("answer %s has %d records and exclusions, want 1", id, seen[id])
		}
	}
	if len(seen) != len(answers) || len(answers) != 50 {
		r.t.Errorf("%d ids exported for %d answers (want 50)\n%s", len(seen), len(answers), stderr)
	}
	if !strings.Contains(stderr, "export: B1_ids: 50 answers: ") {
		r.t.Errorf("export does not count the 50 answers:\n%s", stderr)
	}
}

// TestInPlaceRewriteIsReadAgain: a tool annotates the answers in place
// (the same inode and first 4 KiB, a longer file). query show's advice,
// gendex ingest, reads the file again (said once) and show gives the
// annotated line. Before, the file was taken as appended: a torn fragment
// was indexed, the old lines kept their old offsets, show said to run
// ingest, and ingest said it was unchanged.
func TestInPlaceRewriteIsReadAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	r := newRewriteRun(t)
	id := r.annotate() // a line past the first 4 KiB
	code, _, stderr := r.run("query", "show", "B1_ids", id)
	if code == 0 || !strings.Contains(stderr, "gendex ingest") {
		t.Errorf("show of a line that moved: exit %d, want an error that says to run gendex ingest\n%s", code, stderr)
	}
	code, _, stderr = r.run("ingest", r.out)
	if code != 0 || strings.Count(stderr, r.answerFile+": the file was rewritten in place") != 1 {
		t.Errorf("ingest after the rewrite: exit %d; want exit 0 and the file said once to be rewritten in place and read again\n%s", code, stderr)
	}
	code, stdout, stderr := r.run("query", "show", "B1_ids", id)
	if code != 0 || !strings.Contains(stdout, `"note":"checked","id":"`+id+`"`) {
		t.Errorf("show after ingest: exit %d, want the annotated line\n%s%s", code, stdout, stderr)
	}
	if code, stdout, _ := r.run("query", "datasets", "--no-header"); code != 0 || !strings.HasPrefix(stdout, "B1_ids\t2\t50\t50\t") {
		t.Errorf("the index holds %q, want the 50 answers once", stdout)
	}
	code, _, stderr = r.run("ingest", r.out)
	if code != 0 || strings.Contains(stderr, "rewritten") {
		t.Errorf("a second ingest: exit %d, want nothing read again\n%s", code, stderr)
	}
}

// TestExportReadsARewrittenFileAgain: export straight after the in-place
// rewrite finds it (the end of what was indexed changed), reads the file
// again, says so once, and writes a record or exclusion for each answer.
// Before, it said "wrote" 17 records, wrote none and failed, run after run.
func TestExportReadsARewrittenFileAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	r := newRewriteRun(t)
	r.annotate()
	code, _, stderr := r.run("export", "--format", "ids", "--out", filepath.Join(r.dir, "x"), r.out, filepath.Dir(r.prompts))
	if n := strings.Count(stderr, r.answerFile+": the file was rewritten in place"); n != 1 {
		t.Errorf("export said %d times that the file was rewritten in place, want once\n%s", n, stderr)
	}
	r.checkExport(code, stderr)
}

// TestExportReadsAgainALineNotIndexed: a rewrite that leaves both ends of
// what was indexed as they were (one line's field changed, the same
// length) is seen by export when it reads that line: it writes what it
// decided before, forgets the file, reads it again, says so once, and
// exports the rest. Before, it printed "wrote" for records it had not
// written and failed, run after run.
func TestExportReadsAgainALineNotIndexed(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	r := newRewriteRun(t)
	r.rewriteInPlace(func(i int, l []byte) []byte {
		if i == 20 {
			return bytes.Replace(l, []byte(`"reasoning_tokens":0`), []byte(`"reasoning_tokens":7`), 1)
		}
		return l
	})
	code, _, stderr := r.run("export", "--format", "ids", "--out", filepath.Join(r.dir, "x"), r.out, filepath.Dir(r.prompts))
	if n := strings.Count(stderr, r.answerFile+": line 21 is not the line the index holds"); n != 1 {
		t.Errorf("export said %d times that line 21 is not the line the index holds, want once\n%s", n, stderr)
	}
	r.checkExport(code, stderr)
}

// TestRelocatePassesOverForgottenFiles: a file the index forgot (it was
// deleted: nothing counted) does not stop relocate from moving the
// others. Before, relocate refused: the forgotten file was not at the new
// folder.
func TestRelocatePassesOverForgottenFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	t.Parallel()
	r := newRewriteRun(t)
	gone := filepath.Join(r.out, "notes", "raw_responses.jsonl")
	if err := os.MkdirAll(filepath.Dir(gone), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gone, []byte(`{"id":"n1","text":"x","completion_tokens":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := r.run("ingest", r.out); code != 0 {
		t.Fatalf("ingest: exit %d\n%s", code, stderr)
	}
	os.Remove(gone)
	if code, _, stderr := r.run("ingest", r.out); code != 0 || !strings.Contains(stderr, gone+": the file is gone") {
		t.Fatalf("ingest after the removal: exit %d, want the file forgotten\n%s", code, stderr)
	}
	moved := filepath.Join(r.dir, "moved")
	if err := os.Rename(r.out, moved); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := r.run("relocate", r.out, moved)
	if code != 0 || !strings.Contains(stderr, "relocated 1 files (50 records)") || !strings.Contains(stderr, "1 files the index had forgotten (no records) were passed over") {
		t.Fatalf("relocate: exit %d, want the answers moved and the forgotten file passed over\n%s", code, stderr)
	}
	code, _, stderr = r.run("ingest", moved)
	if code != 0 || !strings.Contains(stderr, "0 new records") {
		t.Errorf("ingest of the new folder: exit %d, want nothing read again\n%s", code, stderr)
	}
}
