package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// TestGenConversationsSurviveSIGKILL kills a running `gendex gen --turns
// all` with SIGKILL at random moments while conversations are half done
// (against a separate `gendex sim` process slow enough that every kill lands
// mid-run), at least 10 times, resuming each time; then lets it finish;
// through /v1/tokenize + /generate and through chat. Every turn must exist
// exactly once (turns 1..k-1 in turns.jsonl, the conversation once in
// raw_responses.jsonl with all k turns), the index must equal a fresh index
// of the files, and every turn must be the simulator's answer to the
// regenerated conversation before it.
func TestGenConversationsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	const seed = 13
	url := startSimProcess(t, bin, "--seed", fmt.Sprint(seed), "--slots", "64", "--decode-tps", "100")
	clean := client.New(simURL(t, sim.Config{Seed: seed}), client.Options{})
	for _, tc := range []struct {
		api  string
		sets map[string][2]int // dataset -> conversations, user turns
	}{
		{"generate", map[string][2]int{"C3": {120, 3}, "C2": {80, 2}}},
		{"chat", map[string][2]int{"H3": {100, 3}}},
	} {
		t.Run(tc.api, func(t *testing.T) {
			t.Parallel()
			killConversations(t, bin, url, tc.api, tc.sets, clean)
		})
	}
}

// killConversations runs gen --api api on the datasets sets against url,
// SIGKILLs it mid-conversation until at least 10 kills left conversations
// half done, lets it finish and checks the outcome (see
// TestGenConversationsSurviveSIGKILL).
func killConversations(t *testing.T, bin, url, api string, sets map[string][2]int, clean *client.Client) {
	root, out := t.TempDir(), t.TempDir()
	for name, nk := range sets {
		writeConversationPrompts(t, filepath.Join(root, name), name, nk[0], nk[1])
	}
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", db, "gen", "--server", url, "--api", api, "--out", out, "--concurrency", "16", "--max-new-tokens", "32", root}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	turnsSize := func() (n int64) {
		for name := range sets {
			if fi, err := os.Stat(filepath.Join(out, name, "turns.jsonl")); err == nil {
				n += fi.Size()
			}
		}
		return n
	}
	kills, halfDone := 0, 0
	for i := 0; i < 30 && halfDone < 12; i++ {
		before := turnsSize()
		// Once this run has written turn lines (so conversations are under
		// way), kill it at a random moment: the moment is what is under
		// test.
		killed, gen := killWhileWriting(t, bin, args, func() bool { return turnsSize() != before }, time.Duration(rng.IntN(300))*time.Millisecond)
		if killed {
			kills++
		} else if gen.Wait() != 0 {
			t.Fatalf("run %d ended on its own with exit %d\n%s", i, gen.Wait(), gen.Stderr())
		}
		for name := range sets {
			if h := halfDoneInFiles(t, filepath.Join(out, name)); h > 0 {
				halfDone++
				break
			}
		}
	}
	final := mustRunGendex(t, bin, args...)
	t.Logf("%d kills, %d with conversations half done; the final run:\n%s", kills, halfDone, final)
	if kills < 10 || halfDone < 10 {
		t.Errorf("%d runs were killed, %d of them with conversations half done; the test wants at least 10 of each", kills, halfDone)
	}
	for name, nk := range sets {
		checkConversationsOnce(t, filepath.Join(out, name), name, nk[0], nk[1], api, clean)
	}
	// The index equals a fresh index of the same files (by the binary: the
	// race detector makes the test's own ingest of every line slow).
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	mustRunGendex(t, bin, "--db", fresh, "ingest", root, out)
	for _, q := range [][]string{{"progress"}, {"tokens"}, {"files"}, {"finish"}} {
		ask := func(db string) string {
			code, stdout, stderr := runGendex(t, bin, "", append([]string{"--db", db, "query"}, append(q, "--format", "json")...)...)
			if code != 0 {
				t.Fatalf("query %s: exit %d\n%s", q[0], code, stderr)
			}
			return stdout
		}
		if got, want := ask(db), ask(fresh); got != want {
			t.Errorf("query %s: the index says\n%s\na fresh index of the files says\n%s", q[0], got, want)
		}
	}
	for name := range sets {
		if _, err := os.Stat(filepath.Join(out, name, "errors.jsonl")); !os.IsNotExist(err) {
			t.Errorf("%s: an errors.jsonl exists though no conversation failed: %v", name, err)
		}
	}
}

// convUser is user turn u of conversation c.
func convUser(name string, c, u int) string {
	return fmt.Sprintf("%s %d: question %d about the cache", name, c, u)
}

// writeConversationPrompts writes n chat prompts of k user turns, each
// followed by an original assistant turn, to dir/prompts.jsonl.
func writeConversationPrompts(t *testing.T, dir, name string, n, k int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for c := 1; c <= n; c++ {
		msgs := []client.Message{{Role: "system", Content: "Be brief."}}
		for u := 1; u <= k; u++ {
			msgs = append(msgs, client.Message{Role: "user", Content: convUser(name, c, u)}, client.Message{Role: "assistant", Content: "an original answer"})
		}
		line, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%s-%05d", name, c), "messages": msgs})
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// answerLine is a turn line, a raw line or a turn object, as far as the
// test reads them.
type answerLine struct {
	ID        string            `json:"id"`
	Turn      int               `json:"turn"`
	Turns     json.RawMessage   `json:"turns"`
	OutputIDs []int             `json:"output_ids"`
	Text      string            `json:"text"`
	PromptIDs []int             `json:"prompt_ids"`
	Objects   []json.RawMessage `json:"-"`
}

// readAnswerLines reads every line of a finished run's file: a torn
// last line is a bad line.
func readAnswerLines(t *testing.T, path string) []answerLine {
	t.Helper()
	return readLines(t, path, false)
}

// readLines reads path's answer lines; wholeOnly leaves out a last line
// without its newline (a killed run's, which the next run cuts).
func readLines(t *testing.T, path string, wholeOnly bool) []answerLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if wholeOnly {
		b = b[:bytes.LastIndexByte(b, '\n')+1]
	}
	var out []answerLine
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var a answerLine
		if err := json.Unmarshal(l, &a); err != nil || a.ID == "" {
			t.Fatalf("%s: bad line %q: %v", path, l, err)
		}
		if len(a.Turns) > 0 && a.Turns[0] == '[' {
			json.Unmarshal(a.Turns, &a.Objects)
		}
		out = append(out, a)
	}
	return out
}

// halfDoneInFiles counts the conversations of a dataset's output folder
// with turn lines but no raw line, between runs: a killed run's torn last
// line, which the next run cuts, is not read (it failed the test once).
func halfDoneInFiles(t *testing.T, dir string) int {
	raw := map[string]bool{}
	for _, a := range readLines(t, filepath.Join(dir, "raw_responses.jsonl"), true) {
		raw[a.ID] = true
	}
	half := map[string]bool{}
	for _, a := range readLines(t, filepath.Join(dir, "turns.jsonl"), true) {
		if !raw[a.ID] {
			half[a.ID] = true
		}
	}
	return len(half)
}

// checkConversationsOnce checks that each of the n conversations of k
// turns in dir has each turn exactly once: turns 1..k-1 in turns.jsonl, one
// raw line with k turn objects whose first k-1 are those turn lines; and
// that each turn is the simulator c's answer to the conversation before it
// (so the history sent after every restart was the recorded one).
func checkConversationsOnce(t *testing.T, dir, name string, n, k int, api string, c *client.Client) {
	t.Helper()
	raw := map[string][]answerLine{}
	for _, a := range readAnswerLines(t, filepath.Join(dir, "raw_responses.jsonl")) {
		raw[a.ID] = append(raw[a.ID], a)
	}
	turns := map[string][]answerLine{} // id#turn -> lines
	for _, a := range readAnswerLines(t, filepath.Join(dir, "turns.jsonl")) {
		key := fmt.Sprintf("%s#%d", a.ID, a.Turn)
		turns[key] = append(turns[key], a)
	}
	if len(raw) != n || len(turns) != n*(k-1) {
		t.Errorf("%s: %d conversations and %d distinct turn lines; want %d and %d", name, len(raw), len(turns), n, n*(k-1))
	}
	maxNew := 32
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("%s-%05d", name, i)
		if len(raw[id]) != 1 {
			t.Errorf("%s: %d raw lines; want exactly 1", id, len(raw[id]))
			continue
		}
		r := raw[id][0]
		if len(r.Objects) != k {
			t.Errorf("%s: %d turns in its raw line; want %d", id, len(r.Objects), k)
			continue
		}
		msgs := []client.Message{{Role: "system", Content: "Be brief."}}
		for u := 1; u <= k; u++ {
			var obj answerLine
			json.Unmarshal(r.Objects[u-1], &obj)
			if u < k {
				key := fmt.Sprintf("%s#%d", id, u)
				if len(turns[key]) != 1 {
					t.Errorf("%s: %d turn lines; want exactly 1", key, len(turns[key]))
				} else if tl := turns[key][0]; !reflect.DeepEqual(tl.OutputIDs, obj.OutputIDs) || tl.Text != obj.Text {
					t.Errorf("%s: the turn line is not turn %d of the conversation's line", key, u)
				}
			}
			msgs = append(msgs, client.Message{Role: "user", Content: convUser(name, i, u)})
			ids, err := c.TokenizeMessages(t.Context(), msgs)
			if err != nil {
				t.Fatal(err)
			}
			want, err := c.Generate(t.Context(), client.GenerateRequest{InputIDs: ids, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}})
			if err != nil {
				t.Fatal(err)
			}
			// /generate returns the ids; chat the text alone.
			if !reflect.DeepEqual(obj.OutputIDs, want.OutputIDs) && api == "generate" || obj.Text != *want.Text {
				t.Errorf("%s turn %d: answer %v %q is not the answer to its conversation (%v %q)", id, u, obj.OutputIDs, obj.Text, want.OutputIDs, *want.Text)
				break
			}
			if u == k && api == "generate" && !reflect.DeepEqual(obj.PromptIDs, ids) {
				t.Errorf("%s: prompt_ids of the last turn are not the ids of its conversation", id)
			}
			msgs = append(msgs, client.Message{Role: "assistant", Content: obj.Text})
		}
	}
}

// TestGenTurnsFlag: --turns takes all or last; anything else is a usage
// error that says so, before anything is read or sent.
func TestGenTurnsFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	r := gendex(t, testEnv(nil), "--db", filepath.Join(dir, "g.db"), "gen", "--server", "sim", "--turns", "first", dir)
	if r.code != 2 || !strings.Contains(r.stderr, `--turns "first": want all or last`) {
		t.Errorf("--turns first: %s", r)
	}
	if r := mustGendex(t, testEnv(nil), "help", "gen"); !strings.Contains(r.stdout, "-turns") {
		t.Errorf("gen's help does not list --turns:\n%s", r.stdout)
	}
}
