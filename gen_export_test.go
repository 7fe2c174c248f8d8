package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gendex/ingest/gen/sim"
)

// writeMixedPrompts writes n prompts to dir/prompts.jsonl, a third each
// text, chat messages and token ids.
func writeMixedPrompts(t *testing.T, dir, name string, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for i := range n {
		p := map[string]any{"id": fmt.Sprintf("%s-%05d", name, i)}
		q := fmt.Sprintf("question %d about %s", i, name)
		switch i % 3 {
		case 0:
			p["text"] = q
		case 1:
			p["messages"] = []map[string]string{{"role": "system", "content": "Be brief."}, {"role": "user", "content": q}}
		default:
			p["input_ids"] = sim.Encode(q, true)
		}
		line, _ := json.Marshal(p)
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeShareGPTPrompts writes n ShareGPT conversations of k human turns,
// each followed by an original gpt turn.
func writeShareGPTPrompts(t *testing.T, dir, name string, n, k int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for c := range n {
		var turns []map[string]string
		for u := range k {
			turns = append(turns, map[string]string{"from": "human", "value": fmt.Sprintf("%s %d: turn %d", name, c, u+1)},
				map[string]string{"from": "gpt", "value": "an original answer"})
		}
		line, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%s-%05d", name, c), "conversations": turns})
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(filepath.Join(dir, "prompts.jsonl"), b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// exportedOnce checks that every answer of dir's raw_responses.jsonl has
// exactly one record or exclusion, and nothing else has one; it returns
// the number of records.
func exportedOnce(t *testing.T, dir string) int {
	t.Helper()
	seen := map[string]int{}
	records := 0
	for _, name := range []string{"tokenized.jsonl", "excluded.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, name)); os.IsNotExist(err) {
			continue
		}
		for _, l := range jsonLines(t, filepath.Join(dir, name)) {
			seen[idOfLine(t, l)]++
			if name == "tokenized.jsonl" {
				records++
			}
		}
	}
	answers := 0
	for _, l := range jsonLines(t, filepath.Join(dir, "raw_responses.jsonl")) {
		answers++
		if id := idOfLine(t, l); seen[id] != 1 {
			t.Errorf("%s: %s has %d records and exclusions; want exactly 1", dir, id, seen[id])
		}
	}
	if len(seen) != answers {
		t.Errorf("%s: %d ids have records or exclusions; %d answers", dir, len(seen), answers)
	}
	return records
}

// sameExports checks that dirs a and b hold the same records, and the
// same exclusions (id, reason, detail; not the time).
func sameExports(t *testing.T, a, b string) {
	t.Helper()
	sorted := func(dir, name string, key func(map[string]json.RawMessage) string) []string {
		var out []string
		for _, l := range jsonLines(t, filepath.Join(dir, name)) {
			out = append(out, key(l))
		}
		sort.Strings(out)
		return out
	}
	whole := func(l map[string]json.RawMessage) string { b, _ := json.Marshal(l); return string(b) }
	// A detail may name the answers' folder (ids_prompt's command): b's
	// is read as a's.
	aRoot, bRoot := filepath.Dir(a), filepath.Dir(b)
	exclusion := func(l map[string]json.RawMessage) string {
		return string(l["id"]) + " " + string(l["reason"]) + " " + strings.ReplaceAll(string(l["detail"]), bRoot, aRoot)
	}
	if x, y := sorted(a, "tokenized.jsonl", whole), sorted(b, "tokenized.jsonl", whole); !slices.Equal(x, y) {
		t.Errorf("records differ: %d in %s, %d in %s", len(x), a, len(y), b)
		for i := range min(len(x), len(y)) {
			if x[i] != y[i] {
				t.Errorf("first difference:\n%.300s\n%.300s", x[i], y[i])
				break
			}
		}
	}
	if x, y := sorted(a, "excluded.jsonl", exclusion), sorted(b, "excluded.jsonl", exclusion); !slices.Equal(x, y) {
		t.Errorf("exclusions differ:\n%s\n%s", strings.Join(x, "\n"), strings.Join(y, "\n"))
	}
}

// copyAnswers copies the answer files of datasets from out to a new
// folder, for an export of its own.
func copyAnswers(t *testing.T, out string, datasets ...string) string {
	t.Helper()
	dst := t.TempDir()
	for _, ds := range datasets {
		os.MkdirAll(filepath.Join(dst, ds), 0o755)
		for _, name := range []string{"raw_responses.jsonl", "turns.jsonl"} {
			b, err := os.ReadFile(filepath.Join(out, ds, name))
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dst, ds, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	return dst
}

// TestGenExportMatchesExport: gen --export writes, while answers arrive,
// the records and exclusions that `gendex export` writes afterwards from
// the same answers, in both formats (conversations from /generate and from
// chat): text, chat and token-id prompts and 2-turn ShareGPT conversations
// asked turn by turn. Every answer has
// exactly one; progress has raw == tokenized + excluded and nothing left;
// a text prompt's ids record holds the ids the server's /v1/tokenize gives
// (gen sent those ids, and kept them in the answer line).
func TestGenExportMatchesExport(t *testing.T) {
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 4})
	for _, tc := range []struct{ api, format string }{{"generate", "ids"}, {"generate", "conversations"}, {"chat", "conversations"}} {
		format := tc.format
		t.Run(tc.api+"/"+format, func(t *testing.T) {
			t.Parallel()
			root, out := t.TempDir(), t.TempDir()
			writeMixedPrompts(t, filepath.Join(root, "mixed"), "mixed", 36)
			writeShareGPTPrompts(t, filepath.Join(root, "sg"), "sg", 12, 2)
			db := filepath.Join(t.TempDir(), "g.db")
			res := mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--api", tc.api, "--max-new-tokens", "48", "--export", format, "--out", out, root)
			var total [2]int // records, exclusions
			for _, ds := range []string{"mixed", "sg"} {
				records := exportedOnce(t, filepath.Join(out, ds))
				total[0] += records
				total[1] += len(jsonLines(t, filepath.Join(out, ds, "excluded.jsonl")))
			}
			if total[0] == 0 || total[1] == 0 {
				t.Fatalf("%d records and %d exclusions: the test wants both\n%s", total[0], total[1], res.stderr)
			}
			if !strings.Contains(res.stderr, fmt.Sprintf("%s records", format)) {
				t.Errorf("gen's summary does not count the records:\n%s", res.stderr)
			}
			var progress []struct {
				Dataset          string `json:"dataset"`
				Raw              int    `json:"raw"`
				Tokenized        int    `json:"tokenized"`
				Excluded         int    `json:"excluded"`
				MissingTokenized int    `json:"missing_tokenized"`
			}
			p := mustGendex(t, testEnv(nil), "--db", db, "query", "progress", "--format", "json")
			if err := json.Unmarshal([]byte(p.stdout), &progress); err != nil || len(progress) != 2 {
				t.Fatalf("progress %q: %v", p.stdout, err)
			}
			for _, r := range progress {
				if r.MissingTokenized != 0 || r.Raw != r.Tokenized+r.Excluded || r.Raw == 0 {
					t.Errorf("progress %+v: want raw == tokenized + excluded, nothing missing", r)
				}
			}

			// The same answers, exported afterwards by `gendex export`.
			again := copyAnswers(t, out, "mixed", "sg")
			mustGendex(t, testEnv(nil), "--db", filepath.Join(t.TempDir(), "x.db"), "export", "--format", format, root, again)
			for _, ds := range []string{"mixed", "sg"} {
				sameExports(t, filepath.Join(out, ds), filepath.Join(again, ds))
			}

			if format != "ids" {
				return
			}
			texts := map[string]string{}
			for _, l := range jsonLines(t, filepath.Join(root, "mixed", "prompts.jsonl")) {
				var s string
				if json.Unmarshal(l["text"], &s) == nil && s != "" {
					texts[idOfLine(t, l)] = s
				}
			}
			checked := 0
			for _, l := range jsonLines(t, filepath.Join(out, "mixed", "tokenized.jsonl")) {
				text, ok := texts[idOfLine(t, l)]
				if !ok {
					continue
				}
				var ids []int
				json.Unmarshal(l["input_ids"], &ids)
				if want := sim.Encode(text, true); len(ids) < len(want) || !slices.Equal(ids[:len(want)], want) {
					t.Errorf("%s: input_ids %v; want them to start with the server's ids of the text %v", l["id"], ids, want)
				}
				checked++
			}
			if checked == 0 {
				t.Error("no text prompt got a record")
			}
		})
	}
}

// TestGenExportRefusesIDsWithoutOutputIDs: --export ids against a server
// whose answers on the run's routes carry no output ids (SGLang's chat and
// completions endpoints, each: mixed prompts under --api chat, token-id
// prompts alone under --api completions) stops before the first request,
// with nothing written, instead of a run of exclusions; an unknown format is a usage
// error.
func TestGenExportRefusesIDsWithoutOutputIDs(t *testing.T) {
	t.Parallel()
	// Mixed prompts under --api chat go to both endpoints; token-id
	// prompts alone under --api completions go to /v1/completions alone.
	for _, tc := range []struct {
		api   string
		write func(t *testing.T, dir, name string, n int)
	}{{"chat", writeMixedPrompts}, {"completions", writeIDPrompts}} {
		root := t.TempDir()
		tc.write(t, filepath.Join(root, "m"), "m", 3)
		r := gendex(t, testEnv(nil), "--db", filepath.Join(t.TempDir(), "g.db"), "gen", "--server", "sim", "--api", tc.api, "--export", "ids", root)
		if r.code != 5 || !strings.Contains(r.stderr, "without the output token ids, so --export ids cannot make their records") || !strings.Contains(r.stderr, "no prompt was sent") {
			t.Errorf("gen --api %s --export ids: %s", tc.api, r)
		}
		if b, _ := os.ReadFile(filepath.Join(root, "m", "raw_responses.jsonl")); len(b) != 0 {
			t.Errorf("gen --api %s: the stopped run wrote answers:\n%s", tc.api, b)
		}
	}
	root := t.TempDir()
	writeMixedPrompts(t, filepath.Join(root, "m"), "m", 3)
	r := gendex(t, testEnv(nil), "--db", filepath.Join(t.TempDir(), "g.db"), "gen", "--server", "http://127.0.0.1:1", "--export", "tokens", root)
	if r.code != 2 || !strings.Contains(r.stderr, `unknown format "tokens"`) {
		t.Errorf("gen --export tokens: %s", r)
	}
}

// TestGenExportSurvivesSIGKILL kills a running `gendex gen --export ids`
// with SIGKILL at random moments (against a `gendex sim` process slow
// enough that every kill lands mid-run) at least 10 times, resuming each
// time; every third run goes without --export, so the next one has earlier
// answers to catch up on (text prompts among them, whose answers carry no
// prompt ids: gen tokenizes them on its server). After a last run, every answer has exactly one
// record or one exclusion, the records and exclusions are those `gendex
// export` writes from the same answers, and the index counts what a fresh
// ingest of the files counts.
func TestGenExportSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin, "--seed", "9", "--slots", "32", "--decode-tps", "150")
	root, out := t.TempDir(), t.TempDir()
	writeMixedPrompts(t, filepath.Join(root, "M"), "M", 900)
	writeShareGPTPrompts(t, filepath.Join(root, "S"), "S", 150, 2)
	db := filepath.Join(t.TempDir(), "g.db")
	args := func(export bool) []string {
		a := []string{"--db", db, "gen", "--server", url, "--concurrency", "24", "--max-new-tokens", "24", "--out", out, root}
		if export {
			a = append(a[:len(a)-1], "--export", "ids", root)
		}
		return a
	}
	rawSize := func() (n int64) {
		for _, ds := range []string{"M", "S"} {
			for _, name := range []string{"raw_responses.jsonl", "turns.jsonl"} {
				if fi, err := os.Stat(filepath.Join(out, ds, name)); err == nil {
					n += fi.Size()
				}
			}
		}
		return n
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	kills, plain := 0, 0
	for i := 0; kills < 10 && i < 40; i++ {
		export := i%3 != 2
		before := rawSize()
		killed, gen := killWhileWriting(t, bin, args(export), func() bool { return rawSize() != before }, time.Duration(rng.IntN(400))*time.Millisecond)
		if killed {
			kills++
			if !export {
				plain++
			}
			continue
		}
		if code := gen.Wait(); code != 0 {
			t.Fatalf("run %d ended on its own with exit %d\n%s", i, code, gen.Stderr())
		}
		break // every prompt answered: the rest is the last run's
	}
	final := mustRunGendex(t, bin, args(true)...)
	t.Logf("%d kills (%d of runs without --export); the final run:\n%s", kills, plain, final)
	if kills < 10 {
		t.Errorf("%d runs were killed mid-run; the test wants at least 10", kills)
	}
	records := 0
	for _, ds := range []string{"M", "S"} {
		records += exportedOnce(t, filepath.Join(out, ds))
	}
	if records == 0 {
		t.Fatal("no records")
	}
	again := copyAnswers(t, out, "M", "S")
	mustRunGendex(t, bin, "--db", filepath.Join(t.TempDir(), "x.db"), "export", "--format", "ids", "--server", url, root, again)
	for _, ds := range []string{"M", "S"} {
		sameExports(t, filepath.Join(out, ds), filepath.Join(again, ds))
	}
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	mustGendex(t, testEnv(nil), "--db", fresh, "ingest", root, out)
	for _, q := range []string{"progress", "files"} {
		ask := func(db string) string {
			return mustGendex(t, testEnv(nil), "--db", db, "query", q, "--format", "json").stdout
		}
		if got, want := ask(db), ask(fresh); got != want {
			t.Errorf("query %s: the index says\n%s\na fresh index of the files says\n%s", q, got, want)
		}
	}
}

// TestExportRefusesMixedFormats: records of one format are never appended
// to a tokenized.jsonl holding the other, by export or by gen --export;
// the error says how to write the other format.
func TestExportRefusesMixedFormats(t *testing.T) {
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 2})
	root := t.TempDir()
	writeMixedPrompts(t, filepath.Join(root, "m"), "m", 6)
	db := filepath.Join(t.TempDir(), "g.db")
	mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", url, "--export", "ids", root)
	tok := filepath.Join(root, "m", "tokenized.jsonl")
	before, err := os.ReadFile(tok)
	if err != nil || len(before) == 0 {
		t.Fatalf("no ids records: %v", err)
	}
	// A new prompt: without the check, gen would append its record.
	f, err := os.OpenFile(filepath.Join(root, "m", "prompts.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(f, `{"id":"m-new","text":"one more"}`)
	f.Close()
	for _, args := range [][]string{
		{"--db", filepath.Join(t.TempDir(), "e.db"), "export", "--format", "conversations", root},
		{"--db", db, "gen", "--server", url, "--export", "conversations", root},
	} {
		r := gendex(t, testEnv(nil), args...)
		if r.code != 1 || !strings.Contains(r.stderr, "holds ids records; conversations records would mix two formats") {
			t.Errorf("gendex %q: %s", args, r)
		}
	}
	if after, _ := os.ReadFile(tok); !bytes.Equal(before, after) {
		t.Error("tokenized.jsonl changed")
	}
}

// TestGenExportCatchUpNeedsNoServer: gen --export on a finished run makes
// the records of its answers without waiting for a server when no prompt
// must be tokenized; when one must, it waits for the first --server (up to
// --wait-ready) and says so.
func TestGenExportCatchUpNeedsNoServer(t *testing.T) {
	t.Parallel()
	// A real server's answers (the simulator's would need gen to ask the
	// next --server whether it is the simulator too: TestDryRunThenRealRun).
	url := simURL(t, sim.Config{Seed: 3, Unmarked: true})
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "ids"), "ids", 20)
	db := filepath.Join(t.TempDir(), "g.db")
	mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", url, root)
	r := mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", "http://127.0.0.1:1", "--wait-ready", "1s", "--export", "ids", root)
	if !strings.Contains(r.stderr, "--export: ids: 20 answers written earlier had no record") || !strings.Contains(r.stderr, "nothing to do") {
		t.Errorf("gen --export after the run:\n%s", r.stderr)
	}
	if n := exportedOnce(t, filepath.Join(root, "ids")); n == 0 {
		t.Error("no records")
	}

	text := t.TempDir()
	writeMixedPrompts(t, filepath.Join(text, "t"), "t", 3)
	db2 := filepath.Join(t.TempDir(), "g.db")
	mustGendex(t, testEnv(nil), "--db", db2, "gen", "--server", url, text)
	r = gendex(t, testEnv(nil), "--db", db2, "gen", "--server", "http://127.0.0.1:1", "--wait-ready", "1s", "--export", "ids", text)
	if r.code != 1 || !strings.Contains(r.stderr, "waiting for http://127.0.0.1:1") {
		t.Errorf("gen --export ids with a text prompt to tokenize and no server: %s", r)
	}
}

// TestGenExportHoldsItsOutputs: from its start (here, while it waits for
// its server), gen --export holds its outputs: an export of the same
// folder with its own index is refused, instead of gen failing at its
// first record; gen then goes on to the end.
func TestGenExportHoldsItsOutputs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	addr := freeAddr(t)
	root := t.TempDir()
	writeMixedPrompts(t, filepath.Join(root, "h"), "h", 60)
	gen := startGendex(t, bin, "", "--db", filepath.Join(t.TempDir(), "g.db"), "gen", "--server", "http://"+addr, "--wait-ready", "60s",
		"--max-new-tokens", "24", "--export", "ids", root)
	waitFor(t, 20*time.Second, "gen to wait for its server", func() bool { return strings.Contains(gen.Stderr(), "waiting for") })
	code, stdout, stderr := runGendex(t, bin, "", "--db", filepath.Join(t.TempDir(), "x.db"), "export", "--format", "ids", root)
	if code == 0 || !strings.Contains(stdout+stderr, "is being written by another gendex gen or export") {
		t.Errorf("export while gen --export runs: exit %d\n%s%s", code, stdout, stderr)
	}
	startGendex(t, bin, "", "sim", "--listen", addr, "--seed", "6")
	if code := gen.Wait(); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, gen.Stderr())
	}
	if n := exportedOnce(t, filepath.Join(root, "h")); n == 0 {
		t.Error("no records")
	}
}

// TestGenExportHoldsItsRecordsThroughCatchUp: gen --export holds
// tokenized.jsonl locked from before its catch-up export to its end, so no
// other writer (here: a lock taken the moment gen says what the catch-up
// made, as an export of the same folder starting then would) can slip in
// between, and gen never finds its own file taken. Before, export closed
// the file and gen opened it again after that message: the lock taken in
// between made gen refuse its own file ("is being written by another
// gendex gen or export"), which a loaded machine also did on its own
// (a forked child still holding the closed descriptor).
func TestGenExportHoldsItsRecordsThroughCatchUp(t *testing.T) {
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 3, Unmarked: true})
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "ids"), "ids", 20)
	db := filepath.Join(t.TempDir(), "g.db")
	mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", url, root)

	tok := filepath.Join(root, "ids", "tokenized.jsonl")
	w := &lockOnMessage{t: t, path: tok, message: "answers written earlier had no record"}
	defer w.release()
	e := *testEnv(nil)
	e.Stderr = w
	err := run(context.Background(), &e, []string{"--db", db, "gen", "--server", url, "--export", "ids", root})
	if !w.tried {
		t.Fatalf("gen never said what its catch-up made:\n%s", w.buf.String())
	}
	if w.took {
		t.Errorf("another writer could lock %s between gen's catch-up export and its run", tok)
	}
	if err != nil {
		t.Fatalf("gen --export: %v\n%s", err, w.buf.String())
	}
	cut := 0
	for _, l := range jsonLines(t, filepath.Join(root, "ids", "raw_responses.jsonl")) {
		if string(l["finish_reason"]) == `"length"` {
			cut++
		}
	}
	if n := exportedOnce(t, filepath.Join(root, "ids")); n != 20-cut {
		t.Errorf("%d records, want 20 less the %d answers cut at 128 tokens", n, cut)
	}
}

// lockOnMessage is a stderr that, the first time message is written,
// tries to lock path as another gendex writer would (took: it could, and
// holds it until release).
type lockOnMessage struct {
	t           *testing.T
	path        string
	message     string
	mu          sync.Mutex
	buf         bytes.Buffer
	tried, took bool
	held        *os.File
}

func (w *lockOnMessage) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.tried && strings.Contains(w.buf.String(), w.message) {
		w.tried = true
		f, err := os.OpenFile(w.path, os.O_RDWR|os.O_APPEND, 0)
		if err != nil {
			w.t.Errorf("open %s: %v", w.path, err)
			return len(p), nil
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			w.took, w.held = true, f
		} else {
			f.Close()
		}
	}
	return len(p), nil
}

func (w *lockOnMessage) release() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.held != nil {
		w.held.Close()
	}
}
