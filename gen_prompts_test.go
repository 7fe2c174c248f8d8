package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"gendex/ingest/gen/sim"
)

// promptRecorder is a simulator that keeps the prompt of every generation
// request it gets, as text (token ids decoded, chat turns joined).
type promptRecorder struct {
	h       http.Handler
	mu      sync.Mutex
	prompts []string
}

func (pr *promptRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	switch r.URL.Path {
	case "/generate", "/v1/chat/completions", "/v1/completions":
		var b struct {
			Text     string `json:"text"`
			InputIDs []int  `json:"input_ids"`
			Messages []struct {
				Role, Content string
			} `json:"messages"`
		}
		json.Unmarshal(body, &b)
		text := b.Text + sim.Decode(b.InputIDs, true)
		for _, m := range b.Messages {
			text += "|" + m.Role + ":" + m.Content
		}
		if text != "" { // not a route's probe
			pr.mu.Lock()
			pr.prompts = append(pr.prompts, text)
			pr.mu.Unlock()
		}
	}
	pr.h.ServeHTTP(w, r)
}

func (pr *promptRecorder) sent() []string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return slices.Clone(pr.prompts)
}

func recordingSim(t *testing.T) (*promptRecorder, string) {
	t.Helper()
	pr := &promptRecorder{h: sim.New(sim.Config{Seed: 7}).Handler()}
	hs := httptest.NewServer(pr)
	t.Cleanup(hs.Close)
	return pr, hs.URL
}

// writeDataset writes lines (one JSON object each) as name/prompts.jsonl
// in a new root and returns the dataset folder.
func writeDataset(t *testing.T, name string, lines []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	writePrompts(t, dir, strings.Join(lines, "\n")+"\n")
	return dir
}

// nestedLines are n prompt lines that keep their id at meta.uid and
// their prompt under key (a string: text).
func nestedLines(n int, key string) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf(`{"meta":{"uid":"u%d","src":"web"},%q:"nested prompt %d"}`, i, key, i))
	}
	return out
}

// answerIDs returns the ids of the answers in dir's raw_responses.jsonl,
// sorted.
func answerIDs(t *testing.T, dir string) []string {
	t.Helper()
	var ids []string
	if _, err := os.Stat(filepath.Join(dir, "raw_responses.jsonl")); err != nil {
		return nil
	}
	for _, l := range jsonLines(t, filepath.Join(dir, "raw_responses.jsonl")) {
		var id string
		json.Unmarshal(l["id"], &id)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func uids(n int) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("u%d", i))
	}
	slices.Sort(out)
	return out
}

// TestGenUnreadableSetRefused: a set whose lines keep their prompt under a
// key gen does not read is refused before the first request: exit 1, the
// keys its lines have and the flags that read them said, nothing sent,
// nothing written to errors.jsonl, every prompt still missing (never
// "answered").
func TestGenUnreadableSetRefused(t *testing.T) {
	t.Parallel()
	pr, url := recordingSim(t)
	dir := writeDataset(t, "nested", nestedLines(40, "prompt"))
	db := filepath.Join(t.TempDir(), "g.db")
	r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, dir)
	if r.code != 1 {
		t.Errorf("exit %d; want 1\n%s", r.code, r)
	}
	for _, want := range []string{"none of its 40 prompt lines holds a prompt gen can send", "their keys are meta, prompt",
		"--prompt PATH", "e.g. --prompt prompt", "e.g. --id meta.uid", "no prompt was sent"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if strings.Contains(strings.ReplaceAll(r.stderr, "neither answered nor failed", ""), "answered") {
		t.Errorf("an unreadable set is called answered:\n%s", r.stderr)
	}
	if n := len(pr.sent()); n != 0 {
		t.Errorf("%d requests sent; want none", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "errors.jsonl")); err == nil {
		t.Error("errors.jsonl written: the prompts would be skipped by the run that reads them")
	}
	if out := mustGendex(t, testEnv(nil), "--db", db, "query", "missing", "nested", "--format", "tsv", "--no-header").stdout; strings.Count(out, "\n") != 40 {
		t.Errorf("missing after the refusal: %d lines; want 40", strings.Count(out, "\n"))
	}
}

// TestGenIDAndPromptPaths: gen --id and --prompt read a set that keeps
// its id and prompt under other keys: every prompt answered under its id,
// the prompt sent as it is (text, chat messages, ShareGPT conversations).
func TestGenIDAndPromptPaths(t *testing.T) {
	t.Parallel()
	pr, url := recordingSim(t)
	db := filepath.Join(t.TempDir(), "g.db")

	dir := writeDataset(t, "nested", nestedLines(40, "prompt"))
	r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--id", "meta.uid", "--prompt", "prompt", dir)
	if r.code != 0 || !strings.Contains(r.stderr, "nested: 40/40 answered (40 this run)") {
		t.Fatalf("--id meta.uid --prompt prompt: %s", r)
	}
	if got := answerIDs(t, dir); !slices.Equal(got, uids(40)) {
		t.Errorf("answer ids %v; want u1..u40", got)
	}
	sent := pr.sent()
	if len(sent) != 40 || !slices.ContainsFunc(sent, func(s string) bool { return strings.Contains(s, "nested prompt 17") }) {
		t.Errorf("%d requests, prompt 17 among them: %v", len(sent), slices.ContainsFunc(sent, func(s string) bool { return strings.Contains(s, "nested prompt 17") }))
	}
	// The id path is remembered for the prompts file: a run without
	// --id finds every prompt answered.
	if r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--prompt", "prompt", dir); r.code != 0 || !strings.Contains(r.stderr, "nothing to do") {
		t.Errorf("second run: %s", r)
	}

	// Chat messages and ShareGPT conversations at a nested path.
	chat := writeDataset(t, "chat", []string{
		`{"meta":{"uid":"c1"},"data":{"msgs":[{"role":"system","content":"be brief"},{"role":"user","content":"question one"}]}}`,
		`{"meta":{"uid":"c2"},"data":{"msgs":[{"from":"human","value":"question two"},{"from":"gpt","value":"old answer"}]}}`,
	})
	before := len(pr.sent())
	r = gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--api", "chat", "--id", "meta.uid", "--prompt", "data.msgs", chat)
	if r.code != 0 || !slices.Equal(answerIDs(t, chat), []string{"c1", "c2"}) {
		t.Fatalf("chat at data.msgs: %s\nids %v", r, answerIDs(t, chat))
	}
	got := pr.sent()[before:]
	slices.Sort(got)
	want := []string{"|system:be brief|user:question one", "|user:question two"}
	if !slices.Equal(got, want) {
		t.Errorf("chat prompts sent %q; want %q (the conversation's trailing answer dropped)", got, want)
	}
}

// TestGenAfterIngestID: after `ingest --id meta.uid` (the README's route
// for ids), gen's feeder reads the ids under the stored path and sends
// every prompt, answered under its id.
func TestGenAfterIngestID(t *testing.T) {
	t.Parallel()
	pr, url := recordingSim(t)
	db := filepath.Join(t.TempDir(), "g.db")
	dir := writeDataset(t, "nested", nestedLines(40, "text"))
	mustGendex(t, testEnv(nil), "--db", db, "ingest", "--id", "meta.uid", dir)
	r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, dir)
	if r.code != 0 || !strings.Contains(r.stderr, "nested: 40/40 answered (40 this run)") || len(pr.sent()) != 40 {
		t.Errorf("gen after ingest --id: %d sent\n%s", len(pr.sent()), r)
	}
	if got := answerIDs(t, dir); !slices.Equal(got, uids(40)) {
		t.Errorf("answer ids %v; want u1..u40", got)
	}
}

// TestIngestIDLeavesGenFiles: `ingest --id meta.uid` on a dataset folder
// applies the path to the prompts, never to gen's own answers and errors,
// which keep their "id": nothing skipped, nothing unanswered.
func TestIngestIDLeavesGenFiles(t *testing.T) {
	t.Parallel()
	_, url := recordingSim(t)
	db := filepath.Join(t.TempDir(), "g.db")
	var lines []string
	for i := 1; i <= 9; i++ {
		lines = append(lines, fmt.Sprintf(`{"id":"u%d","meta":{"uid":"u%d"},"text":"prompt %d"}`, i, i, i))
	}
	lines = append(lines, `{"id":"u10","meta":{"uid":"u10"},"text":"bad","max_new_tokens":-1}`) // an error of gen's
	dir := writeDataset(t, "nested", lines)
	mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", url, dir)
	if errs := jsonLines(t, filepath.Join(dir, "errors.jsonl")); len(errs) != 1 || string(errs[0]["id"]) != `"u10"` {
		t.Fatalf("errors.jsonl %v; want u10's", errs)
	}
	r := gendex(t, testEnv(nil), "--db", db, "ingest", "--id", "meta.uid", dir)
	if r.code != 0 || strings.Contains(r.stderr, "no id at meta.uid") {
		t.Errorf("ingest --id over gen's files: %s", r)
	}
	if out := mustGendex(t, testEnv(nil), "--db", db, "query", "missing", "nested", "--format", "tsv", "--no-header").stdout; out != "" {
		t.Errorf("missing after ingest --id over gen's files: %q; want none", out)
	}
	if out := mustGendex(t, testEnv(nil), "--db", db, "query", "errors", "nested", "--format", "tsv", "--no-header").stdout; !strings.Contains(out, "u10") {
		t.Errorf("errors after ingest --id over gen's files: %q; want u10's", out)
	}
}

// TestReplacedFileForgetsIDPath: a prompts file indexed with `ingest --id
// meta.uid`, then replaced (rewritten elsewhere and moved in place) by
// lines that keep their id at "id": the path given for the old file is
// forgotten, and said, and gen sends the new prompts under their ids.
func TestReplacedFileForgetsIDPath(t *testing.T) {
	t.Parallel()
	pr, url := recordingSim(t)
	db := filepath.Join(t.TempDir(), "g.db")
	dir := writeDataset(t, "nested", nestedLines(5, "text"))
	mustGendex(t, testEnv(nil), "--db", db, "ingest", "--id", "meta.uid", dir)
	tmp := filepath.Join(t.TempDir(), "rewritten.jsonl")
	os.WriteFile(tmp, []byte(`{"id":"x1","text":"fresh one"}`+"\n"+`{"id":"x2","text":"fresh two"}`+"\n"), 0o644)
	if err := os.Rename(tmp, filepath.Join(dir, "prompts.jsonl")); err != nil {
		t.Fatal(err)
	}
	r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, dir)
	if r.code != 0 || len(pr.sent()) != 2 || !strings.Contains(r.stderr, "--id path meta.uid given for it is forgotten") {
		t.Errorf("after the prompts file was replaced: %d sent\n%s", len(pr.sent()), r)
	}
	if ids := answerIDs(t, dir); !slices.Equal(ids, []string{"x1", "x2"}) {
		t.Errorf("answers %v; want x1 and x2", ids)
	}
}

// TestGenBadPromptPaths: a --id or --prompt path that matches no line of
// a dataset names the path and the keys the lines have, exits 2, and
// sends and indexes nothing.
func TestGenBadPromptPaths(t *testing.T) {
	t.Parallel()
	pr, url := recordingSim(t)
	dir := writeDataset(t, "nested", nestedLines(5, "prompt"))
	db := filepath.Join(t.TempDir(), "g.db")
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--id", "meta.nope", "--prompt", "prompt"}, []string{"--id meta.nope matches no line of dataset nested", "has the keys meta, prompt", "meta has the keys uid, src"}},
		{[]string{"--id", "meta.uid", "--prompt", "question"}, []string{"--prompt question holds no prompt in any line of dataset nested", "has the keys meta, prompt"}},
		{[]string{"--prompt", "meta"}, []string{"--prompt meta holds no prompt", "meta is an object"}},
		{[]string{"--id", "meta.uid", "--prompt", "prompt", "--export", "conversations"}, []string{"--export reads each prompt where gen's keys keep it", "jq -c '{id: .meta.uid, text: .prompt}'"}},
	} {
		args := append([]string{"--db", db, "gen", "--server", url}, tc.args...)
		r := gendex(t, testEnv(nil), append(args, dir)...)
		if r.code != 2 {
			t.Errorf("%v: exit %d; want 2\n%s", tc.args, r.code, r)
		}
		for _, w := range tc.want {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("%v: stderr lacks %q:\n%s", tc.args, w, r.stderr)
			}
		}
	}
	if n := len(pr.sent()); n != 0 {
		t.Errorf("%d requests sent; want none", n)
	}
	if _, err := os.Stat(db); err == nil {
		if r := gendex(t, testEnv(nil), "--db", db, "query", "progress", "--format", "tsv", "--no-header"); strings.Contains(r.stdout, "nested") {
			t.Errorf("the index holds the dataset after bad paths:\n%s", r.stdout)
		}
	}
}

// TestGenMixedShapes: a set whose lines mix shapes counts each line by
// what it is and says how many of each before the first request; the
// lines gen can send are answered, the others not sent (no errors.jsonl
// line) and still missing, and the run exits 1 saying so.
func TestGenMixedShapes(t *testing.T) {
	t.Parallel()
	pr, url := recordingSim(t)
	var lines []string
	for i := 1; i <= 10; i++ {
		lines = append(lines,
			fmt.Sprintf(`{"id":"t%d","text":"plain %d"}`, i, i),
			fmt.Sprintf(`{"id":"m%d","messages":[{"role":"user","content":"chat %d"}]}`, i, i),
			fmt.Sprintf(`{"id":"c%d","conversations":[{"from":"human","value":"share %d"}]}`, i, i),
			fmt.Sprintf(`{"meta":{"uid":"n%d"},"prompt":"nested %d"}`, i, i))
	}
	lines = append(lines, `{"id":"both","text":"a","messages":[{"role":"user","content":"b"}]}`)
	dir := writeDataset(t, "mixed", lines)
	db := filepath.Join(t.TempDir(), "g.db")
	r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", url, dir)
	if r.code != 1 {
		t.Errorf("exit %d; want 1\n%s", r.code, r)
	}
	for _, want := range []string{
		"its 41 prompt lines are of 5 shapes: 10 text, 10 chat messages, 10 conversations, 10 with no prompt gen reads, 1 with more than one prompt key",
		"The 11 that gen cannot send: their keys are meta, prompt, id, text, messages",
		"mixed: 30/41 answered (30 this run), 0 failed, 11 to go",
		"mixed: 11 prompts not sent for their shape", "still to go, neither answered nor failed",
		"gendex: 11 prompts not sent for their shape (still to go)",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if i, j := strings.Index(r.stderr, "5 shapes"), strings.Index(r.stderr, "is ready"); i < 0 || j >= 0 && i > j {
		t.Errorf("the shapes are said after the first server is ready:\n%s", r.stderr)
	}
	if n := len(pr.sent()); n != 30 {
		t.Errorf("%d requests; want 30", n)
	}
	if _, err := os.Stat(filepath.Join(dir, "errors.jsonl")); err == nil {
		t.Error("errors.jsonl written for lines gen cannot send")
	}
}
