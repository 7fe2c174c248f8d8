package gen

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"gendex/ingest/export"
	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// writeCutConversations writes n chat prompts of k user turns (with the
// prompt's own assistant turns, never sent) and no max_new_tokens of their
// own, so the run's --max-new-tokens applies to every turn. Conversation c
// has ignore_eos when cut(c): the simulator then cuts each of its turns at
// max_new_tokens; the others' turns end as the simulator's answers do
// (their lengths are their own: about one in four cut at 128 tokens, nine
// in ten at 16).
func writeCutConversations(t *testing.T, root, ds string, n, k int, cut func(c int) bool) {
	t.Helper()
	dir := filepath.Join(root, ds)
	os.MkdirAll(dir, 0o755)
	var b strings.Builder
	for c := 1; c <= n; c++ {
		msgs := []map[string]string{{"role": "system", "content": "Be brief."}}
		for u := 1; u <= k; u++ {
			msgs = append(msgs, map[string]string{"role": "user", "content": userText(ds, c, u)},
				map[string]string{"role": "assistant", "content": fmt.Sprintf("%s %d.%d", origMarker, c, u)})
		}
		p := map[string]any{"id": fmt.Sprintf("%s-%05d", ds, c), "messages": msgs}
		if cut(c) {
			p["sampling_params"] = map[string]any{"ignore_eos": true}
		}
		line, _ := json.Marshal(p)
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func maxNew(n int) client.SamplingParams { return client.SamplingParams{MaxNewTokens: &n} }

// cutAt returns the turn (1-based) a conversation's raw line says it was
// cut at and stopped (the turns after it not asked), or 0 when every turn
// was asked. It checks the line's shape: k turn objects, the answered ones
// then {"asked":false} for each after the cut; finish_reason length.
func cutAt(t *testing.T, line []byte, k int) int {
	t.Helper()
	var l struct {
		ID           string            `json:"id"`
		Turns        []json.RawMessage `json:"turns"`
		FinishReason string            `json:"finish_reason"`
	}
	if err := json.Unmarshal(line, &l); err != nil {
		t.Fatal(err)
	}
	if len(l.Turns) != k {
		t.Fatalf("%s: %d turns; want %d: %s", l.ID, len(l.Turns), k, line)
	}
	asked := 0
	for i, tj := range l.Turns {
		if string(tj) == `{"asked":false}` {
			continue
		}
		if asked != i {
			t.Fatalf("%s: turn %d answered after a turn not asked: %s", l.ID, i+1, line)
		}
		asked++
	}
	if asked == k {
		return 0
	}
	var last struct {
		FinishReason string `json:"finish_reason"`
	}
	json.Unmarshal(l.Turns[asked-1], &last)
	if last.FinishReason != "length" || l.FinishReason != "length" {
		t.Errorf("%s stops after turn %d, which is not cut (%q, the line's %q): %s", l.ID, asked, last.FinishReason, l.FinishReason, line)
	}
	return asked
}

// TestGenExportStopsCutConversation: under --export (without
// --include-truncated) a 3-turn conversation whose first turn is cut at
// max_new_tokens costs one request: its raw line holds turn 1 and two
// turns not asked, and it gets exactly one exclusion, length "turn 1 of
// 3", written with it; a second run asks nothing. One cut at turn 2 costs
// two; the others, three. Without --export every turn is still asked;
// with --include-truncated too.
func TestGenExportStopsCutConversation(t *testing.T) {
	t.Parallel()
	const n, k = 40, 3
	odd := func(c int) bool { return c%2 == 1 } // cut at turn 1
	for _, tc := range []struct {
		name   string
		export *export.Config
		stops  bool
	}{
		{"export", &export.Config{Format: export.Conversations}, true},
		{"no export", nil, false},
		{"include-truncated", &export.Config{Format: export.Conversations, IncludeTruncated: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, url := recordedSim(t, sim.Config{Seed: 5})
			root, out := t.TempDir(), t.TempDir()
			writeCutConversations(t, root, "M", n, k, odd)
			dbPath := filepath.Join(t.TempDir(), "g.db")
			// 128 tokens: the simulator cuts about a quarter of the turns
			// that stop on their own, so some of the others are cut too.
			cfg := Config{Servers: []string{url}, Out: out, Concurrency: 4, Sampling: maxNew(128), Export: tc.export}
			sum, log, err := runGen(t, t.Context(), dbPath, cfg, root)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			per := map[int][k + 1]int{}
			for _, q := range generations(t, rc) {
				c := per[q.conv]
				c[q.turn]++
				per[q.conv] = c
			}
			raw := readJSONL(t, filepath.Join(out, "M", "raw_responses.jsonl"))
			if len(raw) != n || sum.Responses != n {
				t.Fatalf("%d raw lines, %d answers; want %d\n%s", len(raw), sum.Responses, n, log)
			}
			stopped := 0
			var truncated int64
			for _, l := range raw {
				m := decodeMap(t, l)
				if m["finish_reason"] == "length" {
					truncated++
				}
				var c int
				fmt.Sscanf(m["id"].(string), "M-%05d", &c)
				cut := cutAt(t, l, k)
				if tc.stops && odd(c) && cut != 1 {
					t.Errorf("%s: cut at turn %d; want 1 (ignore_eos)", m["id"], cut)
				}
				want := [k + 1]int{0, 1, 1, 1}
				if cut > 0 {
					stopped++
					for i := cut + 1; i <= k; i++ {
						want[i] = 0
					}
				}
				if got := per[c]; got != want {
					t.Errorf("%s: requests per turn %v; want %v (cut at %d)", m["id"], got[1:], want[1:], cut)
				}
			}
			if !tc.stops {
				if stopped > 0 {
					t.Errorf("%d conversations stopped at a cut turn; want none", stopped)
				}
				if sum.Truncated != truncated {
					t.Errorf("summary counts %d truncated; the raw lines %d", sum.Truncated, truncated)
				}
				return
			}
			if stopped >= n || stopped <= n/2 {
				t.Errorf("%d of %d conversations stopped at a cut turn; want the %d with ignore_eos and some (not all) others", stopped, n, n/2)
			}
			if sum.Truncated != truncated || truncated < int64(stopped) {
				t.Errorf("summary counts %d truncated; the raw lines %d (%d stopped)", sum.Truncated, truncated, stopped)
			}
			// Exactly one exclusion per stopped conversation, as export names it.
			seen := map[string]int{}
			for _, l := range readJSONL(t, filepath.Join(out, "M", "excluded.jsonl")) {
				var x struct{ ID, Reason, Detail string }
				json.Unmarshal(l, &x)
				seen[x.ID]++
				var c int
				fmt.Sscanf(x.ID, "M-%05d", &c)
				if x.Reason != "length" || !strings.HasPrefix(x.Detail, "turn ") || !strings.Contains(x.Detail, fmt.Sprintf(" of %d: finish_reason length", k)) ||
					odd(c) && !strings.HasPrefix(x.Detail, "turn 1 of 3: finish_reason length") {
					t.Errorf("exclusion %s", l)
				}
			}
			for _, l := range raw {
				id := decodeMap(t, l)["id"].(string)
				if cut := cutAt(t, l, k); cut > 0 {
					if seen[id] != 1 {
						t.Errorf("%s: %d exclusions; want 1", id, seen[id])
					}
				}
			}
			// No turn line of a stopped conversation reaches turns.jsonl
			// for or after its cut turn.
			cutTurn := map[string]int{}
			for _, l := range raw {
				cutTurn[decodeMap(t, l)["id"].(string)] = cutAt(t, l, k)
			}
			for _, l := range readJSONL(t, filepath.Join(out, "M", "turns.jsonl")) {
				m := decodeMap(t, l)
				if c := cutTurn[m["id"].(string)]; c > 0 && int(m["turn"].(float64)) >= c {
					t.Errorf("turn line %s of a conversation cut at turn %d", l, c)
				}
			}
			if !strings.Contains(log, "so --export excluded them as length") {
				t.Errorf("the summary does not say the cut answers were excluded:\n%s", log)
			}
			// A second run has nothing to ask.
			before := len(generations(t, rc))
			sum, log, err = runGen(t, t.Context(), dbPath, cfg, root)
			if err != nil || sum.Responses != 0 || len(generations(t, rc)) != before || !strings.Contains(log, "nothing to do") {
				t.Errorf("second run: %+v %v, %d requests\n%s", sum, err, len(generations(t, rc))-before, log)
			}
		})
	}
}

// TestGenExportEndsRecordedCutConversation: a conversation whose turn 1
// was answered cut by a run without --export (its turn 2 failed) ends at
// turn 1 when a run with --export takes it up: no request, one raw line,
// one exclusion "turn 1 of 3". And an exclusion lost after its raw line
// (a crash between the two writes) is made again from the raw line, the
// same one: the line holds what export needs to name the turn.
func TestGenExportEndsRecordedCutConversation(t *testing.T) {
	t.Parallel()
	const n, k = 12, 3
	rc, url := recordedSim(t, sim.Config{Seed: 5})
	rc.refuse = func(path string, body []byte) bool { // every turn 2
		var b struct {
			InputIDs []int `json:"input_ids"`
		}
		json.Unmarshal(body, &b)
		return strings.Count(sim.Decode(b.InputIDs, false), "<|user|>") == 2
	}
	root, out := t.TempDir(), t.TempDir()
	writeCutConversations(t, root, "M", n, k, func(c int) bool { return c%2 == 1 })
	dbPath := filepath.Join(t.TempDir(), "g.db")
	cfg := Config{Servers: []string{url}, Out: out, Concurrency: 4, Sampling: maxNew(16), MaxAttempts: 1}
	sum, log, err := runGen(t, t.Context(), dbPath, cfg, root)
	if err != nil || sum.Errors != n || sum.Turns != n {
		t.Fatalf("first run: %+v %v\n%s", sum, err, log)
	}
	cut := map[string]bool{}
	for _, l := range readJSONL(t, filepath.Join(out, "M", "turns.jsonl")) {
		if m := decodeMap(t, l); m["finish_reason"] == "length" {
			cut[m["id"].(string)] = true
		}
	}
	if len(cut) < n/2 || len(cut) == n {
		t.Fatalf("%d of %d turn 1 answers cut; want the %d with ignore_eos, not all", len(cut), n, n/2)
	}

	rc.refuse = nil
	before := generations(t, rc)
	cfg.Export = &export.Config{Format: export.Conversations}
	cfg.RetryErrors = true
	sum, log, err = runGen(t, t.Context(), dbPath, cfg, root)
	if err != nil || sum.Responses != n {
		t.Fatalf("second run: %+v %v\n%s", sum, err, log)
	}
	asked := map[string]int{}
	for _, q := range generations(t, rc)[len(before):] {
		asked[fmt.Sprintf("M-%05d", q.conv)]++
		if q.turn == 1 {
			t.Errorf("turn 1 of conversation %d asked again", q.conv)
		}
	}
	want := map[string]string{} // id -> exclusion detail
	for _, l := range readJSONL(t, filepath.Join(out, "M", "raw_responses.jsonl")) {
		id := decodeMap(t, l)["id"].(string)
		if got := cutAt(t, l, k); cut[id] != (got == 1) {
			t.Errorf("%s: cut at turn %d; its recorded turn 1 cut: %v", id, got, cut[id])
		}
		if cut[id] && asked[id] != 0 {
			t.Errorf("%s: %d requests; its recorded turn 1 was cut, so none", id, asked[id])
		}
	}
	for _, l := range readJSONL(t, filepath.Join(out, "M", "excluded.jsonl")) {
		var x struct{ ID, Reason, Detail string }
		json.Unmarshal(l, &x)
		if _, dup := want[x.ID]; dup {
			t.Errorf("%s excluded twice", x.ID)
		}
		want[x.ID] = x.Reason + ": " + x.Detail
		if cut[x.ID] && !strings.HasPrefix(want[x.ID], "length: turn 1 of 3: finish_reason length") {
			t.Errorf("%s: exclusion %q", x.ID, want[x.ID])
		}
	}
	for id := range cut {
		if want[id] == "" {
			t.Errorf("%s: no exclusion", id)
		}
	}

	// The exclusions lost (as if gen was killed after the raw lines):
	// a run on a fresh index makes the same ones, asking nothing.
	if err := os.Remove(filepath.Join(out, "M", "excluded.jsonl")); err != nil {
		t.Fatal(err)
	}
	before = generations(t, rc)
	sum, log, err = runGen(t, t.Context(), filepath.Join(t.TempDir(), "fresh.db"), cfg, root)
	if err != nil || sum.Responses != 0 || len(generations(t, rc)) != len(before) {
		t.Fatalf("catch-up run: %+v %v, %d requests\n%s", sum, err, len(generations(t, rc))-len(before), log)
	}
	again := map[string]string{}
	for _, l := range readJSONL(t, filepath.Join(out, "M", "excluded.jsonl")) {
		var x struct{ ID, Reason, Detail string }
		json.Unmarshal(l, &x)
		again[x.ID] = x.Reason + ": " + x.Detail
	}
	if fmt.Sprint(again) != fmt.Sprint(want) {
		t.Errorf("exclusions made from the files:\n%v\nmade by gen:\n%v", again, want)
	}
}

// TestGenCountsTruncated: gen's summary counts the run's answers cut at
// max_new_tokens, equal to a hand count of the finish_reason length lines
// it wrote, and says what to do, with the run's real max_new_tokens; the
// live lines and the dataset's final line count them from the index. A
// run that cut nothing says nothing of it.
func TestGenCountsTruncated(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 3, DecodeTokensPerSec: 400, Slots: 8})
	root, out := t.TempDir(), t.TempDir()
	writePrompts(t, root, "T", "text", 60)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	cfg := Config{Servers: []string{url}, Out: out, Concurrency: 8, Sampling: maxNew(24), LogEvery: 20 * time.Millisecond}
	sum, log, err := runGen(t, t.Context(), dbPath, cfg, root)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	var cut int64
	for _, l := range readJSONL(t, filepath.Join(out, "T", "raw_responses.jsonl")) {
		if decodeMap(t, l)["finish_reason"] == "length" {
			cut++
		}
	}
	if cut == 0 || cut == 60 {
		t.Fatalf("%d of 60 answers cut: the test does not test", cut)
	}
	if sum.Truncated != cut {
		t.Errorf("summary: %d truncated; the file holds %d answers with finish_reason length", sum.Truncated, cut)
	}
	want := fmt.Sprintf("gen: %d of 60 answers were cut at 24 tokens (finish_reason length): ask them again with a higher limit: gen --redo truncated --max-new-tokens N (and this run's other flags); export keeps cut answers only with --include-truncated\n", cut)
	if !strings.Contains(log, want) {
		t.Errorf("the summary does not say %q:\n%s", want, log)
	}
	if !strings.Contains(log, fmt.Sprintf("  T: 60/60 answered (60 this run), 0 failed, 0 to go, %d truncated -> ", cut)) {
		t.Errorf("the dataset's final line does not count the truncated answers:\n%s", log)
	}
	live := regexp.MustCompile(`  T \d+/60 answered \([0-9.]+% done\), \d+ to go, (\d+) truncated, `)
	ms := live.FindAllStringSubmatch(log, -1)
	if len(ms) == 0 {
		t.Errorf("no progress line counts truncated answers:\n%s", log)
	}
	for _, m := range ms {
		if n, _ := strconv.ParseInt(m[1], 10, 64); n > cut {
			t.Errorf("a progress line counts %d truncated; the run cut %d", n, cut)
		}
	}

	// A run that cut nothing: no such sentence.
	writePrompts(t, root, "T", "text", 61)
	sum, log, err = runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Sampling: maxNew(4000)}, root)
	if err != nil || sum.Responses != 1 || sum.Truncated != 0 || strings.Contains(log, "were cut") {
		t.Errorf("second run: %+v %v\n%s", sum, err, log)
	}
}

// TestTruncatedSummary: the summary's sentence on cut answers names the
// run's max_new_tokens (or the server's default when unset) and what
// --export did with them.
func TestTruncatedSummary(t *testing.T) {
	t.Parallel()
	n := 128
	for _, tc := range []struct {
		sampling client.SamplingParams
		export   *export.Config
		sum      Summary
		want     string
	}{
		{client.SamplingParams{MaxNewTokens: &n}, nil, Summary{Responses: 200},
			""},
		{client.SamplingParams{MaxNewTokens: &n}, nil, Summary{Responses: 200, Truncated: 30},
			"gen: 30 of 200 answers were cut at 128 tokens (finish_reason length): ask them again with a higher limit: gen --redo truncated --max-new-tokens N (and this run's other flags); export keeps cut answers only with --include-truncated"},
		{client.SamplingParams{}, nil, Summary{Responses: 200, Truncated: 30},
			"gen: 30 of 200 answers were cut at the server's default max_new_tokens (finish_reason length): ask them again with a higher limit: gen --redo truncated --max-new-tokens N (and this run's other flags); export keeps cut answers only with --include-truncated"},
		{client.SamplingParams{MaxNewTokens: &n}, &export.Config{}, Summary{Responses: 200, Truncated: 30},
			"gen: 30 of 200 answers were cut at 128 tokens (finish_reason length), so --export excluded them as length; ask them again with a higher limit: gen --redo truncated --max-new-tokens N (and this run's other flags), or --include-truncated keeps them"},
		{client.SamplingParams{MaxNewTokens: &n}, &export.Config{IncludeTruncated: true}, Summary{Responses: 200, Truncated: 30},
			"gen: 30 of 200 answers were cut at 128 tokens (finish_reason length); --include-truncated keeps them, cut, in the records; for whole answers, ask them again with a higher limit: gen --redo truncated --max-new-tokens N (and this run's other flags)"},
		{client.SamplingParams{MaxNewTokens: &n}, nil, Summary{Responses: 200, Truncated: 30, TruncatedOwnLimit: 30},
			"gen: 30 of 200 answers were cut at their prompts' own max_new_tokens (finish_reason length): ask them again with a higher limit: raise max_new_tokens in their prompt lines (a prompt's own wins over --max-new-tokens), then gen --redo truncated (and this run's other flags); export keeps cut answers only with --include-truncated"},
		{client.SamplingParams{MaxNewTokens: &n}, nil, Summary{Responses: 200, Truncated: 30, TruncatedOwnLimit: 12},
			"gen: 30 of 200 answers were cut at the token limit, 18 at 128 tokens and 12 at their prompts' own max_new_tokens (finish_reason length): ask them again with a higher limit: gen --redo truncated --max-new-tokens N (and this run's other flags), after raising max_new_tokens in the prompt lines that set their own (it wins over --max-new-tokens); export keeps cut answers only with --include-truncated"},
	} {
		r := &progress{cfg: &Config{Sampling: tc.sampling, Export: tc.export}}
		if got := r.truncatedSummary(&tc.sum); got != tc.want {
			t.Errorf("%+v:\n got %q\nwant %q", tc.sum, got, tc.want)
		}
	}
}

// TestGenSaysOwnLimitCuts: answers cut at their prompt lines' own
// max_new_tokens (here 4, under a run's 4000) are said to be cut there,
// not at the run's limit, and the advice says to raise the prompts' own.
// Before, the summary said "cut at 4000 tokens".
func TestGenSaysOwnLimitCuts(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 3, DecodeTokensPerSec: 4000, Slots: 8})
	root, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "O")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&b, `{"id":"O-%02d","text":"write about %d","max_new_tokens":4}`+"\n", i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Servers: []string{url}, Out: out, Concurrency: 8, Sampling: maxNew(4000)}
	sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), cfg, root)
	if err != nil {
		t.Fatalf("%v\n%s", err, log)
	}
	if sum.Truncated == 0 || sum.TruncatedOwnLimit != sum.Truncated {
		t.Fatalf("%d truncated, %d of them at the prompts' own limit; want some, all at it\n%s", sum.Truncated, sum.TruncatedOwnLimit, log)
	}
	want := fmt.Sprintf("gen: %d of 20 answers were cut at their prompts' own max_new_tokens (finish_reason length): ask them again with a higher limit: raise max_new_tokens in their prompt lines", sum.Truncated)
	if !strings.Contains(log, want) || strings.Contains(log, "cut at 4000 tokens") {
		t.Errorf("the summary does not say %q:\n%s", want, log)
	}
}
