package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGoneFileSaysWhatIsUnanswered: a counted answers file that is gone
// while a hard link of it still answers its prompts is said to leave none
// unanswered (counted once the link is read again), and query files no
// longer lists it; a gone file that was the only answer says its prompts
// are unanswered again. Before, both said "unanswered again", and query
// files listed the gone file with 0 lines.
func TestGoneFileSaysWhatIsUnanswered(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	raw := writeAnswered(t, dir)
	link := filepath.Join(dir, "D", "raw_responses.link.jsonl")
	if err := os.Link(raw, link); err != nil {
		t.Skip(err)
	}
	db := filepath.Join(t.TempDir(), "g.db")
	env := testEnv(nil)
	mustGendex(t, env, "--db", db, "ingest", dir)
	os.Remove(raw)
	r := mustGendex(t, env, "--db", db, "ingest", dir)
	if strings.Contains(r.stderr, "unanswered again") || !strings.Contains(r.stderr, raw+": the file is gone: its 3 records are forgotten; the 3 prompts they answered are all still answered, by other files") {
		t.Errorf("the gone file's warning is not what the index holds:\n%s", r)
	}
	if p := mustGendex(t, env, "--db", db, "query", "progress", "--format", "tsv"); !strings.Contains(p.stdout, "D\t3\t3\t") {
		t.Errorf("progress after the file went: %s", p)
	}
	f := mustGendex(t, env, "--db", db, "query", "files", "--format", "tsv")
	if strings.Contains(f.stdout, raw+"\t") || !strings.Contains(f.stdout, link+"\t3\t3\t") {
		t.Errorf("query files lists the gone file, or not its link:\n%s", f)
	}
	// The link gone too: now its prompts are unanswered.
	os.Remove(link)
	r = mustGendex(t, env, "--db", db, "ingest", dir)
	if !strings.Contains(r.stderr, link+": the file is gone: its 3 records are forgotten, and the 3 prompts they answered are unanswered again") {
		t.Errorf("the last answers' file gone: %s", r)
	}
}
