package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A resume with --prompt over a dataset whose answers were read by gen's
// keys is one way with them when no prompt line holds a prompt for both
// rules at other places: the lines gen's keys could not read, read at the
// key --prompt names (check's unanswered fix). Over lines that hold a
// prompt for both, it is still refused, exit 5, naming both sides. (Before,
// every resume with another --prompt was refused, check's printed fix
// among them.)

// TestPromptResumeReadsUnreadLines: on multi-turn ShareGPT (system turns,
// 1 to 3 human turns) with one line whose prompt is at data.prompt, check's
// fix (gen --prompt data.prompt) answers that line; check then counts the
// dataset made one way, the rule named "gen's keys; else data.prompt", and
// a plain resume after it is one way with both. A line appended with a
// prompt at both conversations and data.prompt makes the same --prompt
// resume refused, naming both rules and the line, with nothing sent.
func TestPromptResumeReadsUnreadLines(t *testing.T) {
	t.Parallel()
	url := startSimProcess(t, gendexBinary(t), "--context", "2048")
	db, root, _ := genFailing(t, 4, "--server", url)
	dir := filepath.Join(root, "sharegpt")
	r := gendex(t, testEnv(nil), "--db", db, "check", "--format", "json", "sharegpt")
	fix := checkFix(t, r.stdout, "unanswered")
	args := append([]string{"--db", db}, strings.Fields(strings.TrimPrefix(strings.Replace(fix, "URL", url, 1), "gendex "))...)
	if r := gendex(t, testEnv(nil), args...); r.code != 0 {
		t.Fatalf("check's fix %q, run: %s", fix, r)
	}
	const rule = `gen.prompt="input_ids, text, messages or conversations; else data.prompt"`
	oneWay := func(answers string) {
		t.Helper()
		out := oneLine(gendex(t, testEnv(nil), "--db", db, "check", dir).stdout)
		if strings.Contains(out, "mixed_provenance") || !strings.Contains(out, "made_by "+answers) || !strings.Contains(out, rule) {
			t.Errorf("check: want made_by %s, one way, with %s\n%s", answers, rule, out)
		}
	}
	oneWay("5")

	appendPrompts(t, dir, sharegptLines(10, 2))
	if r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, dir); r.code != 0 {
		t.Fatalf("a plain resume after the --prompt one: %s", r)
	}
	oneWay("7")

	appendPrompts(t, dir, []string{`{"id":"both","conversations":[{"from":"human","value":"hi"}],"data":{"prompt":"hello"}}`,
		`{"id":"odd2","data":{"prompt":"what is three and four?"}}`})
	before, _ := os.ReadFile(filepath.Join(dir, "raw_responses.jsonl"))
	r = gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--prompt", "data.prompt", dir)
	for _, want := range []string{`"input_ids, text, messages or conversations" before, "data.prompt" now`,
		"1 prompt line holds a prompt for both rules, at other keys (the first: " + filepath.Join(dir, "prompts.jsonl") + ":9, at conversations before, at data.prompt now)",
		"nothing was sent"} {
		if r.code != 5 || !strings.Contains(oneLine(r.stderr), want) {
			t.Errorf("--prompt data.prompt over a line with a prompt at both: want exit 5 saying %q\n%s", want, r)
		}
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "raw_responses.jsonl")); string(after) != string(before) {
		t.Error("the refused resume wrote answers")
	}
}

// TestPromptResumeOverAnsweredLineRefused: when a line the first run
// answered by gen's keys holds a prompt at data.prompt too, check's fix
// for the line only data.prompt holds is refused, exit 5, naming both
// rules and that line: the --prompt would read the answered line
// otherwise.
func TestPromptResumeOverAnsweredLineRefused(t *testing.T) {
	t.Parallel()
	dir := writeDataset(t, "ds", append(sharegptLines(1, 3),
		`{"id":"c9","conversations":[{"from":"system","value":"Be brief."},{"from":"human","value":"why?"}],"data":{"prompt":"why not?"}}`,
		`{"id":"odd","data":{"prompt":"what is two and two?"}}`))
	db := filepath.Join(t.TempDir(), "g.db")
	if r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", dir); r.code != 1 || len(answerIDs(t, dir)) != 4 {
		t.Fatalf("first run: want the 4 conversations answered, odd not sent (exit 1)\n%s", r)
	}
	r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--prompt", "data.prompt", dir)
	want := `gen.prompt: "input_ids, text, messages or conversations" before, "data.prompt" now; 1 prompt line holds a prompt for both rules, at other keys (the first: ` +
		filepath.Join(dir, "prompts.jsonl") + ":4, at conversations before, at data.prompt now)"
	if r.code != 5 || !strings.Contains(oneLine(r.stderr), want) || len(answerIDs(t, dir)) != 4 {
		t.Errorf("want exit 5 saying %q, nothing answered\n%s", want, r)
	}
}

// TestPromptResumeTheOtherWay: a first run with --prompt data.prompt
// leaves the ShareGPT conversations (1 to 3 human turns, system turns) to
// go; check's fix for them (gen without --prompt) answers them, and check
// counts the dataset made one way, its rule "data.prompt; else gen's
// keys" (the first run's answers, of text prompts, say no --turns: no
// difference).
func TestPromptResumeTheOtherWay(t *testing.T) {
	t.Parallel()
	dir := writeDataset(t, "ds", append(sharegptLines(1, 3),
		`{"id":"q1","data":{"prompt":"what is two and two?"}}`, `{"id":"q2","data":{"prompt":"name a colour."}}`))
	db := filepath.Join(t.TempDir(), "g.db")
	if r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--prompt", "data.prompt", dir); r.code != 1 || len(answerIDs(t, dir)) != 2 {
		t.Fatalf("first run: want the 2 data.prompt lines answered, the conversations not sent (exit 1)\n%s", r)
	}
	fix := checkFix(t, gendex(t, testEnv(nil), "--db", db, "check", "--format", "json", dir).stdout, "unanswered")
	if fix != "gendex gen --server URL "+dir {
		t.Fatalf("check's unanswered fix: %q", fix)
	}
	r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", dir)
	if r.code != 0 || len(answerIDs(t, dir)) != 5 || !strings.Contains(oneLine(r.stderr), `one way, this run's answers record "data.prompt; else input_ids, text, messages or conversations"`) {
		t.Fatalf("check's fix, run: want the 3 conversations answered, gen saying the rule it records\n%s", r)
	}
	out := oneLine(gendex(t, testEnv(nil), "--db", db, "check", dir).stdout)
	const rule = `gen.prompt="data.prompt; else input_ids, text, messages or conversations"`
	if strings.Contains(out, "mixed_provenance") || !strings.Contains(out, "made_by 5") || !strings.Contains(out, rule) {
		t.Errorf("check: want made_by 5, one way, with %s\n%s", rule, out)
	}
}
