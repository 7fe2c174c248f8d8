package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
)

// A dataset of several samples per prompt (gen --samples) names each
// answer by its prompt's id and its sample, as query missing does: query
// list (its rows and its cursor), query show, and check --ids --format
// json, for one-turn prompts and for conversations.

// sampledRoot answers, with gen --samples 2, a dataset of 3 one-turn
// prompts (O) and one of 2 three-turn conversations (C) under a new
// root, indexed in db.
func sampledRoot(t *testing.T, bin string) (root, db string) {
	t.Helper()
	url := simURL(t, sim.Config{Seed: 6, Slots: 8, DecodeTokensPerSec: 5000})
	root = t.TempDir()
	writeIDPrompts(t, filepath.Join(root, "O"), "O", 3)
	writeConversationPrompts(t, filepath.Join(root, "C"), "C", 2, 3)
	db = filepath.Join(t.TempDir(), "g.db")
	mustRunGendex(t, bin, "--db", db, "gen", "--server", url, "--api", "chat", "--max-new-tokens", "8", "--samples", "2", root)
	return root, db
}

// unitKeys are the units of prompts name-00001 to name-0000n, samples 0
// to k-1, as "ID/SAMPLE", in id then sample order.
func unitKeys(name string, n, k int) []string {
	var keys []string
	for i := 1; i <= n; i++ {
		for s := range k {
			keys = append(keys, fmt.Sprintf("%s-%05d/%d", name, i, s))
		}
	}
	return keys
}

// TestCheckIDsJSONNamesUnits: check --ids REASON --format json prints a
// JSON array of {dataset, id, sample}, one per answer counted (here every
// answer, made by the simulator), for one dataset and for several; a
// dataset of one sample per prompt gives sample 0.
func TestCheckIDsJSONNamesUnits(t *testing.T) {
	bin := gendexBinary(t)
	t.Parallel()
	root, db := sampledRoot(t, bin)
	type unit struct {
		Dataset string `json:"dataset"`
		ID      string `json:"id"`
		Sample  *int   `json:"sample"`
	}
	ask := func(paths ...string) []string {
		t.Helper()
		args := append([]string{"--db", db, "check", "--ids", "simulated", "--format", "json"}, paths...)
		code, out, stderr := runGendex(t, bin, "", args...)
		var units []unit
		if err := json.Unmarshal([]byte(out), &units); code != 0 || err != nil {
			t.Fatalf("check %q: exit %d, %v\n%s\n%s", args, code, err, out, stderr)
		}
		var got []string
		for _, u := range units {
			if u.Sample == nil {
				t.Fatalf("check %q: a row without its sample: %+v\n%s", args, u, out)
			}
			got = append(got, fmt.Sprintf("%s:%s/%d", u.Dataset, u.ID, *u.Sample))
		}
		return got
	}
	withDataset := func(ds string, keys []string) []string {
		for i := range keys {
			keys[i] = ds + ":" + keys[i]
		}
		return keys
	}
	for _, c := range []struct {
		paths []string
		want  []string
	}{
		{[]string{filepath.Join(root, "C")}, withDataset("C", unitKeys("C", 2, 2))},
		{[]string{filepath.Join(root, "O")}, withDataset("O", unitKeys("O", 3, 2))},
		{[]string{root}, append(withDataset("C", unitKeys("C", 2, 2)), withDataset("O", unitKeys("O", 3, 2))...)},
	} {
		if got := ask(c.paths...); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("check --ids simulated --format json %s:\n%v\nwant\n%v", c.paths, got, c.want)
		}
	}

	one := t.TempDir()
	writeIDPrompts(t, filepath.Join(one, "N"), "N", 2)
	url := simURL(t, sim.Config{Seed: 6, Slots: 8, DecodeTokensPerSec: 5000})
	mustRunGendex(t, bin, "--db", db, "gen", "--server", url, "--max-new-tokens", "8", one)
	if got, want := ask(filepath.Join(one, "N")), withDataset("N", unitKeys("N", 2, 1)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("check --ids simulated --format json of one sample per prompt:\n%v\nwant\n%v", got, want)
	}
}

// listPage is one page of `query list` as a table: its rows' (id,
// sample) as "ID/SAMPLE", and the cursor its "more after" row names
// (after: "" when it is the last page).
func listPage(t *testing.T, bin, db string, args ...string) (units []string, afterID, afterSample string) {
	t.Helper()
	code, out, stderr := runGendex(t, bin, "", append([]string{"--db", db, "query", "list", "--format", "table"}, args...)...)
	if code != 0 {
		t.Fatalf("query list %q: exit %d\n%s", args, code, stderr)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if f := strings.Fields(lines[0]); len(f) < 2 || f[0] != "id" || f[1] != "sample" {
		t.Fatalf("query list %q: columns %q; want id, sample first\n%s", args, f, out)
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if strings.HasPrefix(l, " more after") {
			return units, f[2], f[3]
		}
		if strings.ContainsRune(l, 0) {
			t.Fatalf("query list %q: a row with a NUL byte: %q", args, l)
		}
		units = append(units, f[0]+"/"+f[1])
	}
	return units, "", ""
}

// TestQueryListNamesUnits: query list of a dataset of several samples per
// prompt has a sample column after the id (answers and turns, ID#TURN),
// never the index's key, and its "more after" cursor, given back as
// --after ID --after-sample S, walks every unit once, page boundaries
// inside a prompt's samples included; --before with --before-sample
// walks back. A dataset of one sample has no sample column.
func TestQueryListNamesUnits(t *testing.T) {
	bin := gendexBinary(t)
	t.Parallel()
	_, db := sampledRoot(t, bin)
	walk := func(ds, stage string) []string {
		var all []string
		var cursor []string
		for range 20 {
			units, id, sample := listPage(t, bin, db, append([]string{ds, "--stage", stage, "--limit", "3"}, cursor...)...)
			all = append(all, units...)
			if id == "" {
				return all
			}
			cursor = []string{"--after", id, "--after-sample", sample}
		}
		t.Fatalf("query list %s: more than 20 pages", ds)
		return nil
	}
	if got, want := walk("O", "raw"), unitKeys("O", 3, 2); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("list O page by page: %v; want %v", got, want)
	}
	// The turns before the last (the answer holds the last), in the
	// index's key order: a unit's key has NUL where a turn's has '#'.
	var turns []string
	for _, u := range unitKeys("C", 2, 2) {
		id, s, _ := strings.Cut(u, "/")
		for i := 1; i <= 2; i++ {
			turns = append(turns, fmt.Sprintf("%s#%d/%s", id, i, s))
		}
	}
	got := walk("C", "turns")
	slices.Sort(got)
	slices.Sort(turns)
	if fmt.Sprint(got) != fmt.Sprint(turns) {
		t.Errorf("list C --stage turns page by page: %v; want %v", got, turns)
	}
	if got, _, _ := listPage(t, bin, db, "C", "--before", "C-00002", "--before-sample", "1", "--limit", "2"); fmt.Sprint(got) != "[C-00001/1 C-00002/0]" {
		t.Errorf("list C --before C-00002 --before-sample 1 --limit 2: %v; want [C-00001/1 C-00002/0]", got)
	}

	one := t.TempDir()
	writeIDPrompts(t, filepath.Join(one, "N"), "N", 2)
	mustRunGendex(t, bin, "--db", db, "gen", "--server", simURL(t, sim.Config{Seed: 6, Slots: 8}), "--max-new-tokens", "4", one)
	out := mustRunGendex(t, bin, "--db", db, "query", "list", "N", "--format", "tsv")
	if head, _, _ := strings.Cut(out, "\n"); head != "id\tfinish\tprompt_tokens\tcompletion_tokens\treasoning_tokens\tfinished\tmessage\tsource\ttool_stop" {
		t.Errorf("list of a dataset of one sample: columns %q; want them as they were", head)
	}
}

// TestQueryShowSample: query show ID --sample S shows sample S's answer
// (a turn's: ID#TURN --stage turns --sample S), the prompt's line for
// any sample, and says there is no such sample past the dataset's.
func TestQueryShowSample(t *testing.T) {
	bin := gendexBinary(t)
	t.Parallel()
	_, db := sampledRoot(t, bin)
	type line struct {
		ID     string `json:"id"`
		Sample *int   `json:"sample"`
		Turn   int    `json:"turn"`
	}
	show := func(args ...string) line {
		t.Helper()
		out := mustRunGendex(t, bin, append([]string{"--db", db, "query", "show"}, args...)...)
		var l line
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("query show %q: %v\n%s", args, err, out)
		}
		return l
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"O", "O-00002", "--sample", "1"}, "O-00002/1#0"},
		{[]string{"O", "O-00002", "--sample", "0"}, "O-00002/0#0"},
		{[]string{"O", "O-00002"}, "O-00002/0#0"},
		{[]string{"C", "C-00001", "--sample", "1"}, "C-00001/1#0"},
		{[]string{"C", "C-00001#2", "--stage", "turns", "--sample", "1"}, "C-00001/1#2"},
		{[]string{"O", "O-00003", "--stage", "prompts", "--sample", "1"}, "O-00003/none#0"},
	} {
		l := show(c.args...)
		sample := "none"
		if l.Sample != nil {
			sample = fmt.Sprint(*l.Sample)
		}
		if got := fmt.Sprintf("%s/%s#%d", l.ID, sample, l.Turn); got != c.want {
			t.Errorf("query show %q: the line of %s; want %s", c.args, got, c.want)
		}
	}
	code, out, stderr := runGendex(t, bin, "", "--db", db, "query", "show", "O", "O-00001", "--sample", "2")
	if code != 3 || !strings.Contains(stderr, "dataset O has 2 samples per prompt (0 to 1): no sample 2") {
		t.Errorf("query show O O-00001 --sample 2: exit %d, %q %s; want not there, saying the samples there are", code, out, stderr)
	}
}
