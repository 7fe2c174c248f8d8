package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
)

// TestGenSurvivesSIGKILL kills a running `gendex gen` with SIGKILL at random
// moments, 25 times, resuming each time; then lets it finish. Every prompt
// must have exactly one answer, the index must agree with the files, and
// every answer must be the answer to its own prompt (README, gen, "Exactly
// once").
func TestGenSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a real process")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin, "--seed", "11", "--slots", "32", "--decode-tps", "400")
	root, out := t.TempDir(), t.TempDir()
	sets := []string{"K1", "K2"}
	// The 25 runs answer some 60 prompts before their kills (the first of
	// K1, one dataset after the other); the final run answers the rest.
	for _, name := range sets {
		writeIDPrompts(t, filepath.Join(root, name), name, 100)
	}
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", db, "gen", "--server", url, "--out", out, "--concurrency", "16", root}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	var raws []string
	for _, name := range sets {
		raws = append(raws, filepath.Join(out, name, "raw_responses.jsonl"))
	}
	kills := 0
	for i := range 25 {
		gen := startGendex(t, bin, "", args...)
		// The random moment of the kill is what is under test. Every other
		// kill comes soon after gen's file grows, somewhere in the write's
		// fsync and the index commits that follow it: the moments where
		// an answer is on disk and not yet in the index.
		var moment <-chan struct{}
		stop := make(chan struct{})
		if i%2 == 1 {
			moment = grown(raws, time.Duration(rng.IntN(10_000))*time.Microsecond, stop)
		} else {
			moment = after(time.Duration(5+rng.IntN(400))*time.Millisecond, stop)
		}
		select {
		case <-moment:
			gen.Kill()
			kills++
			// gen writes a flush in one write, so SIGKILL seldom leaves a
			// torn line; a power loss or a full disk can. Every fifth kill
			// leaves one in gen's own files, for the next run to cut.
			if kills%5 == 0 {
				for _, name := range sets {
					tearLastLine(t, filepath.Join(out, name, "raw_responses.jsonl"))
				}
			}
		case <-gen.Done():
			if code := gen.Wait(); code != 0 {
				t.Fatalf("run %d ended on its own with exit %d", i, code)
			}
		}
		close(stop)
	}
	mustRunGendex(t, bin, args...)
	if kills < 20 {
		t.Errorf("only %d of the runs were killed; the test wants at least 20", kills)
	}
	clean := client.New(simURL(t, sim.Config{Seed: 11}), client.Options{})
	for _, name := range sets {
		checkAnsweredOnce(t, db, filepath.Join(root, name, "prompts.jsonl"), filepath.Join(out, name, "raw_responses.jsonl"), name, clean)
	}
	if _, err := os.Stat(filepath.Join(out, "K1", "errors.jsonl")); !os.IsNotExist(err) {
		t.Errorf("an errors.jsonl exists though no prompt failed: %v", err)
	}
}

// after is closed after d, unless stop is closed first.
func after(d time.Duration, stop <-chan struct{}) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		select {
		case <-time.After(d):
			close(ch)
		case <-stop:
		}
	}()
	return ch
}

// grown is closed delay after one of paths has grown past its size when
// grown was called (a missing file counts as empty), unless stop is closed
// first.
func grown(paths []string, delay time.Duration, stop <-chan struct{}) <-chan struct{} {
	size := func(p string) int64 {
		fi, err := os.Stat(p)
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	was := make([]int64, len(paths))
	for i, p := range paths {
		was[i] = size(p)
	}
	ch := make(chan struct{})
	go func() {
		for {
			for i, p := range paths {
				if size(p) > was[i] {
					select {
					case <-time.After(delay):
						close(ch)
					case <-stop:
					}
					return
				}
			}
			select {
			case <-time.After(100 * time.Microsecond):
			case <-stop:
				return
			}
		}
	}()
	return ch
}

// tearLastLine appends to path the first half of its last line, without a
// newline: what a write cut short leaves. It reports whether it did: a
// missing or empty file, or one torn already (the run was killed before it
// cut it), is left alone.
func tearLastLine(t *testing.T, path string) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return false
	}
	body := data[:len(data)-1]
	last := body[strings.LastIndexByte(string(body), '\n')+1:]
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(last[:len(last)/2]); err != nil {
		t.Fatal(err)
	}
	return true
}

// simURL serves an in-process simulator for the test's lifetime.
func simURL(t *testing.T, cfg sim.Config) string {
	t.Helper()
	hs := httptest.NewServer(sim.New(cfg).Handler())
	t.Cleanup(hs.Close)
	return hs.URL
}

// writeIDPrompts writes n pre-tokenized prompts, ids name-00001..., to
// dir/prompts.jsonl.
func writeIDPrompts(t *testing.T, dir, name string, n int) {
	t.Helper()
	var b strings.Builder
	for i := 1; i <= n; i++ {
		line, _ := json.Marshal(map[string]any{
			"id":        fmt.Sprintf("%s-%05d", name, i),
			"input_ids": sim.Encode(fmt.Sprintf("prompt number %d", i), true),
		})
		b.Write(line)
		b.WriteByte('\n')
	}
	writePrompts(t, dir, b.String())
}

// checkAnsweredOnce checks that every prompt has exactly one answer line in
// raw, that the index in db agrees with a fresh index of raw, and that each
// answer is the one the simulator c gives to that very prompt (at gen's
// default of 128 new tokens).
func checkAnsweredOnce(t *testing.T, db, prompts, raw, name string, c *client.Client) {
	t.Helper()
	type line struct {
		ID        string `json:"id"`
		InputIDs  []int  `json:"input_ids"`
		OutputIDs []int  `json:"output_ids"`
	}
	read := func(path string) []line {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var ls []line
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.ID == "" {
				t.Fatalf("%s: bad line %q: %v", path, sc.Text(), err)
			}
			ls = append(ls, l)
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		return ls
	}
	answers := map[string][]line{}
	for _, l := range read(raw) {
		answers[l.ID] = append(answers[l.ID], l)
	}
	ps := read(prompts)
	for _, p := range ps {
		if n := len(answers[p.ID]); n != 1 {
			t.Errorf("%s: %d answer lines; want exactly 1", p.ID, n)
		}
	}
	if len(answers) != len(ps) {
		t.Errorf("%s: %d distinct answers for %d prompts", name, len(answers), len(ps))
	}

	// The index agrees with the file: a fresh index of the file counts the same.
	tokens := func(db string) string {
		return mustGendex(t, testEnv(nil), "--db", db, "query", "tokens", name, "--format", "tsv", "--no-header").stdout
	}
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	mustGendex(t, testEnv(nil), "--db", fresh, "ingest", "--dataset", name, "--stage", "raw", raw)
	if got, want := tokens(db), tokens(fresh); got != want {
		t.Errorf("%s: the index says tokens %q; a fresh index of the file says %q", name, got, want)
	}
	var progress []struct {
		Raw        int  `json:"raw"`
		MissingRaw *int `json:"missing_raw"`
	}
	p := mustGendex(t, testEnv(nil), "--db", db, "query", "progress", name, "--format", "json").stdout
	if err := json.Unmarshal([]byte(p), &progress); err != nil || len(progress) != 1 ||
		progress[0].Raw != len(ps) || progress[0].MissingRaw == nil || *progress[0].MissingRaw != 0 {
		t.Errorf("%s: progress %s (%v); want raw %d, missing_raw 0", name, p, err, len(ps))
	}

	var files []struct {
		Stage      string `json:"stage"`
		Duplicates int    `json:"duplicates"`
	}
	f := mustGendex(t, testEnv(nil), "--db", db, "query", "files", name, "--format", "json").stdout
	decodeJSON(t, f, &files)
	for _, fl := range files {
		if fl.Duplicates != 0 {
			t.Errorf("%s: the index counted duplicates: %s", name, f)
		}
	}

	maxNew := 128
	for _, p := range ps {
		if len(answers[p.ID]) == 0 {
			continue
		}
		res, err := c.Generate(t.Context(), client.GenerateRequest{InputIDs: p.InputIDs, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}})
		if err != nil {
			t.Fatal(err)
		}
		if got := answers[p.ID][0].OutputIDs; !reflect.DeepEqual(got, res.OutputIDs) {
			t.Errorf("%s: answer %v is not the answer to its prompt (%v)", p.ID, got, res.OutputIDs)
		}
	}
}
