package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// simAnswer is what TestSimLimitCutsFewer reads of an answer line.
type simAnswer struct {
	ID     string `json:"id"`
	Text   string `json:"text"`
	Finish string `json:"finish_reason"`
	Redo   bool   `json:"redo"`
}

// simAnswers reads dir's raw_responses.jsonl: each id's newest answer.
func simAnswers(t *testing.T, dir string) map[string]simAnswer {
	t.Helper()
	m := map[string]simAnswer{}
	eachJSONLine(t, filepath.Join(dir, "raw_responses.jsonl"), func(b []byte) {
		var a simAnswer
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if _, seen := m[a.ID]; !seen || a.Redo {
			m[a.ID] = a
		}
	})
	return m
}

func countCut(answers map[string]simAnswer) int {
	n := 0
	for _, a := range answers {
		if a.Finish == "length" {
			n++
		}
	}
	return n
}

// TestSimLimitCutsFewer: the simulator's answers have lengths of their own,
// as a real model's do, so a dry run shows what a limit costs. The same
// prompts (token ids, and chat prompts a reasoning model thinks over) run
// against `gen --server sim --sim-reasoning` at --max-new-tokens 128 and
// 1024, in two indexes: 1024 cuts far fewer answers in each dataset, gen's
// summary says each count, every answer cut at 1024 was cut at 128, an
// answer cut at 128 continues with the same text at 1024, and one that
// ended at 128 is the same at 1024. Then `gen --redo truncated
// --max-new-tokens 1024` in the first index re-cuts only the answers the
// 1024 run cut, with the 1024 run's answers. (Before, the simulator
// scaled an answer's length with the limit: the same answers were cut at
// 128 and at 1024, and the redo cut them all again.)
func TestSimLimitCutsFewer(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	root := t.TempDir()
	const n = 200
	writeIDPrompts(t, filepath.Join(root, "ids"), "ids", n)
	writeChatPrompts(t, filepath.Join(root, "chat"), "chat", n)
	dbLow, dbHigh := filepath.Join(t.TempDir(), "low.db"), filepath.Join(t.TempDir(), "high.db")
	outLow, outHigh := t.TempDir(), t.TempDir()
	gen := func(db, out string, args ...string) string {
		t.Helper()
		args = append([]string{"--db", db, "gen", "--server", "sim", "--sim-reasoning", "--sim-seed", "5", "--out", out}, args...)
		code, o := runGendexCombined(t, bin, append(args, root)...)
		if code != 0 {
			t.Fatalf("gendex %q: exit %d\n%s", args, code, o)
		}
		return o
	}
	sumLow := gen(dbLow, outLow, "--max-new-tokens", "128")
	sumHigh := gen(dbHigh, outHigh, "--max-new-tokens", "1024")
	total := map[int]int{}
	for _, ds := range []string{"ids", "chat"} {
		low, high := simAnswers(t, filepath.Join(outLow, ds)), simAnswers(t, filepath.Join(outHigh, ds))
		if len(low) != n || len(high) != n {
			t.Fatalf("%s: %d and %d answers, want %d each", ds, len(low), len(high), n)
		}
		cutLow, cutHigh := countCut(low), countCut(high)
		t.Logf("%s: %d of %d cut at 128 tokens, %d at 1024", ds, cutLow, n, cutHigh)
		total[128] += cutLow
		total[1024] += cutHigh
		if cutLow < n/10 || cutHigh*4 > cutLow {
			t.Errorf("%s: %d of %d answers cut at 128 tokens, %d at 1024: a higher limit must cut far fewer", ds, cutLow, n, cutHigh)
		}
		bad := 0
		for id, h := range high {
			l := low[id]
			var why string
			switch {
			case h.Finish == "length" && l.Finish != "length":
				why = fmt.Sprintf("cut at 1024 tokens, not at 128 (%s)", l.Finish)
			case l.Finish == "length" && !strings.HasPrefix(h.Text, l.Text):
				why = fmt.Sprintf("the answer cut at 128 tokens does not go on at 1024:\n%q\n%q", l.Text, h.Text)
			case l.Finish != "length" && (l.Text != h.Text || l.Finish != h.Finish):
				why = "the answer that ended at 128 tokens changed at 1024"
			}
			if why != "" && bad < 3 {
				t.Errorf("%s: %s", id, why)
			}
			if why != "" {
				bad++
			}
		}
		if bad > 0 {
			t.Errorf("%s: %d of %d answers at 1024 tokens are not the answers at 128 continued", ds, bad, n)
		}
	}
	for limit, sum := range map[int]string{128: sumLow, 1024: sumHigh} {
		if want := fmt.Sprintf("gen: %d of %d answers were cut at %d tokens", total[limit], 2*n, limit); !strings.Contains(sum, want) {
			t.Errorf("gen's summary does not say %q:\n%s", want, sum)
		}
	}

	cutLow := map[string]int{}
	for _, ds := range []string{"ids", "chat"} {
		cutLow[ds] = countCut(simAnswers(t, filepath.Join(outLow, ds)))
	}
	o := gen(dbLow, outLow, "--max-new-tokens", "1024", "--redo", "truncated")
	for _, want := range []string{
		fmt.Sprintf("chat: %d of the answers cut at the token limit are asked again", cutLow["chat"]),
		fmt.Sprintf("ids: %d of the answers cut at the token limit are asked again", cutLow["ids"]),
		fmt.Sprintf("gen: %d of %d answers were cut at 1024 tokens", total[1024], total[128]),
	} {
		if !strings.Contains(o, want) {
			t.Errorf("the redo does not say %q:\n%s", want, o)
		}
	}
	for _, ds := range []string{"ids", "chat"} {
		redone, high := simAnswers(t, filepath.Join(outLow, ds)), simAnswers(t, filepath.Join(outHigh, ds))
		if got, want := countCut(redone), countCut(high); got != want {
			t.Errorf("%s: the redo at 1024 tokens left %d answers cut; the run at 1024 cut %d", ds, got, want)
		}
		differ := 0
		for id, h := range high {
			if r := redone[id]; r.Text != h.Text || r.Finish != h.Finish {
				differ++
			}
		}
		if differ > 0 {
			t.Errorf("%s: %d of %d answers after the redo at 1024 tokens differ from the 1024 run's", ds, differ, n)
		}
	}
}
