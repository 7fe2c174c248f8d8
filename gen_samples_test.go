package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/sim"
)

// gen --samples N: N answers per prompt, each (id, sample) a unit asked
// exactly once through SIGKILL and resume and across shards, each drawing
// its own --mix value the same way every time; the index counts units as
// a fresh ingest of the files does; a resume with another N is refused.

// unitLine is what the samples tests read of a line gen wrote.
type unitLine struct {
	ID      string `json:"id"`
	Sample  *int   `json:"sample"`
	Samples int    `json:"samples"`
	Turn    int    `json:"turn"`
	Prov    struct {
		Drawn map[string]string `json:"drawn"`
	} `json:"provenance"`
}

// unitsIn reads the lines of the files matching pattern under dir by
// (id, sample[, turn]): each key's lines, and each key's draw.
func unitsIn(t *testing.T, dir, pattern string, samples int) (lines map[string]int, draws map[string]string) {
	t.Helper()
	lines, draws = map[string]int{}, map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, pattern))
	for _, f := range files {
		eachJSONLine(t, f, func(b []byte) {
			var l unitLine
			if err := json.Unmarshal(b, &l); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if l.Sample == nil || *l.Sample < 0 || *l.Sample >= samples || l.Samples != samples {
				t.Fatalf("%s: a line without its sample of %d: %s", f, samples, b)
			}
			k := fmt.Sprintf("%s/%d", l.ID, *l.Sample)
			if l.Turn > 0 {
				k += fmt.Sprintf("#%d", l.Turn)
			}
			lines[k]++
			d, _ := json.Marshal(l.Prov.Drawn)
			draws[k] = string(d)
		})
	}
	return lines, draws
}

// checkUnitsOnce fails t unless lines holds want keys, each once.
func checkUnitsOnce(t *testing.T, what string, lines map[string]int, want int) {
	t.Helper()
	if len(lines) != want {
		t.Errorf("%s: %d distinct (id, sample) lines, want %d", what, len(lines), want)
	}
	for k, n := range lines {
		if n != 1 {
			t.Errorf("%s: %s written %d times", what, k, n)
		}
	}
}

// samplesData writes a dataset of one-turn prompts (O, 40) and one of
// three-turn conversations (C, 20) under a new root.
func samplesData(t *testing.T) string {
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "O"), "O", 40)
	writeConversationPrompts(t, filepath.Join(root, "C"), "C", 20, 3)
	return root
}

// sameIndexAsFresh fails t unless the index db answers progress, tokens
// and files as a fresh index of the folders does.
func sameIndexAsFresh(t *testing.T, bin, db string, folders ...string) {
	t.Helper()
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	mustRunGendex(t, bin, append([]string{"--db", fresh, "ingest"}, folders...)...)
	for _, q := range []string{"progress", "tokens", "files"} {
		ask := func(db string) string {
			return mustRunGendex(t, bin, "--db", db, "query", q, "--format", "json")
		}
		if got, want := ask(db), ask(fresh); got != want {
			t.Errorf("query %s: the index says\n%s\na fresh index of the files says\n%s", q, got, want)
		}
	}
}

// TestGenSamplesExactlyOnceThroughKills: gen --samples 3 --mix, killed at
// least three times while writing each dataset and resumed, writes each
// (id, sample) of a one-turn dataset and of a three-turn one exactly once (and each turn
// of each sample's conversation once), each drawing what an uninterrupted
// run draws, and its index equals a fresh ingest of the files.
func TestGenSamplesExactlyOnceThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin, "--seed", "5", "--slots", "16", "--decode-tps", "150")
	root := samplesData(t)
	run := func(db, out string, paths ...string) []string {
		return append([]string{"--db", db, "gen", "--server", url, "--api", "chat", "--out", out, "--concurrency", "12", "--max-new-tokens", "24",
			"--samples", "3", "--mix", mixTemp, "--seed", "9"}, paths...)
	}
	whole := t.TempDir()
	if out := mustRunGendex(t, bin, run(filepath.Join(whole, "g.db"), whole, root)...); !strings.Contains(out, "20/20 prompts done (every sample), 60/60 answers") {
		t.Errorf("the summary does not count prompts done and answers:\n%s", out)
	}
	_, wantO := unitsIn(t, filepath.Join(whole, "O"), "raw_responses*.jsonl", 3)
	_, wantC := unitsIn(t, filepath.Join(whole, "C"), "raw_responses*.jsonl", 3)

	// Each dataset killed on its own at least three times while it
	// writes (the datasets go one after the other), then the whole root.
	killed := t.TempDir()
	db := filepath.Join(killed, "g.db")
	for _, ds := range []string{"C", "O"} {
		size := func() (n int64) {
			for _, f := range []string{"raw_responses.jsonl", "turns.jsonl"} {
				if fi, err := os.Stat(filepath.Join(killed, ds, f)); err == nil {
					n += fi.Size()
				}
			}
			return n
		}
		kills := 0
		for i := 0; i < 16 && kills < 3; i++ {
			before := size()
			ok, p := killWhileWriting(t, bin, run(db, killed, filepath.Join(root, ds)), func() bool { return size() != before }, time.Duration(40+50*(i%5))*time.Millisecond)
			if ok {
				kills++
			} else if p.Wait() != 0 {
				t.Fatalf("run %d of %s ended with exit %d\n%s", i, ds, p.Wait(), p.Stderr())
			} else {
				break // done before a kill
			}
		}
		if kills < 3 {
			t.Errorf("%s: %d runs were killed while writing; the test wants 3", ds, kills)
		}
	}
	mustRunGendex(t, bin, run(db, killed, root)...)
	for _, c := range []struct {
		ds    string
		n     int
		turns int
		want  map[string]string
	}{{"O", 40, 0, wantO}, {"C", 20, 2, wantC}} {
		lines, draws := unitsIn(t, filepath.Join(killed, c.ds), "raw_responses*.jsonl", 3)
		checkUnitsOnce(t, c.ds+" answers", lines, 3*c.n)
		if c.turns > 0 {
			turns, _ := unitsIn(t, filepath.Join(killed, c.ds), "turns*.jsonl", 3)
			checkUnitsOnce(t, c.ds+" earlier turns", turns, 3*c.n*c.turns)
		}
		sameDraws(t, c.ds+" killed and resumed", c.want, draws)
		differ := 0
		for i := 1; i <= c.n; i++ {
			id := fmt.Sprintf("%s-%05d", c.ds, i)
			if draws[id+"/0"] != draws[id+"/1"] || draws[id+"/1"] != draws[id+"/2"] {
				differ++
			}
		}
		if differ == 0 {
			t.Errorf("%s: every prompt's samples drew the same value: the draw does not take the sample", c.ds)
		}
	}
	sameIndexAsFresh(t, bin, db, root, killed)
	type row struct {
		Dataset     string
		Prompts     int
		Raw         int
		MissingRaw  int `json:"missing_raw"`
		Samples     int
		PromptsDone int `json:"prompts_done"`
	}
	rows, err := queryJSON[row](t, bin, db, "progress")
	if err != nil || len(rows) != 2 {
		t.Fatalf("progress: %v %+v", err, rows)
	}
	for _, r := range rows {
		if r.Samples != 3 || r.Raw != 3*r.Prompts || r.PromptsDone != r.Prompts || r.MissingRaw != 0 {
			t.Errorf("progress %+v: want 3 samples, 3 answers per prompt, every prompt done", r)
		}
	}
}

// TestGenSamplesShards: the two shards of a run of --samples 2 answer
// every (id, sample) once between them, each in its own files.
func TestGenSamplesShards(t *testing.T) {
	bin := gendexBinary(t)
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 2, Slots: 16, DecodeTokensPerSec: 5000})
	root := samplesData(t)
	out := t.TempDir()
	for _, s := range []string{"0/2", "1/2"} {
		mustRunGendex(t, bin, "--db", filepath.Join(out, strings.Replace(s, "/", "of", 1)+".db"), "gen", "--server", url, "--out", out,
			"--max-new-tokens", "8", "--samples", "2", "--shard", s, root)
	}
	for _, c := range []struct {
		ds string
		n  int
	}{{"O", 40}, {"C", 20}} {
		lines, _ := unitsIn(t, filepath.Join(out, c.ds), "raw_responses.shard-*.jsonl", 2)
		checkUnitsOnce(t, c.ds+" across shards", lines, 2*c.n)
	}
}

// TestGenSamplesResumeRefused: a dataset answered with --samples 2 is
// refused to a run with --samples 3 or none, naming both counts and what
// to do, before anything is sent.
func TestGenSamplesResumeRefused(t *testing.T) {
	bin := gendexBinary(t)
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 2, Slots: 8, DecodeTokensPerSec: 5000})
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "O"), "O", 6)
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", db, "gen", "--server", url, "--max-new-tokens", "8", root}
	mustRunGendex(t, bin, append(args, "--samples", "2")...)
	raw := filepath.Join(root, "O", "raw_responses.jsonl")
	// One answer deleted: the refused runs would have one to ask.
	b, _ := os.ReadFile(raw)
	os.WriteFile(raw, b[:strings.LastIndexByte(strings.TrimSuffix(string(b), "\n"), '\n')+1], 0o644)
	mustRunGendex(t, bin, "--db", db, "ingest", root)
	before, _ := os.ReadFile(raw)
	for _, more := range [][]string{{"--samples", "3"}, nil} {
		code, _, stderr := runGendex(t, bin, "", append(args, more...)...)
		now := "--samples 1"
		if more != nil {
			now = "--samples 3"
		}
		if code == 0 || !strings.Contains(stderr, "made with --samples 2") || !strings.Contains(stderr, "this run asks "+now) ||
			!strings.Contains(stderr, "give --samples 2") || !strings.Contains(stderr, "nothing was sent") {
			t.Errorf("gen %v: exit %d; want refused, naming --samples 2 and %s:\n%s", more, code, now, stderr)
		}
		if after, _ := os.ReadFile(raw); string(after) != string(before) {
			t.Errorf("gen %v was refused but wrote answers", more)
		}
	}
	mustRunGendex(t, bin, append(args, "--samples", "2")...)
	lines, _ := unitsIn(t, filepath.Join(root, "O"), "raw_responses.jsonl", 2)
	checkUnitsOnce(t, "resumed with the same --samples", lines, 12)
}

// TestGenSamplesRecords: gen --samples 2 --export writes one training
// record per sample, with its id and sample, and so does a fresh
// `gendex export`; prompt tokens are summed per request (each sample's
// request counts its prompt).
func TestGenSamplesRecords(t *testing.T) {
	bin := gendexBinary(t)
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 2, Slots: 8, DecodeTokensPerSec: 5000})
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "O"), "O", 10)
	db := filepath.Join(t.TempDir(), "g.db")
	mustRunGendex(t, bin, "--db", db, "gen", "--server", url, "--max-new-tokens", "8", "--samples", "2", "--export", "ids", "--include-truncated", root)
	dir := filepath.Join(root, "O")
	recs, _ := unitsIn(t, dir, "tokenized.jsonl", 2)
	checkUnitsOnce(t, "gen --export's records", recs, 20)
	if out := mustRunGendex(t, bin, "--db", db, "query", "missing", "O", "--stage", "tokenized", "--format", "tsv", "--no-header"); out != "" {
		t.Errorf("answers without a record: %q", out)
	}
	os.Remove(filepath.Join(dir, "tokenized.jsonl"))
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	mustRunGendex(t, bin, "--db", fresh, "ingest", root)
	mustRunGendex(t, bin, "--db", fresh, "export", "--format", "ids", "--include-truncated", root)
	recs, _ = unitsIn(t, dir, "tokenized.jsonl", 2)
	checkUnitsOnce(t, "gendex export's records", recs, 20)
	var sum int64
	eachJSONLine(t, filepath.Join(dir, "raw_responses.jsonl"), func(b []byte) {
		var a struct {
			PromptTokens int64 `json:"prompt_tokens"`
		}
		json.Unmarshal(b, &a)
		sum += a.PromptTokens
	})
	type tokens struct {
		Prompt int64 `json:"prompt_tokens"`
	}
	if rows, err := queryJSON[tokens](t, bin, fresh, "tokens", "O"); err != nil || len(rows) == 0 || rows[0].Prompt != sum || sum == 0 {
		t.Errorf("tokens %+v %v: want %d prompt tokens, each of the 20 requests' own count", rows, err, sum)
	}
}

// TestGenSamplesToolStepsThroughKills: tool conversations asked step by
// step with --samples 2, killed while steps are written and resumed:
// each sample's conversation is its own, its steps written once each and
// its raw line once, and the index equals a fresh ingest of the folder.
func TestGenSamplesToolStepsThroughKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin, "--tool-calls", "--tool-call-parser", "qwen25", "--slots", "16", "--decode-tps", "300")
	dir := simToolDataset(t, 10) // 20 conversations: m0..m9 and g0..g9
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", db, "gen", "--server", url, "--api", "chat", "--concurrency", "8", "--max-new-tokens", "200", "--samples", "2", dir}
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, "turns.jsonl"))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	kills := 0
	for i := 0; i < 12 && kills < 4; i++ {
		before := size()
		ok, p := killWhileWriting(t, bin, args, func() bool { return size() != before }, time.Duration(30+60*(i%5))*time.Millisecond)
		if ok {
			kills++
		} else if p.Wait() != 0 {
			t.Fatalf("run %d ended with exit %d\n%s", i, p.Wait(), p.Stderr())
		}
	}
	mustRunGendex(t, bin, args...)
	if kills < 4 {
		t.Errorf("%d runs were killed while writing steps; the test wants 4", kills)
	}
	lines, _ := unitsIn(t, dir, "raw_responses.jsonl", 2)
	checkUnitsOnce(t, "tool conversations", lines, 40)
	steps, _ := unitsIn(t, dir, "turns.jsonl", 2)
	for k, n := range steps {
		if n != 1 {
			t.Errorf("step %s written %d times", k, n)
		}
	}
	if len(steps) == 0 {
		t.Error("no step was written to turns.jsonl")
	}
	sameIndexAsFresh(t, bin, db, filepath.Dir(dir))
}

// TestGenSamplesRedoTruncated: --redo truncated with --samples 2, killed
// once while it writes and resumed, asks each cut (id, sample) again
// exactly once, each new answer replacing its own unit's (the index counts
// every unit once, none owed), as a fresh ingest of the files does.
func TestGenSamplesRedoTruncated(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin, "--seed", "4", "--slots", "8", "--decode-tps", "200")
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "O"), "O", 30)
	db := filepath.Join(t.TempDir(), "g.db")
	gen := []string{"--db", db, "gen", "--server", url, "--concurrency", "8", "--samples", "2"}
	mustRunGendex(t, bin, append(gen, "--max-new-tokens", "4", root)...)
	raw := filepath.Join(root, "O", "raw_responses.jsonl")
	// One sample's answer deleted: the redo asks it as a missing answer,
	// not as one asked again, beside its prompt's other sample.
	b, _ := os.ReadFile(raw)
	var kept []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.HasPrefix(l, `{"sample":1,"samples":2,"id":"O-00001"`) {
			kept = append(kept, l)
		}
	}
	if len(kept) != 60 { // 59 lines and the empty string after the last
		t.Fatalf("%d lines kept, want 59", len(kept)-1)
	}
	os.WriteFile(raw, []byte(strings.Join(kept, "")), 0o644)
	mustRunGendex(t, bin, "--db", db, "ingest", root)
	size := func() int64 {
		fi, _ := os.Stat(raw)
		return fi.Size()
	}
	redo := append(gen, "--redo", "truncated", "--max-new-tokens", "12", root)
	before := size()
	killed, p := killWhileWriting(t, bin, redo, func() bool { return size() != before }, 100*time.Millisecond)
	if !killed {
		t.Fatalf("the redo was not killed while it wrote (exit %d)\n%s", p.Wait(), p.Stderr())
	}
	mustRunGendex(t, bin, redo...)
	first, redone := map[string]int{}, map[string]int{}
	eachJSONLine(t, raw, func(b []byte) {
		var l struct {
			ID     string
			Sample *int
			Redo   bool
		}
		json.Unmarshal(b, &l)
		if l.Sample == nil {
			t.Fatalf("a line without its sample: %s", b)
		}
		k := fmt.Sprintf("%s/%d", l.ID, *l.Sample)
		if l.Redo {
			redone[k]++
		} else {
			first[k]++
		}
	})
	checkUnitsOnce(t, "first answers", first, 60)
	checkUnitsOnce(t, "answers asked again", redone, 59)
	if redone["O-00001/1"] != 0 || first["O-00001/1"] != 1 {
		t.Errorf("the deleted answer was asked %d times as a redo, %d as a first answer; want 0 and 1", redone["O-00001/1"], first["O-00001/1"])
	}
	type row struct {
		Raw, Answered, Redo int
		MissingRaw          int `json:"missing_raw"`
		PromptsDone         int `json:"prompts_done"`
	}
	rows, err := queryJSON[row](t, bin, db, "progress", "O")
	if err != nil || len(rows) != 1 || rows[0] != (row{Raw: 60, Answered: 60, PromptsDone: 30}) {
		t.Errorf("progress after the redo: %+v %v; want 60 answers, none owed, every prompt done", rows, err)
	}
	sameIndexAsFresh(t, bin, db, root)
}

// TestGenSamplesRedoList: --redo FILE with --samples 3 asks again every
// sample of a listed id, and only the sample a line names in query
// missing's form (bare id and sample, or with its header); each once,
// replacing its own unit's answer.
func TestGenSamplesRedoList(t *testing.T) {
	bin := gendexBinary(t)
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 2, Slots: 8, DecodeTokensPerSec: 5000})
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "O"), "O", 6)
	db := filepath.Join(t.TempDir(), "g.db")
	gen := []string{"--db", db, "gen", "--server", url, "--max-new-tokens", "8", "--samples", "3"}
	mustRunGendex(t, bin, append(gen, root)...)
	list := filepath.Join(t.TempDir(), "redo.txt")
	writeTestFile(t, list, "O-00001\nO-00002\t2\ndataset\tstage\tid\tsample\nO\traw\tO-00004\t0\n")
	for range 2 { // the second run finds the list's redo done
		mustRunGendex(t, bin, append(gen, "--redo", list, root)...)
	}
	redone := redoneUnits(t, filepath.Join(root, "O", "raw_responses.jsonl"))
	want := map[string]int{"O-00001/0": 1, "O-00001/1": 1, "O-00001/2": 1, "O-00002/2": 1, "O-00004/0": 1}
	if fmt.Sprint(redone) != fmt.Sprint(want) {
		t.Errorf("asked again: %v; want %v", redone, want)
	}
	type row struct {
		Raw, Answered, Redo int
		PromptsDone         int `json:"prompts_done"`
	}
	if rows, err := queryJSON[row](t, bin, db, "progress", "O"); err != nil || len(rows) != 1 || rows[0] != (row{Raw: 18, Answered: 18, PromptsDone: 6}) {
		t.Errorf("progress after the redo: %+v %v; want 18 answers, none owed", rows, err)
	}
	sameIndexAsFresh(t, bin, db, root)
}

// TestCheckIDsNameSamples: check --ids lists a sampled dataset's answers
// by unit, as gen --redo FILE reads them (ID<TAB>SAMPLE for one dataset,
// query missing's DATASET, raw, ID, SAMPLE for several), never the
// index's unit key with its NUL byte; and that list redoes each unit once.
func TestCheckIDsNameSamples(t *testing.T) {
	bin := gendexBinary(t)
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 3, Slots: 8, DecodeTokensPerSec: 5000})
	root := t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "A"), "A", 2)
	writeIDPrompts(t, filepath.Join(root, "B"), "B", 1)
	db := filepath.Join(t.TempDir(), "g.db")
	gen := []string{"--db", db, "gen", "--server", url, "--max-new-tokens", "8", "--samples", "2"}
	mustRunGendex(t, bin, append(gen, root)...)

	code, one, stderr := runGendex(t, bin, "", "--db", db, "check", "--ids", "simulated", filepath.Join(root, "B"))
	if code != 0 || one != "B-00001\t0\nB-00001\t1\n" {
		t.Errorf("check --ids simulated B: exit %d, %q %s; want each sample of B-00001, ID<TAB>SAMPLE", code, one, stderr)
	}
	code, both, stderr := runGendex(t, bin, "", "--db", db, "check", "--ids", "simulated", root)
	want := "A\traw\tA-00001\t0\nA\traw\tA-00001\t1\nA\traw\tA-00002\t0\nA\traw\tA-00002\t1\nB\traw\tB-00001\t0\nB\traw\tB-00001\t1\n"
	if code != 0 || both != want {
		t.Errorf("check --ids simulated ROOT: exit %d,\n%q %s; want\n%q", code, both, stderr, want)
	}

	list := filepath.Join(t.TempDir(), "redo.txt")
	writeTestFile(t, list, both)
	mustRunGendex(t, bin, append(gen, "--redo", list, root)...)
	redone := redoneUnits(t, filepath.Join(root, "A", "raw_responses.jsonl"), filepath.Join(root, "B", "raw_responses.jsonl"))
	if want := map[string]int{"A-00001/0": 1, "A-00001/1": 1, "A-00002/0": 1, "A-00002/1": 1, "B-00001/0": 1, "B-00001/1": 1}; fmt.Sprint(redone) != fmt.Sprint(want) {
		t.Errorf("gen --redo of check's list asked again %v; want each unit once: %v", redone, want)
	}
}

// TestGenSamplesSeededDiffer: with --seed, each sample of a prompt is sent
// a seed of its own (the seed plus the sample), so a seeded server (the
// simulator honours sampling_seed as SGLang does) answers the samples
// apart, and a second run from nothing answers each sample as the first;
// each answer's provenance says which seed its sample was sent.
func TestGenSamplesSeededDiffer(t *testing.T) {
	bin := gendexBinary(t)
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 4, Slots: 8, DecodeTokensPerSec: 5000})
	outputs := func() map[string]string {
		root := t.TempDir()
		writeIDPrompts(t, filepath.Join(root, "S"), "S", 5)
		db := filepath.Join(t.TempDir(), "g.db")
		mustRunGendex(t, bin, "--db", db, "gen", "--server", url, "--max-new-tokens", "24", "--ignore-eos", "--seed", "7", "--samples", "3", root)
		out := map[string]string{}
		eachJSONLine(t, filepath.Join(root, "S", "raw_responses.jsonl"), func(b []byte) {
			var l struct {
				ID        string
				Sample    int
				OutputIDs []int `json:"output_ids"`
				Prov      struct {
					Sampling struct {
						Seed int `json:"sampling_seed"`
					}
					Gen map[string]any
				} `json:"provenance"`
			}
			json.Unmarshal(b, &l)
			// What was sent: the seed as given is sample 0's, and the
			// provenance says each sample s is sent it + s.
			if l.Prov.Sampling.Seed != 7 || l.Prov.Gen["sample_seed"] != "sampling_seed + sample" {
				t.Errorf("%s sample %d: provenance %+v; want sampling_seed 7 and gen.sample_seed %q", l.ID, l.Sample, l.Prov, "sampling_seed + sample")
			}
			out[fmt.Sprintf("%s/%d", l.ID, l.Sample)] = fmt.Sprint(l.OutputIDs)
		})
		return out
	}
	first := outputs()
	if len(first) != 15 {
		t.Fatalf("%d answers; want 15 (5 prompts, 3 samples)", len(first))
	}
	for i := 1; i <= 5; i++ {
		id := fmt.Sprintf("S-%05d", i)
		a, b, c := first[id+"/0"], first[id+"/1"], first[id+"/2"]
		if a == b || b == c || a == c {
			t.Errorf("%s: samples answered alike under one --seed: %s | %s | %s", id, a, b, c)
		}
	}
	if again := outputs(); fmt.Sprint(again) != fmt.Sprint(first) {
		t.Errorf("a second run from nothing answered the samples otherwise:\n%v\nwant\n%v", again, first)
	}
}

// TestGenSamplesGreedyNote: gen --samples N says once, before it starts,
// when some answers may be asked greedily, where a server answers a
// prompt's samples alike (--temperature 0 even with a seed, a --mix
// temperature part of 0, no temperature at all: the server's default),
// and goes on; it says nothing with a temperature above 0 for every
// answer or with one sample per prompt.
func TestGenSamplesGreedyNote(t *testing.T) {
	bin := gendexBinary(t)
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 5, Slots: 8, DecodeTokensPerSec: 5000})
	for _, c := range []struct {
		args []string
		note string // "": none
	}{
		{[]string{"--samples", "3", "--temperature", "0", "--seed", "7"}, "gen: --samples 3 with --temperature 0: greedy decoding answers a prompt's 3 samples alike"},
		{[]string{"--samples", "2"}, "gen: --samples 2 without --temperature: the server's default"},
		{[]string{"--samples", "2", "--mix", "temperature=0:0.25,1.0:0.75"}, "the answers that draw 0 (25%) are greedy"},
		{[]string{"--samples", "2", "--mix", "temperature=u(0.2,1.0):1"}, ""},
		{[]string{"--samples", "2", "--temperature", "0.7"}, ""},
		{[]string{"--temperature", "0"}, ""},
	} {
		root := t.TempDir()
		writeIDPrompts(t, filepath.Join(root, "G"), "G", 2)
		args := append([]string{"--db", filepath.Join(t.TempDir(), "g.db"), "gen", "--server", url, "--max-new-tokens", "4"}, append(c.args, root)...)
		code, _, stderr := runGendex(t, bin, "", args...)
		if code != 0 {
			t.Fatalf("gen %q: exit %d\n%s", c.args, code, stderr)
		}
		said := strings.Count(stderr, "are answered alike") + strings.Count(stderr, "samples alike")
		switch {
		case c.note == "" && said != 0:
			t.Errorf("gen %q: a greedy note where every answer is sampled or asked once:\n%s", c.args, stderr)
		case c.note != "" && (said != 1 || !strings.Contains(stderr, c.note)):
			t.Errorf("gen %q: want the note %q once; stderr:\n%s", c.args, c.note, stderr)
		}
	}
}

// redoneUnits counts the answer lines of files that say they replace an
// earlier answer ("redo"), by unit: "ID/SAMPLE" -> lines.
func redoneUnits(t *testing.T, files ...string) map[string]int {
	t.Helper()
	redone := map[string]int{}
	for _, f := range files {
		eachJSONLine(t, f, func(b []byte) {
			var l struct {
				ID     string
				Sample int
				Redo   bool
			}
			json.Unmarshal(b, &l)
			if l.Redo {
				redone[fmt.Sprintf("%s/%d", l.ID, l.Sample)]++
			}
		})
	}
	return redone
}
