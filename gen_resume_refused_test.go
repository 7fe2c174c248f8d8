package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"gendex/ingest/gen/sim"
)

// sharegptLine is a ShareGPT conversation with a system turn and humans
// human turns (each answered in the data), its id at both "id" and
// meta.uid ("u" + id), and the same conversation again under "alt", for
// --prompt alt.conversations.
func sharegptLine(id string, humans int) string {
	turns := []map[string]string{{"from": "system", "value": "You answer briefly."}}
	for h := 1; h <= humans; h++ {
		turns = append(turns, map[string]string{"from": "human", "value": fmt.Sprintf("Question %d of %s?", h, id)},
			map[string]string{"from": "gpt", "value": fmt.Sprintf("Answer %d.", h)})
	}
	b, _ := json.Marshal(map[string]any{"id": id, "meta": map[string]string{"uid": "u" + id}, "conversations": turns,
		"alt": map[string]any{"conversations": turns}})
	return string(b)
}

// sharegptLines are n ShareGPT conversations of 1 to 3 human turns, ids
// c<from>, c<from+1>, ...
func sharegptLines(from, n int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, sharegptLine(fmt.Sprintf("c%d", i), 1+i%3))
	}
	return out
}

// toolPromptLines are n function-calling prompts (messages + tools, the data
// ending at the assistant's call and its answer), ids m<from>, ...
func toolPromptLines(from, n int) []string {
	var out []string
	for i := from; i < from+n; i++ {
		out = append(out, strings.Replace(toolMessagesLine, `"id":"m1"`, fmt.Sprintf(`"id":"m%d"`, i), 1))
	}
	return out
}

// appendPrompts adds lines to dir's prompts.jsonl: prompts a resume is to
// answer.
func appendPrompts(t *testing.T, dir string, lines []string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "prompts.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
}

// lastRunState is the state of the last run `query runs` lists ("" for
// none).
func lastRunState(t *testing.T, db string) string {
	t.Helper()
	var runs []struct {
		State string `json:"state"`
	}
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "runs", "--format", "json")
	decodeJSON(t, r.stdout, &runs)
	if len(runs) == 0 {
		return ""
	}
	return runs[len(runs)-1].State
}

// oneLine is s with its runs of white space made one space (check wraps
// its lines at 80 columns).
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// TestGenResumeAskedOtherwiseIsRefused: a resume that would ask a
// dataset's remaining prompts otherwise than its answers were asked
// (another --api: the server's chat template instead of gen's own ids on
// /generate; another --turns; another --prompt key; another
// --tool-call-parser; another --id rule) is refused before any prompt
// reaches the server, naming both sides, exit 5, its run recorded as
// refused (the --id one before it has a row: nothing is indexed either).
// --allow-mixed lets it through, and check names both ways. On
// multi-turn ShareGPT with system turns and on function-calling data.
// (Before, the provenance held sampling and the server only: every one
// of these was answered, and check called the dataset made one way.)
func TestGenResumeAskedOtherwiseIsRefused(t *testing.T) {
	t.Parallel()
	toolSim := sim.Config{Seed: 3, ToolCalls: true, ToolCallParser: "qwen25"}
	for _, tc := range []struct {
		name        string
		lines       func(from, n int) []string
		sim         sim.Config
		first, then []string
		refusal     string   // in the refusal, both sides
		ways        []string // in check's mixed_provenance, each way
	}{
		{"api", sharegptLines, sim.Config{Seed: 3}, nil, []string{"--api", "chat"},
			`gen.api: "generate" before, "chat" now`, []string{`gen.api="generate"`, `gen.api="chat"`}},
		{"turns", sharegptLines, sim.Config{Seed: 3}, nil, []string{"--turns", "last"},
			`gen.turns: "all" before, "last" now`, []string{`gen.turns="all"`, `gen.turns="last"`}},
		{"prompt", sharegptLines, sim.Config{Seed: 3}, nil, []string{"--prompt", "alt.conversations"},
			`gen.prompt: "input_ids, text, messages or conversations" before, "alt.conversations" now`,
			[]string{`gen.prompt="input_ids, text, messages or conversations"`, `gen.prompt="alt.conversations"`}},
		{"tool-call-parser", toolPromptLines, toolSim, []string{"--tool-call-parser", "qwen25"}, []string{"--tool-call-parser", "hermes"},
			`gen.tool_call_parser: "qwen25" before, "hermes" now`, []string{`gen.tool_call_parser="qwen25"`, `gen.tool_call_parser="hermes"`}},
		{"tool-call-parser-from-server", toolPromptLines, toolSim, nil, []string{"--tool-call-parser", "hermes"},
			`gen.tool_call_parser: "qwen25" before, "hermes" now`, []string{`gen.tool_call_parser="qwen25"`, `gen.tool_call_parser="hermes"`}},
		{"id", sharegptLines, sim.Config{Seed: 3}, nil, []string{"--id", "meta.uid"},
			"its prompts' ids would now be read from meta.uid (were from custom_id or id): 4 of its 4 answers would match no prompt",
			[]string{`gen.id="custom_id or id"`, `gen.id="meta.uid"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := &promptRecorder{h: sim.New(tc.sim).Handler()}
			hs := httptest.NewServer(pr)
			defer hs.Close()
			dir := writeDataset(t, "ds", tc.lines(1, 4))
			db := filepath.Join(t.TempDir(), "g.db")
			gen := func(args ...string) result {
				return gendex(t, testEnv(nil), append(append([]string{"--db", db, "gen", "--server", hs.URL}, args...), dir)...)
			}
			if r := gen(tc.first...); r.code != 0 {
				t.Fatalf("first run: %s", r)
			}
			appendPrompts(t, dir, tc.lines(5, 3))
			sent := len(pr.sent())
			before, _ := os.ReadFile(filepath.Join(dir, "raw_responses.jsonl"))

			r := gen(tc.then...)
			if r.code != 5 || !strings.Contains(r.stderr, tc.refusal) || !strings.Contains(r.stderr, "nothing was sent") {
				t.Errorf("resume %v: want exit 5 naming %q\n%s", tc.then, tc.refusal, r)
			}
			if n := len(pr.sent()); n != sent {
				t.Errorf("resume %v sent %d prompts; want none", tc.then, n-sent)
			}
			if after, _ := os.ReadFile(filepath.Join(dir, "raw_responses.jsonl")); string(after) != string(before) {
				t.Errorf("resume %v wrote answers", tc.then)
			}
			if st := lastRunState(t, db); st != "refused" && !(tc.name == "id" && st == "finished") {
				t.Errorf("resume %v: the last run is %q; want refused", tc.then, st)
			}

			if r := gen(append(tc.then, "--allow-mixed")...); r.code != 0 {
				t.Fatalf("resume %v --allow-mixed: %s", tc.then, r)
			}
			if n := len(pr.sent()); n <= sent {
				t.Errorf("resume %v --allow-mixed sent nothing", tc.then)
			}
			c := gendex(t, testEnv(nil), "--db", db, "check", "--allow-mixed", dir)
			out := oneLine(c.stdout)
			for _, w := range tc.ways {
				if !strings.Contains(out, "mixed_provenance") || !strings.Contains(out, w) {
					t.Errorf("check after --allow-mixed lacks mixed_provenance with %s:\n%s", w, c.stdout)
				}
			}
		})
	}
}

// TestGenResumeOverOlderProvenance: answers written by a gendex before
// the provenance said how gen asked (no "gen" object) do not make a
// resume refused: how they were asked is unknown, not a difference. gen
// says so, and check counts the dataset made one way, the older answers'
// way shown with gen=unknown. A sampling difference is still refused.
func TestGenResumeOverOlderProvenance(t *testing.T) {
	t.Parallel()
	pr := &promptRecorder{h: sim.New(sim.Config{Seed: 4}).Handler()}
	hs := httptest.NewServer(pr)
	defer hs.Close()
	dir := writeDataset(t, "ds", sharegptLines(1, 4))
	db := filepath.Join(t.TempDir(), "g.db")
	mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", hs.URL, dir)
	// As an older gendex wrote them: the same lines without "gen", in a
	// fresh index.
	for _, f := range []string{"raw_responses.jsonl", "turns.jsonl"} {
		path := filepath.Join(dir, f)
		b, _ := os.ReadFile(path)
		old := regexp.MustCompile(`,"gen":\{[^{}]*\}`).ReplaceAll(b, nil)
		if f == "raw_responses.jsonl" && (len(old) == len(b) || strings.Contains(string(old), `"gen":`)) {
			t.Fatalf("no gen object to take out of %s", f)
		}
		os.WriteFile(path, old, 0o644)
	}
	db = filepath.Join(t.TempDir(), "old.db")
	appendPrompts(t, dir, sharegptLines(5, 2))

	r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", hs.URL, dir)
	if r.code != 0 || !strings.Contains(r.stderr, "4 answers written by an older gendex") || !strings.Contains(r.stderr, "those are unknown, not compared") {
		t.Fatalf("resume over an older gendex's answers: want exit 0, saying their way of asking is unknown\n%s", r)
	}
	c := gendex(t, testEnv(nil), "--db", db, "check", dir)
	out := oneLine(c.stdout)
	if strings.Contains(out, "mixed_provenance") || !strings.Contains(out, "made_by 6") || !strings.Contains(out, "gen=unknown") {
		t.Errorf("check: want made_by 6, one way, the older answers' with gen=unknown\n%s", c.stdout)
	}

	appendPrompts(t, dir, sharegptLines(7, 1))
	sent := len(pr.sent())
	r = gendex(t, testEnv(nil), "--db", db, "gen", "--server", hs.URL, "--temperature", "0.5", dir)
	if r.code != 5 || !strings.Contains(r.stderr, "sampling.temperature") || len(pr.sent()) != sent {
		t.Errorf("resume at another temperature over older answers: want refused, nothing sent\n%s", r)
	}
}

// TestGenRefusedRunIsNotFailed: a run refused before it sent anything
// (here a tool dataset against a simulator without a tool-call parser) is
// recorded as refused, not failed (a failed run is one a script runs
// again, and this command is refused again), says so, and exits 5.
// (Before: "recorded as failed, 2 prompts to go", exit 1.)
func TestGenRefusedRunIsNotFailed(t *testing.T) {
	t.Parallel()
	dir := writeDataset(t, "tools", append(toolPromptLines(1, 2), strings.Replace(toolShareGPTLine, `"id":"g1"`, `"id":"g2"`, 1)))
	db := filepath.Join(t.TempDir(), "g.db")
	for range 2 { // and the same command again: refused again
		r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--sim-tool-calls", dir)
		if r.code != 5 || !strings.Contains(r.stderr, "recorded as refused: nothing was sent") || strings.Contains(r.stderr, "failed,") {
			t.Errorf("tool dataset without a parser: want exit 5, recorded as refused\n%s", r)
		}
		if st := lastRunState(t, db); st != "refused" {
			t.Errorf("the run is recorded as %q; want refused", st)
		}
	}
	if r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--sim-tool-calls", "--tool-call-parser", "qwen25", dir); r.code != 0 {
		t.Errorf("the command fixed as the refusal says: %s", r)
	}
	if st := lastRunState(t, db); st != "finished" {
		t.Errorf("the fixed run is recorded as %q; want finished", st)
	}
}

// TestGenResumeSettingsThatChangeNothing: a resume is refused only for a
// setting that changes the dataset's answers: another --turns over text
// prompts (no turns to ask) and another --tool-call-parser over
// ShareGPT conversations without tools (no calls to read) are answered,
// and check counts each dataset made one way; the same resumes over chat
// and tool prompts are refused (TestGenResumeAskedOtherwiseIsRefused).
func TestGenResumeSettingsThatChangeNothing(t *testing.T) {
	t.Parallel()
	textLines := func(from, n int) []string {
		var out []string
		for i := from; i < from+n; i++ {
			out = append(out, fmt.Sprintf(`{"id":"t%d","text":"Say something about %d."}`, i, i))
		}
		return out
	}
	for _, tc := range []struct {
		name        string
		lines       func(from, n int) []string
		sim         sim.Config
		first, then []string
	}{
		{"turns over text", textLines, sim.Config{Seed: 5}, nil, []string{"--turns", "last"}},
		{"parser over conversations", sharegptLines, sim.Config{Seed: 5, ToolCalls: true, ToolCallParser: "qwen25"},
			[]string{"--tool-call-parser", "qwen25"}, []string{"--tool-call-parser", "hermes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr := &promptRecorder{h: sim.New(tc.sim).Handler()}
			hs := httptest.NewServer(pr)
			defer hs.Close()
			dir := writeDataset(t, "ds", tc.lines(1, 3))
			db := filepath.Join(t.TempDir(), "g.db")
			mustGendex(t, testEnv(nil), append(append([]string{"--db", db, "gen", "--server", hs.URL}, tc.first...), dir)...)
			appendPrompts(t, dir, tc.lines(4, 2))
			sent := len(pr.sent())
			if r := gendex(t, testEnv(nil), append(append([]string{"--db", db, "gen", "--server", hs.URL}, tc.then...), dir)...); r.code != 0 || len(pr.sent()) <= sent || len(answerIDs(t, dir)) != 5 {
				t.Fatalf("resume %v: want the 2 new prompts answered\n%s", tc.then, r)
			}
			c := gendex(t, testEnv(nil), "--db", db, "check", dir)
			if out := oneLine(c.stdout); strings.Contains(out, "mixed_provenance") || !strings.Contains(out, "made_by 5") {
				t.Errorf("check: want made_by 5, one way\n%s", c.stdout)
			}
		})
	}
}

// TestResumeKeepsTheRunOneRun: 50 prompts answered at --temperature 0.7
// by model-one, 10 more prompts added; a resume at --temperature 0, and
// one against a server of model-two, are each refused before any request,
// naming both sides; with --allow-mixed the rest is answered, and check
// names both models.
func TestResumeKeepsTheRunOneRun(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	one, onePosts := countingProxy(t, startSimProcess(t, p.bin, "--model", "model-one"))
	two, twoPosts := countingProxy(t, startSimProcess(t, p.bin, "--model", "model-two"))
	ds := filepath.Join("demo", "B2_text")
	p.mustRun("gen", "--server", one, "--temperature", "0.7", "--max-new-tokens", "16", ds)
	f, err := os.OpenFile(filepath.Join(p.dir, ds, "prompts.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 51; i <= 60; i++ {
		fmt.Fprintf(f, `{"id": "B2_text-%05d", "text": "Write about added prompt number %d."}`+"\n", i, i)
	}
	f.Close()
	onePosts.Store(0)
	code, errOut := p.run("gen", "--server", one, "--temperature", "0", "--max-new-tokens", "16", ds)
	if code == 0 || onePosts.Load() != 0 || !strings.Contains(errOut, "sampling.temperature: 0.7 before, 0 now") || !strings.Contains(errOut, "--allow-mixed") {
		t.Errorf("a resume at another temperature: exit %d, %d requests sent; want refused before any request, naming 0.7 and 0\n%s", code, onePosts.Load(), errOut)
	}
	code, errOut = p.run("gen", "--server", two, "--temperature", "0.7", "--max-new-tokens", "16", ds)
	if code == 0 || twoPosts.Load() != 0 || !strings.Contains(errOut, `server.model: "model-one" before, "model-two" now`) {
		t.Errorf("a resume against another model: exit %d, %d requests sent; want refused before any request, naming both models\n%s", code, twoPosts.Load(), errOut)
	}
	if n, _ := p.answers("demo"); n != 50 {
		t.Errorf("the refused resumes wrote answers: %d, want 50", n)
	}
	p.mustRun("gen", "--server", two, "--temperature", "0.7", "--max-new-tokens", "16", "--allow-mixed", ds)
	if n, _ := p.answers("demo"); n != 60 {
		t.Errorf("with --allow-mixed: %d answers, want 60", n)
	}
	p.mustRun("export", ds)
	code, out, _ := p.check(ds)
	if code != 1 || !strings.Contains(out, "mixed_provenance 60") || !strings.Contains(out, "model-one") || !strings.Contains(out, "model-two") ||
		!strings.Contains(out, ": 50 answers") || !strings.Contains(out, ": 10 answers") {
		t.Errorf("check of the mixed dataset: exit %d, want 1 naming both models and their answers\n%s", code, out)
	}
	if code, out, _ := p.check("--allow-mixed", "--allow-simulated", ds); code != 0 || !strings.Contains(out, "note: mixed_provenance") {
		t.Errorf("check --allow-mixed: exit %d, want 0 with the mix as a note\n%s", code, out)
	}
}

// countingProxy forwards to target and counts the requests other than GET
// (the prompts sent: /generate, chat, completions, tokenize).
func countingProxy(t *testing.T, target string) (url string, posts *atomic.Int64) {
	t.Helper()
	u, err := neturl.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	posts = &atomic.Int64{}
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			posts.Add(1)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, posts
}
