package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gendex/store"
)

// TestShardOfIsStable pins the shard hash: it is part of the file format
// (a shard resumed by another version must answer the same prompts), so a
// change of hash must fail here.
func TestShardOfIsStable(t *testing.T) {
	t.Parallel()
	// The values are FNV-1a 64 of the id's UTF-8 bytes mod 4, 16, 3 and
	// 10, computed by an independent implementation (Python). A power of
	// two sees only the hash's low bits; 3 and 10 see all 64 of them.
	for id, want := range map[string][4]int{ // id -> shard of 4, of 16, of 3, of 10
		"B1_ids-00001": {3, 3, 2, 5}, "B2_text-00042": {2, 10, 1, 4}, "conv-7": {3, 11, 0, 9}, "x": {3, 7, 2, 1},
		"": {1, 5, 2, 7}, "日本語-1": {1, 13, 2, 5}, "prompts.jsonl:17": {2, 14, 0, 8},
	} {
		if got := [4]int{store.ShardOf(id, 4), store.ShardOf(id, 16), store.ShardOf(id, 3), store.ShardOf(id, 10)}; got != want {
			t.Errorf("ShardOf(%q) = %v, want %v", id, got, want)
		}
	}
	s := store.Shard{I: 3, N: 16}
	if got := s.FileName("raw_responses.jsonl"); got != "raw_responses.shard-0003-of-0016.jsonl" {
		t.Errorf("FileName: %s", got)
	}
	if back, ok := store.ShardOfFile("/x/" + s.FileName("errors.jsonl")); !ok || back != s {
		t.Errorf("ShardOfFile: %v %v", back, ok)
	}
}

// writeShardPrompts writes three datasets of n prompts: token ids, text,
// and two-turn conversations.
func writeShardPrompts(t *testing.T, root string, n int) map[string]map[string]bool {
	t.Helper()
	all := map[string]map[string]bool{}
	for _, ds := range []string{"I", "T", "C"} {
		dir := filepath.Join(root, ds)
		os.MkdirAll(dir, 0o755)
		var b strings.Builder
		all[ds] = map[string]bool{}
		for i := range n {
			id := fmt.Sprintf("%s-%05d", ds, i)
			all[ds][id] = true
			var line any
			switch ds {
			case "I":
				line = map[string]any{"id": id, "input_ids": []int{1, 3 + i%50, 7, 9, 11 + i%7}}
			case "T":
				line = map[string]any{"id": id, "text": fmt.Sprintf("write about %d", i)}
			case "C":
				line = map[string]any{"id": id, "conversations": []map[string]string{{"from": "human", "value": fmt.Sprintf("why %d", i)}, {"from": "gpt", "value": "old"}, {"from": "human", "value": "and then?"}, {"from": "gpt", "value": "old"}}}
			}
			j, _ := json.Marshal(line)
			b.Write(j)
			b.WriteByte('\n')
		}
		writePrompts(t, dir, b.String())
	}
	return all
}

// TestShardsSurviveSIGKILL: four `gen --shard I/4`, each with its own
// simulator process and its own index, on one prompt folder, SIGKILLed and
// restarted at random until each is done. Every prompt is answered exactly
// once across the shards' files, each shard answered only its own, a fifth
// process's ingest of the folder counts every dataset complete with no
// duplicate, and an `ingest --follow` beside the run shows the total grow,
// in query and in watch (a shell in a real terminal).
func TestShardsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	const shards, n = 4, 400
	root := t.TempDir()
	all := writeShardPrompts(t, root, n)
	watchDB := filepath.Join(t.TempDir(), "watch.db")
	startGendex(t, bin, "", "--db", watchDB, "ingest", "--follow", root)

	// watch, in a real terminal, on the follower's index (asked through
	// its socket while it writes).
	tm := newTerm(t, t.TempDir())
	tm.typeLine(bin + " --db " + watchDB + " shell")
	tm.waitFor("gendex>")
	tm.typeLine("watch 1")
	totalRE := regexp.MustCompile(`TOTAL\s+(\d+)\s+(\d+)`)
	var watched []string // the TOTAL rows' done counts, as they changed

	var wg sync.WaitGroup
	kills := make([]int, shards)
	for i := range shards {
		url := startSimProcess(t, bin, "--seed", fmt.Sprint(40+i), "--slots", "16", "--decode-tps", "400")
		db := filepath.Join(t.TempDir(), fmt.Sprintf("shard%d.db", i))
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			for attempt := 0; ; attempt++ {
				args := []string{"--db", db, "gen", "--server", url, "--shard", fmt.Sprintf("%d/%d", i, shards), "--concurrency", "16", "--max-new-tokens", "24", root}
				if attempt < 3 { // killed at a random moment
					gen := startGendex(t, bin, "", args...)
					select {
					case <-time.After(time.Duration(200+rng.IntN(600)) * time.Millisecond):
						gen.Kill()
						kills[i]++
						continue
					case <-gen.Done():
						if code := gen.Wait(); code != 0 {
							t.Errorf("shard %d: exit %d\n%s", i, code, gen.Stderr())
							return
						}
						return // done before the kill
					}
				}
				if code, _, stderr := runGendex(t, bin, "", args...); code != 0 {
					t.Errorf("shard %d, last run: exit %d\n%s", i, code, stderr)
				}
				return
			}
		})
	}
	// The whole run, live, from the follower's index: the total grows.
	var seen []float64
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		code, out, _ := runGendex(t, bin, "", "--db", watchDB, "query", "progress", "--format", "json")
		if code != 0 {
			continue
		}
		var rows []map[string]any
		if json.Unmarshal([]byte(out), &rows) != nil {
			continue
		}
		total := 0.0
		for _, r := range rows {
			total += r["raw"].(float64)
		}
		if len(seen) == 0 || total != seen[len(seen)-1] {
			seen = append(seen, total)
		}
		if m := totalRE.FindAllStringSubmatch(tm.tmux("capture-pane", "-t", "t", "-p"), -1); len(m) > 0 {
			if done := m[len(m)-1][1]; len(watched) == 0 || done != watched[len(watched)-1] {
				watched = append(watched, done)
			}
		}
		if total == 3*n && len(watched) > 0 && watched[len(watched)-1] == fmt.Sprint(3*n) {
			break
		}
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if len(seen) < 2 || seen[len(seen)-1] != 3*n {
		t.Errorf("the follower's totals during the run: %v; want them to grow to %d", seen, 3*n)
	}
	if len(watched) < 2 || watched[len(watched)-1] != fmt.Sprint(3*n) {
		t.Errorf("watch's TOTAL during the run: %v; want it to grow to %d\n%s", watched, 3*n, tm.screen())
	}
	t.Logf("kills per shard: %v; totals seen: %v; watch's TOTAL: %v", kills, seen, watched)

	checkShardFilesOnce(t, root, shards, all)
	// A fifth process sees the whole run.
	db := filepath.Join(t.TempDir(), "all.db")
	mustRunGendex(t, bin, "--db", db, "ingest", root)
	out := mustRunGendex(t, bin, "--db", db, "query", "progress", "--format", "json")
	var rows []map[string]any
	json.Unmarshal([]byte(out), &rows)
	if len(rows) != 3 {
		t.Fatalf("progress: %s", out)
	}
	for _, r := range rows {
		if r["prompts"] != float64(n) || r["raw"] != float64(n) || r["missing_raw"] != 0.0 || r["skipped"] != 0.0 {
			t.Errorf("progress of the whole run: %v", r)
		}
	}
	code, out, stderr := runGendex(t, bin, "", "--db", db, "query", "shards", "--format", "json")
	var byShard []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &byShard) != nil || len(byShard) != 3*shards {
		t.Errorf("query shards: exit %d\n%s%s", code, out, stderr)
	}
	if code, out, stderr := runGendex(t, bin, "", "--db", db, "query", "files", "--format", "json"); code != 0 || strings.Contains(out, `"duplicates": 1`) {
		t.Errorf("duplicates in the whole run's files: exit %d\n%s%s", code, out, stderr)
	}
}

// checkShardFilesOnce checks the answer files of a sharded run under root:
// each dataset has one file per shard, each file answers only its shard's
// ids, and every prompt of all is answered exactly once across them.
func checkShardFilesOnce(t *testing.T, root string, shards int, all map[string]map[string]bool) {
	t.Helper()
	for ds, ids := range all {
		got := map[string]int{}
		files, _ := filepath.Glob(filepath.Join(root, ds, "raw_responses*.jsonl"))
		if len(files) != shards {
			t.Errorf("%s: answer files %v; want one per shard", ds, files)
		}
		for _, f := range files {
			sh, ok := store.ShardOfFile(f)
			if !ok {
				t.Errorf("%s is not a shard's file", f)
				continue
			}
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(fh)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				var m struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				got[m.ID]++
				if !sh.Has(m.ID) {
					t.Errorf("%s answered %s, of shard %d", f, m.ID, store.ShardOf(m.ID, shards))
				}
			}
			fh.Close()
		}
		for id := range ids {
			if got[id] != 1 {
				t.Errorf("%s: %s answered %d times", ds, id, got[id])
			}
		}
		if len(got) != len(ids) {
			t.Errorf("%s: %d ids answered, %d prompts", ds, len(got), len(ids))
		}
	}
}

// TestShardBesideUnshardedAnswers: a sharded run over a folder that holds
// an unsharded run's raw_responses.jsonl (every prompt answered) counts
// only its own prompts' answers from it: its index holds as many answers
// as it has prompts, and it has nothing to do.
func TestShardBesideUnshardedAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	root := t.TempDir()
	all := writeShardPrompts(t, root, 40)
	url := startSimProcess(t, bin, "--unmarked")
	run := func(db string, args ...string) string {
		t.Helper()
		code, stdout, stderr := runGendex(t, bin, "", append([]string{"--db", db, "gen", "--server", url, "--max-new-tokens", "16"}, append(args, root)...)...)
		if code != 0 {
			t.Fatalf("gen %v: exit %d\n%s%s", args, code, stdout, stderr)
		}
		return stdout + stderr
	}
	run(filepath.Join(t.TempDir(), "all.db"))
	for i := range 2 {
		db := filepath.Join(t.TempDir(), "shard.db")
		out := run(db, "--shard", fmt.Sprintf("%d/2", i))
		if !strings.Contains(out, "nothing to do") {
			t.Errorf("shard %d/2 over a folder whose every prompt is answered:\n%s", i, out)
		}
		for _, r := range mustQueryJSON[map[string]any](t, bin, db, "progress") {
			own := 0
			for id := range all[r["dataset"].(string)] {
				if store.ShardOf(id, 2) == i {
					own++
				}
			}
			if r["prompts"] != float64(own) || r["raw"] != float64(own) || r["missing_raw"] != 0.0 {
				t.Errorf("shard %d/2, %s: prompts %v, answers %v, missing %v; want its own %d prompts, each answered once", i, r["dataset"], r["prompts"], r["raw"], r["missing_raw"], own)
			}
		}
	}
}

// TestReshardAfterMovingFilesAway: README's recipe with node-local
// indexes (one per array task, kept between jobs): a 4-way run, then its
// files moved away by the commands gendex's refusal gives, as written, and
// an 8-way run on the same indexes. Every prompt is answered by the 8-way run, exactly once; tasks
// 0-3 say their index forgot the moved files' answers. Before, tasks 0-3
// said "nothing to do" from the answers of files no longer there, and half
// the prompts were never answered.
func TestReshardAfterMovingFilesAway(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	root := t.TempDir()
	all := writeShardPrompts(t, root, 60)
	url := startSimProcess(t, bin, "--unmarked")
	dbs := t.TempDir()
	task := func(i, n int) string {
		t.Helper()
		code, stdout, stderr := runGendex(t, bin, "", "--db", filepath.Join(dbs, fmt.Sprintf("gendex-%d.db", i)), "gen", "--server", url,
			"--max-new-tokens", "16", "--shard", fmt.Sprintf("%d/%d", i, n), root)
		if code != 0 {
			t.Fatalf("task %d/%d: exit %d\n%s%s", i, n, code, stdout, stderr)
		}
		return stdout + stderr
	}
	for i := range 4 {
		task(i, 4)
	}
	code, stdout, stderr := runGendex(t, bin, "", "--db", filepath.Join(dbs, "gendex-0.db"), "gen", "--server", url, "--shard", "0/8", root)
	out := stdout + stderr
	if code == 0 || !strings.Contains(out, "move its files out of the folders") {
		t.Fatalf("an 8-way run over a 4-way run's files: exit %d\n%s", code, out)
	}
	// The commands it gives, as written, one per folder.
	moves := 0
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, "mkdir -p ") {
			if o, err := exec.Command("sh", "-c", l).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", l, err, o)
			}
			moves++
		}
	}
	if moves != len(all) {
		t.Fatalf("the refusal gives %d commands for %d folders:\n%s", moves, len(all), out)
	}
	for i := range 8 {
		out := task(i, 8)
		if strings.Contains(out, "nothing to do") {
			t.Errorf("task %d/8 had nothing to do:\n%s", i, out)
		}
		if i < 4 && !strings.Contains(out, "forgotten") {
			t.Errorf("task %d/8 did not say its index forgot the moved files' answers:\n%s", i, out)
		}
	}
	for ds, ids := range all {
		seen := map[string]int{}
		files, _ := filepath.Glob(filepath.Join(root, ds, "raw_responses.shard-*-of-0008.jsonl"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.Lines(string(b)) {
				var a struct{ ID string }
				decodeJSON(t, line, &a)
				seen[a.ID]++
			}
		}
		for id := range ids {
			if seen[id] != 1 {
				t.Errorf("%s: %s answered %d times by the 8-way run, want once", ds, id, seen[id])
			}
		}
	}
}

// TestTwoShardCountsAtOnce: a 4-way and an 8-way run started on one folder
// while their servers load (here: never up) are never both accepted: the
// first to start claims the folder before its first request, and of two
// started at the same instant at least one is refused, saying what to do.
// Before, both waited for their servers and would have answered every
// prompt twice between them (the check read only files with answers).
func TestTwoShardCountsAtOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	for round := range 6 {
		root := t.TempDir()
		writeShardPrompts(t, root, 20)
		down := "http://" + freeAddr(t) // nothing listens: the servers are still loading
		start := func(n int) *gendexProc {
			return startGendex(t, bin, "", "--db", filepath.Join(t.TempDir(), "task.db"), "gen", "--server", down, "--wait-ready", "10m",
				"--shard", fmt.Sprintf("0/%d", n), root)
		}
		starts := make([]*gendexProc, 2)
		if round%2 == 1 { // one after the other: the first is waiting for its server
			starts[0] = start(4)
			waitFor(t, 30*time.Second, "the first run to wait for its server", func() bool { return strings.Contains(starts[0].Stderr(), "waiting for") })
			starts[1] = start(8)
		} else { // at the same instant
			starts[0], starts[1] = start(4), start(8)
		}
		var first int // the first to end: refused
		select {
		case <-starts[0].Done():
			first = 0
		case <-starts[1].Done():
			first = 1
		case <-time.After(60 * time.Second):
			t.Fatalf("round %d: a 4-way and an 8-way run on one folder both accepted:\n%s\n%s", round, starts[0].Stderr(), starts[1].Stderr())
		}
		if s := starts[first]; s.Wait() != 1 || !strings.Contains(s.Stderr(), "mkdir -p") {
			t.Errorf("round %d: a refused run: exit %d\n%s", round, s.Wait(), s.Stderr())
		}
		if round%2 == 1 && first != 1 {
			t.Errorf("round %d: the second run, started while the first waited, was accepted and the first refused", round)
		}
		for _, s := range starts {
			s.Kill()
		}
	}
}
