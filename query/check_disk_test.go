package query_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest"
	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/store"
)

// TestCheckDiskStates: the disk check's states the commands' tests do not
// make. A last line without its newline is index_behind, its fix ending
// or cutting it at the indexed offset; a file forgotten and not read again
// (a writer stopped while it forgot it) is index_behind, its fix the
// re-read; answered by the process that holds the index for writing, the
// fix waits for that process instead. Without CheckReaders.FileChanged
// the disk is not looked at, and a note says so.
func TestCheckDiskStates(t *testing.T) {
	root := copyTree(t, fixtureRoot)
	path := filepath.Join(t.TempDir(), "index.db")
	db, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ingesttest.IndexInto(t, db, root)
	// The check's FileChanged: none at first, then ingest's.
	var changed func(store.FileState) (string, error)
	reasons := func(src query.Source, name string) map[string][2]string { // reason -> detail, fix
		t.Helper()
		q, err := query.Parse([]string{"check", name})
		if err != nil {
			t.Fatal(err)
		}
		q.Check.FileChanged = changed
		chk, err := query.Answer(src, q, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		out := map[string][2]string{}
		for _, r := range chk.Rows {
			reason, _ := chk.Get(r, "reason").(string)
			detail, _ := chk.Get(r, "detail").(string)
			fix, _ := chk.Get(r, "fix").(string)
			out[reason] = [2]string{detail, fix}
		}
		return out
	}
	if r, ok := reasons(db, "alpha")[query.ReasonDiskUnchecked]; !ok {
		t.Errorf("check without FileChanged: no %s note (%v)", query.ReasonDiskUnchecked, r)
	}
	changed = ingest.Changed

	prompts := filepath.Join(root, "alpha", "prompts.jsonl")
	fi, err := os.Stat(prompts)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(prompts, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"id":"half`)
	f.Close()
	tokenized := filepath.Join(root, "beta", "tokenized.jsonl")
	err = db.Update(func(tx *store.Tx) error {
		st, _, err := tx.File(tokenized)
		if err != nil {
			return err
		}
		_, err = tx.ForgetFile(&st)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	ro, err := store.Open(path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	got := reasons(ro, "alpha")[query.ReasonBehind]
	if want := fmt.Sprintf("truncate -s %d %s", fi.Size(), prompts); !strings.Contains(got[0], prompts+": a last line without a newline (11 bytes)") || !strings.Contains(got[1], want) {
		t.Errorf("a torn last line: %q, want it named and the fix to end it or cut it (%q)", got, want)
	}
	got = reasons(ro, "beta")[query.ReasonBehind]
	if !strings.Contains(got[0], tokenized+": forgotten and not read again") || got[1] != "gendex ingest --reread "+tokenized {
		t.Errorf("a file forgotten and not read again: %q, want it named and re-read", got)
	}
	ro.Close()

	rw, err := store.Open(path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	got = reasons(rw, "alpha")[query.ReasonBehind]
	if want := fmt.Sprintf("wait for the process that writes the index (pid %d)", os.Getpid()); !strings.HasPrefix(got[1], want) {
		t.Errorf("answered by the writer: fix %q, want it to start %q", got[1], want)
	}
}
