package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSpecAgainstSim: gen against the simulator with
// --sim-spec-draft-tokens writes each answer's spec fields, and query
// spec's accept_length, verify_steps, accept_rate and unknown_spec equal
// what the test computes from the answer lines themselves (Σ completion /
// Σ verify; a conversation line counts when every turn has its fields; a
// one-token answer took no verify step and has none, and its tokens count
// in no figure: dataset short, half of it one-token answers, tells the
// two apart). Without the setting every figure is unknown. gendex sim
// refuses --spec-draft-tokens 1.
func TestSpecAgainstSim(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(ds string, lines []string) {
		dir := filepath.Join(root, ds)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writePrompts(t, dir, strings.Join(lines, "\n")+"\n")
	}
	var ids, conv []string
	for i := range 40 {
		maxNew := 50 + 7*i
		if i == 3 {
			maxNew = 1 // one token: no verify step
		}
		ids = append(ids, fmt.Sprintf(`{"id":"i%d","input_ids":[%d,%d,%d],"max_new_tokens":%d}`, i, 300+i, 301+i, 302+i, maxNew))
	}
	for i := range 10 {
		conv = append(conv, fmt.Sprintf(`{"id":"c%d","messages":[{"role":"user","content":"first %d"},{"role":"assistant","content":"old"},{"role":"user","content":"second %d"}],"max_new_tokens":80}`, i, i, i))
	}
	var short []string
	for i := range 20 {
		maxNew := 8
		if i%2 == 0 {
			maxNew = 1
		}
		short = append(short, fmt.Sprintf(`{"id":"s%d","input_ids":[%d,%d],"max_new_tokens":%d}`, i, 500+i, 501+i, maxNew))
	}
	write("ids", ids)
	write("conv", conv)
	write("short", short)
	out := t.TempDir()
	db := filepath.Join(t.TempDir(), "g.db")
	if r := gendex(t, testEnv(nil), "--db", db, "gen", "--server", "sim", "--sim-spec-draft-tokens", "4", "--out", out, root); r.code != 0 {
		t.Fatalf("gen: exit %d (%v)\n%s", r.code, r.err, r.stderr)
	}

	r := gendex(t, testEnv(nil), "--db", db, "query", "spec", "--format", "json")
	if r.code != 0 {
		t.Fatalf("query spec: exit %d\n%s", r.code, r.stderr)
	}
	var rows []map[string]any
	decodeJSON(t, r.stdout, &rows)
	for _, row := range rows {
		ds := row["dataset"].(string)
		w := specFromLines(t, out, ds)
		if w.verify == 0 || w.tokens == 0 {
			t.Fatalf("%s: no spec fields in the answer lines", ds)
		}
		length := math.Round(float64(w.tokens)/float64(w.verify)*100) / 100
		rate := math.Round(float64(w.accepted)/float64(w.proposed)*1000) / 1000
		if row["records"] != float64(w.records) || row["verify_steps"] != float64(w.verify) || row["accept_length"] != length ||
			row["accept_rate"] != rate || row["unknown_spec"] != float64(w.unknown) {
			t.Errorf("%s: query spec %v; from the lines: %d records, Σ completion %d, Σ verify %d (accept length %.2f), rate %.3f, %d unknown",
				ds, row, w.records, w.tokens, w.verify, length, rate, w.unknown)
		}
		if p10, p90 := row["p10_accept_length"].(float64), row["p90_accept_length"].(float64); p10 <= 1 || p10 > p90 || p90 > 4 {
			t.Errorf("%s: accept length from p10 %v to p90 %v (4 draft tokens: 1 to 4)", ds, p10, p90)
		}
		if ds == "ids" && w.unknown != 1 {
			t.Errorf("ids: %d answers without spec fields, want the one-token answer alone", w.unknown)
		}
		if all := math.Round(float64(w.tokens+w.unknownTokens)/float64(w.verify)*100) / 100; ds == "short" && (w.unknown < 10 || all == length) {
			t.Errorf("short: %d answers without spec fields, accept length %v with their tokens and %v without: the data does not tell them apart", w.unknown, all, length)
		}
	}
	if len(rows) != 3 {
		t.Errorf("query spec: %d rows, want 3:\n%s", len(rows), r.stdout)
	}

	// The same prompts without speculative decoding: unknown, never 0.
	db2 := filepath.Join(t.TempDir(), "g.db")
	if r := gendex(t, testEnv(nil), "--db", db2, "gen", "--server", "sim", "--out", t.TempDir(), root); r.code != 0 {
		t.Fatalf("gen: exit %d\n%s", r.code, r.stderr)
	}
	r = gendex(t, testEnv(nil), "--db", db2, "query", "spec", "ids", "--format", "json")
	if !strings.Contains(r.stdout, `"verify_steps": null, "accept_length": null, "accept_rate": null`) || !strings.Contains(r.stdout, `"unknown_spec": 40`) {
		t.Errorf("without a drafter:\n%s", r.stdout)
	}

	if r := gendex(t, testEnv(nil), "sim", "--spec-draft-tokens", "1"); r.code != 2 || !strings.Contains(r.stderr, "spec-draft-tokens") {
		t.Errorf("sim --spec-draft-tokens 1: exit %d\n%s", r.code, r.stderr)
	}
}

// specSums are an answer file's speculative-decoding figures, summed over
// the answers (a conversation's over its turns, when every turn has them):
// records, completion tokens, verify steps, accepted and proposed drafts,
// and the answers without the figures and their tokens.
type specSums struct{ records, tokens, verify, accepted, proposed, unknown, unknownTokens int64 }

// specFromLines sums out/ds/raw_responses.jsonl's figures, checking each
// spec_accept_length is completion over verify.
func specFromLines(t *testing.T, out, ds string) specSums {
	t.Helper()
	f, err := os.Open(filepath.Join(out, ds, "raw_responses.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w specSums
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var line struct {
			Completion *int64   `json:"completion_tokens"`
			Verify     *int64   `json:"spec_verify_ct"`
			Accepted   *int64   `json:"spec_accepted_drafts"`
			Proposed   *int64   `json:"spec_proposed_drafts"`
			Length     *float64 `json:"spec_accept_length"`
			Turns      []struct {
				Completion *int64   `json:"completion_tokens"`
				Verify     *int64   `json:"spec_verify_ct"`
				Accepted   *int64   `json:"spec_accepted_drafts"`
				Proposed   *int64   `json:"spec_proposed_drafts"`
				Length     *float64 `json:"spec_accept_length"`
			} `json:"turns"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatal(err)
		}
		w.records++
		verify, acc, prop := line.Verify, line.Accepted, line.Proposed
		if verify != nil && *line.Length != float64(*line.Completion)/float64(*verify) {
			t.Errorf("%s: spec_accept_length %v, want completion/verify", ds, *line.Length)
		}
		if verify == nil && len(line.Turns) > 0 {
			var v, a, p int64
			all := true
			for _, turn := range line.Turns {
				if turn.Verify == nil {
					all = false
					break
				}
				if got, want := *turn.Length, float64(*turn.Completion)/float64(*turn.Verify); got != want {
					t.Errorf("%s: a turn's spec_accept_length %v, want completion/verify %v", ds, got, want)
				}
				v, a, p = v+*turn.Verify, a+*turn.Accepted, p+*turn.Proposed
			}
			if all {
				verify, acc, prop = &v, &a, &p
			}
		}
		if verify == nil {
			w.unknown++
			if line.Completion != nil {
				w.unknownTokens += *line.Completion
			}
			continue
		}
		w.tokens += *line.Completion
		w.verify += *verify
		w.accepted += *acc
		w.proposed += *prop
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestSpecNoteNamesRealCommands: every gendex command query spec's note
// names runs (an unknown command is a usage error, exit 2). Before, it
// named "gendex series --servers", which does not exist.
func TestSpecNoteNamesRealCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeAnswered(t, dir)
	db := filepath.Join(t.TempDir(), "g.db")
	env := testEnv(nil)
	mustGendex(t, env, "--db", db, "ingest", dir)
	r := mustGendex(t, env, "--db", db, "query", "spec")
	note := r.stdout + r.stderr
	cmds := regexp.MustCompile(`gendex [a-z]+(?: [a-z]+)*(?: --[a-z]+(?: [0-9a-z]+)?)*`).FindAllString(note, -1)
	if len(cmds) < 3 {
		t.Fatalf("the note names %d commands, want those it gives (query server, query series, plot accept):\n%s", len(cmds), note)
	}
	for _, c := range cmds {
		args := append([]string{"--db", db}, strings.Fields(c)[1:]...)
		if got := gendex(t, env, args...); got.code == 2 {
			t.Errorf("the note names %q, which is no command: %s", c, got)
		}
	}
}
