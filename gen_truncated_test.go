package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gendex/ingest/gen/sim"
)

// turnCounter is a simulator that counts the generation requests it gets
// per conversation turn, read from the user turns of the request (as
// writeConversationPrompts writes them: the last one is the turn asked).
type turnCounter struct {
	h  http.Handler
	mu sync.Mutex
	n  map[[2]string]int // {conversation id, turn} -> requests
}

var convUserRe = regexp.MustCompile(`(\w+) (\d+): question (\d+) about the cache`)

func (tc *turnCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if r.URL.Path == "/generate" || r.URL.Path == "/v1/chat/completions" {
		var b struct {
			InputIDs []int `json:"input_ids"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(body, &b)
		text := sim.Decode(b.InputIDs, false)
		for _, m := range b.Messages {
			text += "\n" + m.Content
		}
		if ms := convUserRe.FindAllStringSubmatch(text, -1); len(ms) > 0 {
			last := ms[len(ms)-1]
			var c int
			fmt.Sscan(last[2], &c)
			tc.mu.Lock()
			tc.n[[2]string{fmt.Sprintf("%s-%05d", last[1], c), last[3]}]++
			tc.mu.Unlock()
		}
	}
	tc.h.ServeHTTP(w, r)
}

// requests returns how many times turn of conversation id was asked.
func (tc *turnCounter) requests(id string, turn int) int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	return tc.n[[2]string{id, fmt.Sprint(turn)}]
}

func (tc *turnCounter) total() int {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	n := 0
	for _, c := range tc.n {
		n += c
	}
	return n
}

func countingSim(t *testing.T, cfg sim.Config) (*turnCounter, string) {
	t.Helper()
	tc := &turnCounter{h: sim.New(cfg).Handler(), n: map[[2]string]int{}}
	hs := httptest.NewServer(tc)
	t.Cleanup(hs.Close)
	return tc, hs.URL
}

// stoppedAt returns the turn a conversation's raw line stops at, cut, its
// later turns not asked ({"asked":false}); 0 when every turn was asked.
func stoppedAt(t *testing.T, line map[string]json.RawMessage) int {
	t.Helper()
	var turns []json.RawMessage
	if err := json.Unmarshal(line["turns"], &turns); err != nil {
		t.Fatalf("a raw line without turns: %v", line)
	}
	for i, tj := range turns {
		if string(tj) == `{"asked":false}` {
			return i
		}
	}
	return 0
}

// TestGenTruncatedEqualsHandCount: after `gendex gen --server sim` on the
// demo datasets, `query progress` and `query tokens` say per dataset (and
// TOTAL, in a table) as many truncated answers as the answer files hold
// lines with finish_reason length, and gen's summary says how many of its
// answers were cut at --max-new-tokens.
func TestGenTruncatedEqualsHandCount(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	out, db := t.TempDir(), filepath.Join(t.TempDir(), "g.db")
	demo, _ := filepath.Abs("testdata/demo")
	code, o := runGendexCombined(t, bin, "--db", db, "gen", "--server", "sim", "--out", out, demo)
	if code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, o)
	}
	hand := map[string]float64{}
	// own: the ids whose prompt line sets its own max_new_tokens (B3_chat's).
	own := map[string]bool{}
	var all, answers, cutOwn int
	sets, _ := os.ReadDir(out)
	for _, d := range sets {
		for _, p := range jsonLines(t, filepath.Join(demo, d.Name(), "prompts.jsonl")) {
			if _, ok := p["max_new_tokens"]; ok {
				own[idOfLine(t, p)] = true
			}
		}
		for _, l := range jsonLines(t, filepath.Join(out, d.Name(), "raw_responses.jsonl")) {
			answers++
			if string(l["finish_reason"]) == `"length"` {
				hand[d.Name()]++
				all++
				if own[idOfLine(t, l)] {
					cutOwn++
				}
			}
		}
	}
	if all == cutOwn || cutOwn == 0 {
		t.Fatalf("%d answers of the demo cut, %d at their prompts' own limit: the test does not test\n%s", all, cutOwn, o)
	}
	if want := fmt.Sprintf("gen: %d of %d answers were cut at the token limit, %d at 128 tokens and %d at their prompts' own max_new_tokens (finish_reason length): ask them again with a higher limit: gen --redo truncated --max-new-tokens N", all, answers, all-cutOwn, cutOwn); !strings.Contains(o, want) {
		t.Errorf("gen's summary does not say %q:\n%s", want, o)
	}
	if strings.Contains(o, "--max-new-tokens is the default") {
		t.Errorf("without --export gen warns of the default --max-new-tokens:\n%s", o)
	}
	for _, q := range []string{"progress", "tokens"} {
		code, js, stderr := runGendex(t, bin, "", "--db", db, "query", q, "--format", "json")
		if code != 0 {
			t.Fatalf("query %s: exit %d\n%s", q, code, stderr)
		}
		var rows []map[string]any
		if err := json.Unmarshal([]byte(js), &rows); err != nil || len(rows) != len(sets) {
			t.Fatalf("query %s: %v\n%s", q, err, js)
		}
		for _, r := range rows {
			if name := r["dataset"].(string); r["truncated"] != hand[name] {
				t.Errorf("query %s: %s truncated %v; its file holds %v answers with finish_reason length", q, name, r["truncated"], hand[name])
			}
		}
	}
}

// TestGenExportCutConversationCostsOneRequest: under `gen --export`, a
// 3-turn conversation cut at turn 1 (--ignore-eos: every answer runs to
// max_new_tokens) costs one request, and gets exactly one exclusion,
// length "turn 1 of 3"; gen says at its start, once, that
// --max-new-tokens was left at its default. Without --export the same
// conversations cost three requests each, as before.
func TestGenExportCutConversationCostsOneRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	const n = 10
	root := t.TempDir()
	writeConversationPrompts(t, filepath.Join(root, "C"), "C", n, 3)
	for _, tc := range []struct {
		name     string
		args     []string
		requests int
		warn     bool
	}{
		{"export", []string{"--export", "conversations"}, n, true},
		{"export with --max-new-tokens", []string{"--export", "conversations", "--max-new-tokens", "128"}, n, false},
		{"no export", nil, 3 * n, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counter, url := countingSim(t, sim.Config{Seed: 4})
			out, db := t.TempDir(), filepath.Join(t.TempDir(), "g.db")
			args := append([]string{"--db", db, "gen", "--server", url, "--out", out, "--ignore-eos"}, tc.args...)
			code, o := runGendexCombined(t, bin, append(args, root)...)
			if code != 0 {
				t.Fatalf("gen: exit %d\n%s", code, o)
			}
			if got := counter.total(); got != tc.requests {
				t.Errorf("%d generation requests; want %d\n%s", got, tc.requests, o)
			}
			warning := "gen: --max-new-tokens is the default 128; answers cut there are excluded as length (raise it for training data, or --include-truncated)\n"
			if got := strings.Count(o, warning); got != map[bool]int{true: 1, false: 0}[tc.warn] {
				t.Errorf("the default --max-new-tokens warning appears %d times:\n%s", got, o)
			}
			raw := jsonLines(t, filepath.Join(out, "C", "raw_responses.jsonl"))
			if len(raw) != n {
				t.Fatalf("%d raw lines; want %d", len(raw), n)
			}
			if tc.args == nil {
				return
			}
			excluded := map[string]int{}
			for _, l := range jsonLines(t, filepath.Join(out, "C", "excluded.jsonl")) {
				var reason, detail string
				json.Unmarshal(l["reason"], &reason)
				json.Unmarshal(l["detail"], &detail)
				excluded[idOfLine(t, l)]++
				if reason != "length" || !strings.HasPrefix(detail, "turn 1 of 3: finish_reason length") {
					t.Errorf("exclusion %s: %s", reason, detail)
				}
			}
			for _, l := range raw {
				id := idOfLine(t, l)
				if at := stoppedAt(t, l); at != 1 || counter.requests(id, 1) != 1 || excluded[id] != 1 {
					t.Errorf("%s: stopped at turn %d, turn 1 asked %d times, %d exclusions; want 1, 1, 1", id, at, counter.requests(id, 1), excluded[id])
				}
			}
			js := mustGendex(t, testEnv(nil), "--db", db, "query", "progress", "--format", "json").stdout
			var rows []map[string]any
			json.Unmarshal([]byte(js), &rows)
			if len(rows) != 1 || rows[0]["truncated"] != float64(n) || rows[0]["excluded"] != float64(n) || rows[0]["missing_raw"] != 0.0 {
				t.Errorf("progress: %s; want %d truncated, %d excluded, none missing", js, n, n)
			}
		})
	}
}

// TestGenExportCutConversationsSurviveSIGKILL kills `gendex gen --export
// conversations` with SIGKILL at random moments, at least 8 times, while
// 3-turn conversations are cut (half of them at every turn: ignore_eos;
// the others where the simulator's answers run out of --max-new-tokens),
// resuming each time; then lets it finish. Every conversation has one raw
// line and one record or exclusion; one cut at turn i stops there, never
// having had a turn after i asked in any run; its exclusion says "turn i
// of 3"; and the index counts what a fresh index of the files counts.
func TestGenExportCutConversationsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	const n, k = 160, 3
	counter, url := countingSim(t, sim.Config{Seed: 21, Slots: 16, DecodeTokensPerSec: 150})
	root, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "K")
	writeConversationPrompts(t, dir, "K", n, k)
	// Odd conversations: ignore_eos, so every turn is cut.
	b, _ := os.ReadFile(filepath.Join(dir, "prompts.jsonl"))
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i := 0; i < len(lines); i += 2 {
		lines[i] = strings.TrimSuffix(lines[i], "}") + `,"sampling_params":{"ignore_eos":true}}`
	}
	writePrompts(t, dir, strings.Join(lines, "\n")+"\n")
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", db, "gen", "--server", url, "--out", out, "--concurrency", "16", "--max-new-tokens", "24", "--export", "conversations", root}
	size := func() (s int64) {
		for _, name := range []string{"raw_responses.jsonl", "turns.jsonl"} {
			if fi, err := os.Stat(filepath.Join(out, "K", name)); err == nil {
				s += fi.Size()
			}
		}
		return s
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	kills := 0
	for i := 0; kills < 8 && i < 30; i++ {
		before := size()
		killed, gen := killWhileWriting(t, bin, args, func() bool { return size() != before }, time.Duration(rng.IntN(250))*time.Millisecond)
		if killed {
			kills++
			continue
		}
		if gen.Wait() != 0 {
			t.Fatalf("run %d ended on its own with exit %d\n%s", i, gen.Wait(), gen.Stderr())
		}
		break
	}
	final := mustRunGendex(t, bin, args...)
	t.Logf("%d kills; the final run:\n%s", kills, final)
	if kills < 8 {
		t.Errorf("%d runs were killed mid-run; the test wants at least 8", kills)
	}
	exportedOnce(t, filepath.Join(out, "K"))
	details := map[string]string{}
	for _, l := range jsonLines(t, filepath.Join(out, "K", "excluded.jsonl")) {
		var reason, detail string
		json.Unmarshal(l["reason"], &reason)
		json.Unmarshal(l["detail"], &detail)
		details[idOfLine(t, l)] = reason + ": " + detail
	}
	stopped := map[string]int{}
	raw := jsonLines(t, filepath.Join(out, "K", "raw_responses.jsonl"))
	if len(raw) != n {
		t.Fatalf("%d raw lines; want %d", len(raw), n)
	}
	cut := 0
	for _, l := range raw {
		id := idOfLine(t, l)
		var c int
		fmt.Sscanf(id, "K-%05d", &c)
		at := stoppedAt(t, l)
		stopped[id] = at
		if c%2 == 1 && at != 1 {
			t.Errorf("%s (ignore_eos) stopped at turn %d; want 1", id, at)
		}
		if at == 0 {
			continue
		}
		cut++
		for turn := at + 1; turn <= k; turn++ {
			if r := counter.requests(id, turn); r != 0 {
				t.Errorf("%s stopped at turn %d, yet its turn %d was asked %d times", id, at, turn, r)
			}
		}
		if want := fmt.Sprintf("length: turn %d of %d: finish_reason length", at, k); !strings.HasPrefix(details[id], want) {
			t.Errorf("%s: exclusion %q; want %q...", id, details[id], want)
		}
	}
	if cut <= n/2 || cut == n {
		t.Errorf("%d of %d conversations stopped at a cut turn; want the %d with ignore_eos and some others", cut, n, n/2)
	}
	if _, err := os.Stat(filepath.Join(out, "K", "turns.jsonl")); err == nil {
		for _, l := range jsonLines(t, filepath.Join(out, "K", "turns.jsonl")) {
			var turn int
			json.Unmarshal(l["turn"], &turn)
			if at := stopped[idOfLine(t, l)]; at > 0 && turn >= at {
				t.Errorf("turns.jsonl holds turn %d of %s, which stopped at turn %d", turn, idOfLine(t, l), at)
			}
		}
	}
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	mustGendex(t, testEnv(nil), "--db", fresh, "ingest", root, out)
	for _, q := range []string{"progress", "tokens", "finish"} {
		ask := func(db string) string {
			return mustGendex(t, testEnv(nil), "--db", db, "query", q, "--format", "json").stdout
		}
		if got, want := ask(db), ask(fresh); got != want {
			t.Errorf("query %s: the index says\n%s\na fresh index of the files says\n%s", q, got, want)
		}
	}
}
