package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
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
