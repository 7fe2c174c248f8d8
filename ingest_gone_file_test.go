package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// writeAnswered writes dir/D with prompts p1..p3 and their answers in
// raw_responses.jsonl, and returns that file's path.
func writeAnswered(t *testing.T, dir string) string {
	t.Helper()
	d := filepath.Join(dir, "D")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	writePrompts(t, d, `{"id":"p1","text":"a"}`+"\n"+`{"id":"p2","text":"b"}`+"\n"+`{"id":"p3","text":"c"}`+"\n")
	raw := filepath.Join(d, "raw_responses.jsonl")
	os.WriteFile(raw, []byte(`{"id":"p1","text":"x","completion_tokens":3}`+"\n"+`{"id":"p2","text":"y","completion_tokens":4}`+"\n"+`{"id":"p3","text":"z","completion_tokens":5}`+"\n"), 0o644)
	return raw
}

// TestGoneFileSaysWhatIsUnanswered: a counted answers file that is gone
// while a hard link of it still answers its prompts is said to leave none
// unanswered (counted once the link is read again), and query files no
// longer lists it; a gone file that was the only answer says its prompts
// are unanswered again. Before, both said "unanswered again", and query
// files listed the gone file with 0 lines.
func TestGoneFileSaysWhatIsUnanswered(t *testing.T) {
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

// TestDryRunOverDryRunNamesTheRule: a dry run whose dataset's answers
// the index holds from another dry run's folder says the rule that drops
// them (one answer folder counts for a dataset: this run's, named), not
// that "a dry run never stands in for this run", which is one.
func TestDryRunOverDryRunNamesTheRule(t *testing.T) {
	dir := genPrompts(t, 2)
	db := filepath.Join(t.TempDir(), "g.db")
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	env := testEnv(nil)
	mustGendex(t, env, "--db", db, "gen", "--server", "sim", "--out", a, dir)
	r := mustGendex(t, env, "--db", db, "gen", "--server", "sim", "--out", b, dir)
	name := filepath.Base(dir)
	want := "the index counts one answer folder for a dataset, this run's (" + filepath.Join(b, name) + "): it forgets the simulator's 2 answers in " + filepath.Join(a, name)
	if strings.Contains(r.stderr, "never stands in") || !strings.Contains(r.stderr, want) {
		t.Errorf("the second dry run's log does not name the rule:\n%s\nwant %q", r.stderr, want)
	}
}

// TestRedoConversationIsItsOwnTurns: a redo of the answers cut at the
// limit takes "a" for a conversation only when its own turns (a#1, ...)
// are in the index, not those of a conversation whose id begins "a#":
// "a", cut at this run's limit, is not asked again. Before, a#x's turns
// made "a" a conversation, asked again for no reason.
func TestRedoConversationIsItsOwnTurns(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "D")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(`{"id":"a","text":"Say hello."}`+"\n"+
		`{"id":"a#x","conversations":[{"from":"human","value":"Hi."},{"from":"human","value":"And again?"}]}`+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), []byte(`{"id":"a","text":"Hello there","completion_tokens":4,"prompt_tokens":3,"finish_reason":"length","model":"sim-model","simulated":true}`+"\n"), 0o644)
	db := filepath.Join(t.TempDir(), "g.db")
	env := testEnv(nil)
	mustGendex(t, env, "--db", db, "gen", "--server", "sim", "--max-new-tokens", "8", dir) // a#x, turn by turn
	if _, err := os.Stat(filepath.Join(dir, "turns.jsonl")); err != nil {
		t.Fatalf("a#x was not answered turn by turn: %v", err)
	}
	r := mustGendex(t, env, "--db", db, "gen", "--server", "sim", "--max-new-tokens", "4", "--redo", "truncated", dir)
	if strings.Contains(r.stderr, "conversations") && strings.Contains(r.stderr, "asked again (") || !strings.Contains(r.stderr, "none of the answers cut at the token limit is asked again") {
		t.Errorf("a redo at a's own limit:\n%s", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "raw_responses.jsonl")); strings.Contains(string(b), `"redo":true`) {
		t.Errorf("a was asked again:\n%s", b)
	}
}

// TestSpecNoteNamesRealCommands: every gendex command query spec's note
// names runs (an unknown command is a usage error, exit 2). Before, it
// named "gendex series --servers", which does not exist.
func TestSpecNoteNamesRealCommands(t *testing.T) {
	dir := t.TempDir()
	writeAnswered(t, dir)
	db := filepath.Join(t.TempDir(), "g.db")
	env := testEnv(nil)
	mustGendex(t, env, "--db", db, "ingest", dir)
	r := mustGendex(t, env, "--db", db, "query", "spec")
	note := r.stdout + r.stderr
	cmds := regexp.MustCompile(`gendex [a-z]+(?: [a-z]+)*(?: --[a-z]+(?: [0-9a-z]+)?)*`).FindAllString(note, -1)
	if len(cmds) < 3 {
		t.Fatalf("the note names %d commands, want those it gives (query server, query series, plot accept):\n%s", len(cmds), note)
	}
	for _, c := range cmds {
		args := append([]string{"--db", db}, strings.Fields(c)[1:]...)
		if got := gendex(t, env, args...); got.code == 2 {
			t.Errorf("the note names %q, which is no command: %s", c, got)
		}
	}
}
