package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSamplesCountedBeforeTheFirstAnswer: gen --samples 3 records its N
// as it starts, so every reader counts a dataset's samples before any
// answer names them. Killed while its server answers nothing, on token
// ids and on three-turn conversations: progress says samples 3 and 3
// answers owed per prompt, missing names each (id, sample), and check's
// unanswered fix asks --samples 3. Before, the index learned N from the
// answers alone: progress said 1 sample, and check's fix, pasted as
// printed, answered the dataset at 1 sample per prompt beside its
// siblings' 3.
func TestSamplesCountedBeforeTheFirstAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	addr := freeAddr(t)
	server := startSimAt(t, bin, addr, "--slots", "4")
	server.Signal(syscall.SIGSTOP) // it takes connections and answers none
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "O"), "O", 5)
	writeConversationPrompts(t, filepath.Join(root, "C"), "C", 4, 3)
	db := filepath.Join(t.TempDir(), "g.db")
	gen := startGendex(t, bin, "", "--db", db, "gen", "--server", "http://"+addr, "--api", "chat", "--samples", "3", root)
	type row struct {
		Dataset    string
		Prompts    int
		Samples    int
		MissingRaw int `json:"missing_raw"`
	}
	counted := func() bool {
		rows, err := queryJSON[row](t, bin, db, "progress")
		if err != nil || len(rows) != 2 {
			return false
		}
		for _, r := range rows {
			if r.Samples != 3 || r.MissingRaw != 3*r.Prompts {
				return false
			}
		}
		return true
	}
	waitFor(t, time.Minute, "progress to count 3 samples of each prompt owed while gen runs", counted)
	gen.Kill()
	gen.Wait()
	if !counted() {
		rows, err := queryJSON[row](t, bin, db, "progress")
		t.Errorf("progress after gen is gone: %+v %v; want samples 3 and 3 answers owed per prompt", rows, err)
	}
	out := mustRunGendex(t, bin, "--db", db, "query", "missing", "C", "--format", "tsv", "--no-header")
	if n := strings.Count(out, "\n"); n != 12 || !strings.Contains(out, "C-00002\t2\n") {
		t.Errorf("missing C: %d lines; want each of 4 prompts' 3 samples:\n%s", n, out)
	}
	code, stdout, _ := runGendex(t, bin, "", "--db", db, "check", root)
	if code != 1 || !strings.Contains(stdout, "--samples 3") {
		t.Errorf("check: exit %d; want 1, its unanswered fix asking --samples 3:\n%s", code, stdout)
	}
}
