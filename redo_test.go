package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// redoAnswer is what the redo tests read of an answer line.
type redoAnswer struct {
	ID        string `json:"id"`
	OutputIDs []int  `json:"output_ids"`
	Tokens    int64  `json:"completion_tokens"`
	Finish    string `json:"finish_reason"`
	Redo      bool   `json:"redo"`
}

// newestAnswers reads dir's raw_responses.jsonl and returns each id's
// newest answer (a redo's replaces the one before; an accidental
// duplicate does not) and how many lines the file holds.
func newestAnswers(t *testing.T, dir string) (map[string]redoAnswer, int) {
	t.Helper()
	newest := map[string]redoAnswer{}
	n := 0
	eachJSONLine(t, filepath.Join(dir, "raw_responses.jsonl"), func(b []byte) {
		var a redoAnswer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		n++
		if _, seen := newest[a.ID]; !seen || a.Redo {
			newest[a.ID] = a
		}
	})
	return newest, n
}

func eachJSONLine(t *testing.T, path string, fn func([]byte)) {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		fn(sc.Bytes())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// checkRedone checks one ids dataset after a redo: the index counts each
// id's newest answer (answers, tokens, truncated), and tokenized.jsonl
// and excluded.jsonl hold exactly one record or exclusion per answer,
// each record built from its newest answer (its input_ids end with that
// answer's output_ids).
func checkRedone(t *testing.T, bin, db, dir, ds string) {
	t.Helper()
	newest, _ := newestAnswers(t, dir)
	var tokens, cut int64
	for _, a := range newest {
		tokens += a.Tokens
		if a.Finish == "length" {
			cut++
		}
	}
	code, out, stderr := runGendex(t, bin, "", "--db", db, "query", "tokens", "--format", "json", ds)
	if code != 0 {
		t.Fatalf("query tokens %s: exit %d\n%s", ds, code, stderr)
	}
	var rows []map[string]any
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 1 {
		t.Fatalf("query tokens %s: %v %s", ds, err, out)
	}
	if r := rows[0]; r["records"] != float64(len(newest)) || r["completion_tokens"] != float64(tokens) || r["truncated"] != float64(cut) {
		t.Errorf("%s: query tokens %v; the newest answers: %d, %d tokens, %d cut", ds, r, len(newest), tokens, cut)
	}
	seen := map[string]int{}
	eachJSONLine(t, filepath.Join(dir, "tokenized.jsonl"), func(b []byte) {
		var rec struct {
			ID       string `json:"id"`
			InputIDs []int  `json:"input_ids"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
		seen[rec.ID]++
		a := newest[rec.ID]
		if len(rec.InputIDs) < len(a.OutputIDs) || !slices.Equal(rec.InputIDs[len(rec.InputIDs)-len(a.OutputIDs):], a.OutputIDs) {
			t.Errorf("%s: the record of %s is not built from its newest answer", ds, rec.ID)
		}
	})
	eachJSONLine(t, filepath.Join(dir, "excluded.jsonl"), func(b []byte) {
		var ex struct{ ID, Detail string }
		json.Unmarshal(b, &ex)
		seen[ex.ID]++
		if a := newest[ex.ID]; a.Finish != "length" || !strings.Contains(ex.Detail, fmt.Sprintf("(%d completion tokens)", a.Tokens)) {
			t.Errorf("%s: the exclusion of %s (%s) is not its newest answer's (%s, %d tokens)", ds, ex.ID, ex.Detail, a.Finish, a.Tokens)
		}
	})
	for id := range newest {
		if seen[id] != 1 {
			t.Errorf("%s: %s has %d records and exclusions, want 1", ds, id, seen[id])
		}
	}
}

// TestRedoTruncated: issue 27's case 5, as a user meets it. A run with the
// default --max-new-tokens cuts long answers; gen's summary names --redo
// truncated; running it with a higher limit asks them, and only them,
// again: every count is the newest answers', the records files end with one
// record or exclusion per answer built from its newest answer, a fresh
// ingest of the folder counts the same, and the same redo again has
// nothing to do and sends nothing. Before, gen's advice ("raise
// --max-new-tokens") gave "nothing to do".
func TestRedoTruncated(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	real := startSimProcess(t, p.bin, "--unmarked")
	ids := filepath.Join(p.dir, "demo", "B1_ids")
	errOut := p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "--export", "ids", filepath.Join("demo", "B1_ids"))
	if !strings.Contains(errOut, "gen --redo truncated --max-new-tokens N") {
		t.Errorf("gen's summary does not name --redo truncated:\n%s", errOut)
	}
	before, _ := newestAnswers(t, ids)
	cut := 0
	for _, a := range before {
		if a.Finish == "length" {
			cut++
		}
	}
	if cut == 0 {
		t.Fatal("no answer was cut at 16 tokens")
	}
	errOut = p.mustRun("gen", "--server", real, "--max-new-tokens", "64", "--export", "ids", "--redo", "truncated", filepath.Join("demo", "B1_ids"))
	if !strings.Contains(errOut, fmt.Sprintf("%d of the answers cut at the token limit are asked again", cut)) {
		t.Errorf("the redo does not say it asks the %d cut answers again:\n%s", cut, errOut)
	}
	after, lines := newestAnswers(t, ids)
	if lines != 50+cut {
		t.Errorf("%d answer lines, want the 50 answers and %d redone", lines, cut)
	}
	for id, a := range after {
		if was := before[id]; (was.Finish == "length") != a.Redo {
			t.Errorf("%s: cut %v before, redone %v", id, was.Finish == "length", a.Redo)
		}
	}
	checkRedone(t, p.bin, filepath.Join(p.dir, "gendex.db"), ids, "B1_ids")
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	p.mustRun("--db", fresh, "ingest", ids)
	checkRedone(t, p.bin, fresh, ids, "B1_ids")

	errOut = p.mustRun("gen", "--server", real, "--max-new-tokens", "64", "--export", "ids", "--redo", "truncated", filepath.Join("demo", "B1_ids"))
	if !strings.Contains(errOut, "none of the answers cut at the token limit is asked again") || !strings.Contains(errOut, "nothing to do") || strings.Contains(errOut, "is ready") {
		t.Errorf("the same redo again: want nothing to do, no server asked\n%s", errOut)
	}
	if _, n := newestAnswers(t, ids); n != lines {
		t.Errorf("the same redo again wrote %d answer lines", n-lines)
	}
}

// TestRedoFile: --redo FILE asks again the ids it lists (as query missing
// prints them, or DATASET<TAB>ID); one that no dataset of the run has is a
// usage error naming it, with nothing sent.
func TestRedoFile(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	real := startSimProcess(t, p.bin, "--unmarked")
	p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "demo")
	bad := filepath.Join(p.dir, "bad.txt")
	os.WriteFile(bad, []byte("B1_ids-00001\nno-such-id\nB2_text\tB1_ids-00002\n"), 0o644)
	code, errOut := p.run("gen", "--server", real, "--redo", bad, "demo")
	if code != 2 || !strings.Contains(errOut, bad+":2: \"no-such-id\"") || !strings.Contains(errOut, bad+":3:") || !strings.Contains(errOut, "nothing was sent") {
		t.Errorf("a redo file with unknown ids: exit %d, want 2 naming both\n%s", code, errOut)
	}
	if n, _ := p.answers("demo"); n != 200 {
		t.Errorf("the refused redo wrote: %d answers", n)
	}
	list := filepath.Join(p.dir, "again.txt")
	os.WriteFile(list, []byte("dataset\tstage\tid\nB1_ids\traw\tB1_ids-00001\nB2_text-00003\n\n"), 0o644)
	errOut = p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "--redo", list, "demo")
	if n, _ := p.answers("demo"); n != 202 {
		t.Errorf("after the redo of 2 ids: %d answer lines, want 202\n%s", n, errOut)
	}
	p.wantRaw("gendex.db", 50)
	errOut = p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "--redo", list, "demo")
	if n, _ := p.answers("demo"); n != 202 || !strings.Contains(errOut, "nothing to do") {
		t.Errorf("the same redo again: %d answer lines, want 202 and nothing to do\n%s", n, errOut)
	}
}

var redoKillN = flag.Int("redo-kill-n", 1500, "TestRedoSurvivesSIGKILL: how many cut answers the killed redo asks again (README's run: 10000)")

// TestRedoSurvivesSIGKILL: a redo of every answer of a dataset cut at the
// token limit (-redo-kill-n, 1,500 by default), under --export ids,
// SIGKILLed three times (as its answer file grows, at a random line; while
// its start takes the replaced answers' records out; once every answer is
// in, around the final pass that makes their records), then run to its end:
// each id counted once, by its newest answer, and one record or exclusion
// per id in the records files, each from its newest answer.
func TestRedoSurvivesSIGKILL(t *testing.T) { testRedoSurvivesSIGKILL(t, false) }

// TestRedoAsItGoesSurvivesSIGKILL: the same, the redo deciding each
// answer as its feeder reads the prompt, as it does over a large set
// (GENDEX_REDO_UPFRONT=1: any set is large): SIGKILLed while it is still
// finding its answers too; after its end, the same redo reads every prompt
// and asks nothing.
func TestRedoAsItGoesSurvivesSIGKILL(t *testing.T) { testRedoSurvivesSIGKILL(t, true) }

func testRedoSurvivesSIGKILL(t *testing.T, asGoes bool) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	n := *redoKillN
	root := t.TempDir()
	dir := filepath.Join(root, "cut")
	writeIDPrompts(t, dir, "cut", n)
	// Every third prompt has a limit of its own, 1 token, which wins over
	// the runs' --max-new-tokens: its answers, cut at it, are not asked
	// again (the same limit gives the same cut).
	var b strings.Builder
	own := map[string]bool{}
	eachJSONLine(t, filepath.Join(dir, "prompts.jsonl"), func(line []byte) {
		var p map[string]any
		json.Unmarshal(line, &p)
		if id := p["id"].(string); id[len(id)-1]%3 == 0 {
			p["max_new_tokens"] = 1
			own[id] = true
		}
		j, _ := json.Marshal(p)
		b.Write(j)
		b.WriteByte('\n')
	})
	writePrompts(t, dir, b.String())
	db := filepath.Join(t.TempDir(), "g.db")
	url := startSimProcess(t, bin, "--unmarked", "--seed", "4")
	if code, out := runGendexCombined(t, bin, append([]string{"--db", db, "gen", "--server", url, "--export", "ids"}, "--max-new-tokens", "1", root)...); code != 0 {
		t.Fatalf("the first run: exit %d\n%s", code, out)
	}
	first, _ := newestAnswers(t, dir)
	cut, cutOwn := 0, 0 // cut answers the redo asks again; those it leaves
	for id, a := range first {
		switch {
		case a.Finish != "length":
		case own[id]:
			cutOwn++
		default:
			cut++
		}
	}
	if cut+cutOwn < n*9/10 || cutOwn == 0 {
		t.Fatalf("%d of %d answers cut at 1 token, %d at their own limit; the test wants nearly all, some at their own", cut+cutOwn, n, cutOwn)
	}
	slow := startSimProcess(t, bin, "--unmarked", "--seed", "4", "--decode-tps", "1280")
	rng := rand.New(rand.NewPCG(uint64(n), 27))
	lines := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "raw_responses.jsonl"))
		return strings.Count(string(b), "\n")
	}
	// A limit of 64 (50 ms an answer): about half of the redone answers
	// are cut again, and must not be asked a third time when the redo
	// resumes.
	redo := []string{"--db", db, "gen", "--server", slow, "--export", "ids", "--max-new-tokens", "64", "--concurrency", "32", "--redo", "truncated", root}
	var opts gendexOpts
	if asGoes {
		opts.env = []string{"GENDEX_REDO_UPFRONT=1"}
	}
	for kill := range 3 {
		gen := startGendexWith(t, opts, bin, redo...)
		start := lines()
		grow := 1 + rng.IntN(max(1, (n+cut-start)/4))
		switch kill {
		case 0: // as the answers come in
			waitFor(t, 5*time.Minute, "the answer file to grow", func() bool { return lines() >= start+grow })
		case 1: // while the start takes the replaced answers' records out
			waitFor(t, 5*time.Minute, "the records of replaced answers taken out", func() bool {
				return strings.Contains(gen.Stderr(), "took ") || strings.Contains(gen.Stderr(), "is ready") // (past it)
			})
		case 2: // once every answer is in: around the final pass
			waitFor(t, 5*time.Minute, "every redone answer", func() bool { return lines() >= n+cut })
		}
		gen.Kill()
		t.Logf("kill %d: %d answer lines", kill+1, lines())
	}
	opts.combined = true
	if gen := startGendexWith(t, opts, bin, redo...); gen.Wait() != 0 {
		t.Fatalf("the redo run to its end: exit %d\n%s", gen.Wait(), gen.Stdout())
	}
	last := startGendexWith(t, opts, bin, redo...)
	last.Wait()
	out := last.Stdout()
	switch {
	case !asGoes && !strings.Contains(out, "nothing to do"):
		t.Errorf("a redo after the end has something to do:\n%s", out)
	case asGoes && (!strings.Contains(out, "every prompt read: none of the answers cut at the token limit is asked again") || !strings.Contains(out, "nothing to do")):
		t.Errorf("a redo after the end, deciding as it goes, asked again:\n%s", out)
	}
	after, total := newestAnswers(t, dir)
	if total != n+cut {
		t.Errorf("%d answer lines: want the %d answers and each of the %d cut asked again once", total, n, cut)
	}
	recut := 0
	for id, a := range after {
		if first[id].Finish == "length" && !a.Redo && !own[id] {
			t.Errorf("%s was cut and never asked again", id)
		}
		if own[id] && a.Redo {
			t.Errorf("%s was cut at its prompt's own limit and asked again with it", id)
		}
		if a.Redo && a.Finish == "length" {
			recut++
		}
	}
	if recut == 0 || recut == cut {
		t.Errorf("%d of the %d redone answers cut again; the test wants some cut again and some whole", recut, cut)
	}
	t.Logf("%d of the %d redone answers cut again", recut, cut)
	checkRedone(t, bin, db, dir, "cut")
}

// TestRedoConversations: conversations answered turn by turn are asked
// again from their first cut turn: the turns before it are kept as they
// are, the later ones asked again in order (their context changed), each
// new turn and the new conversation line replacing the old ones; a fresh
// index of the folder counts the same; a second redo with a higher limit
// keeps the turns the first one made whole.
func TestRedoConversations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	root := t.TempDir()
	writeShardPrompts(t, root, 30)
	for _, ds := range []string{"I", "T"} {
		os.RemoveAll(filepath.Join(root, ds))
	}
	dir := filepath.Join(root, "C")
	db := filepath.Join(t.TempDir(), "g.db")
	url := startSimProcess(t, bin, "--unmarked", "--seed", "5")
	gen := func(args ...string) string {
		t.Helper()
		code, out := runGendexCombined(t, bin, append([]string{"--db", db, "gen", "--server", url}, append(args, root)...)...)
		if code != 0 {
			t.Fatalf("gen %v: exit %d\n%s", args, code, out)
		}
		return out
	}
	type turnLine struct {
		ID     string `json:"id"`
		Turn   int    `json:"turn"`
		Tokens int64  `json:"completion_tokens"`
		Finish string `json:"finish_reason"`
		Redo   bool   `json:"redo"`
	}
	turns := func() (newest map[string]turnLine, n int) {
		newest = map[string]turnLine{}
		eachJSONLine(t, filepath.Join(dir, "turns.jsonl"), func(b []byte) {
			var l turnLine
			json.Unmarshal(b, &l)
			n++
			if _, seen := newest[l.ID]; !seen || l.Redo {
				newest[l.ID] = l
			}
		})
		return newest, n
	}
	gen("--max-new-tokens", "1") // every turn cut
	out := gen("--max-new-tokens", "4", "--redo", "truncated")
	if !strings.Contains(out, "30 of the answers cut at the token limit are asked again (30 of them conversations") {
		t.Errorf("the redo does not ask the 30 conversations again:\n%s", out)
	}
	checkOwedLines(t, out) // no conversation is half done below 0 (issue 39)
	first, n1 := turns()
	for id, l := range first {
		if !l.Redo {
			t.Errorf("%s: turn %d (cut at turn 1) was not asked again", id, l.Turn)
		}
	}
	newest, lines := newestAnswers(t, dir)
	if lines != 60 {
		t.Errorf("%d conversation lines, want 30 and 30 redone", lines)
	}
	for id, a := range newest {
		if !a.Redo {
			t.Errorf("%s: the conversation line was not replaced", id)
		}
	}
	// A higher limit: only the conversations still cut, from their first
	// cut turn; a turn 1 the first redo made whole stays.
	checkOwedLines(t, gen("--max-new-tokens", "64", "--redo", "truncated"))
	second, n2 := turns()
	kept := 0
	for id, l := range first {
		if l.Finish != "length" {
			if second[id] != l || n2 < n1 {
				t.Errorf("%s: turn 1, whole after the first redo, was asked again", id)
			}
			kept++
		}
	}
	if kept == 0 {
		t.Log("no turn 1 was whole at 4 tokens: the keep rule went unchecked")
	}
	for _, db := range []string{db, filepath.Join(t.TempDir(), "fresh.db")} {
		if !strings.HasSuffix(db, "g.db") {
			mustRunGendex(t, bin, "--db", db, "ingest", root)
		}
		r := mustQueryJSON[map[string]any](t, bin, db, "progress")
		if len(r) != 1 || r[0]["raw"] != 30.0 {
			t.Errorf("%s: progress %v, want 30 conversations answered once", filepath.Base(db), r)
		}
		_, out, _ := runGendex(t, bin, "", "--db", db, "query", "tokens", "--format", "json")
		var tok []map[string]any
		json.Unmarshal([]byte(out), &tok)
		newest, _ := newestAnswers(t, dir)
		var sum int64
		for _, a := range newest {
			sum += a.Tokens
		}
		if len(tok) != 1 || tok[0]["completion_tokens"] != float64(sum) {
			t.Errorf("%s: tokens %v, want the newest conversations' %d", filepath.Base(db), tok, sum)
		}
	}
}

// TestRedoConversationIsItsOwnTurns: a redo of the answers cut at the
// limit takes "a" for a conversation only when its own turns (a#1, ...)
// are in the index, not those of a conversation whose id begins "a#":
// "a", cut at this run's limit, is not asked again. Before, a#x's turns
// made "a" a conversation, asked again for no reason.
func TestRedoConversationIsItsOwnTurns(t *testing.T) {
	t.Parallel()
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
