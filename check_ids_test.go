package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
)

// newestTurns reads a folder's raw_responses.jsonl as a reader outside
// gendex would: each id's newest answer line (a redo's replaces the one
// before), as its assistant turns (a conversation line's "turns", else the
// line itself).
func newestTurns(t *testing.T, dir string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	eachJSONLine(t, filepath.Join(dir, "raw_responses.jsonl"), func(l []byte) {
		var a map[string]any
		if err := json.Unmarshal(l, &a); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		id, _ := a["id"].(string)
		ts, ok := a["turns"].([]any)
		if !ok {
			out[id] = []map[string]any{a}
			return
		}
		out[id] = nil
		for _, x := range ts {
			m, _ := x.(map[string]any)
			out[id] = append(out[id], m)
		}
	})
	return out
}

// emptyAnswers are the ids of a folder's records (tokenized.jsonl) whose
// newest answer has an assistant turn with neither text nor a tool call.
func emptyAnswers(t *testing.T, dir string) []string {
	t.Helper()
	turns := newestTurns(t, dir)
	var ids []string
	eachJSONLine(t, filepath.Join(dir, "tokenized.jsonl"), func(l []byte) {
		var r struct{ ID string }
		json.Unmarshal(l, &r)
		for _, tn := range turns[r.ID] {
			text, _ := tn["text"].(string)
			calls, _ := tn["tool_calls"].([]any)
			if strings.TrimSpace(text) == "" && len(calls) == 0 {
				ids = append(ids, r.ID)
				break
			}
		}
	})
	sort.Strings(ids)
	return ids
}

// sortedLines are out's lines, sorted.
func sortedLines(out string) []string {
	l := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if out == "" {
		l = nil
	}
	sort.Strings(l)
	return l
}

// TestCheckIDsListsWhatItCounts: check --ids REASON prints, one a line
// and nothing else, exactly the ids of the answers check counts for the
// reason, on multi-turn ShareGPT and agent trajectories (turns that only
// call a tool are not empty): as an independent reading of the files
// finds them, from the index or asked of a writer; DATASET<TAB>ID for a
// folder of several datasets; over_max_length's as export measures the
// records; a clean dataset's none (exit 1); a reason it cannot list, a
// usage error saying where its ids are. gen --redo of the list clears the
// reason.
func TestCheckIDsListsWhatItCounts(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	seedShapes(t, filepath.Join(p.dir, "seeds"))
	vllm := startSimProcess(t, p.bin, "--unmarked", "--flavor", "vllm", "--tool-calls", "--enable-auto-tool-choice", "--tool-call-parser", "hermes")
	gen := []string{"gen", "--max-new-tokens", "8192", "--export", "conversations"}
	p.mustRun(append(gen, "--server", vllm, "seeds")...)
	sets := []string{"sharegpt", "traj"}

	// over_max_length: the records longer than the median, by their
	// records as an outside reader measures them.
	for _, ds := range sets {
		lengths := recordLengths(t, filepath.Join(p.dir, "seeds", ds))
		var all []int
		for _, n := range lengths {
			all = append(all, n)
		}
		slices.Sort(all)
		limit := all[len(all)/2]
		var want []string
		for id, n := range lengths {
			if n > limit {
				want = append(want, id)
			}
		}
		sort.Strings(want)
		code, out, errOut := p.check("--ids", "over_max_length", "--max-length", fmt.Sprint(limit), "seeds/"+ds)
		if code != 0 || !slices.Equal(sortedLines(out), want) {
			t.Errorf("%s: check --ids over_max_length --max-length %d: exit %d, %q; want 0 and %q\n%s", ds, limit, code, sortedLines(out), want, errOut)
		}
	}

	// truncated_kept: the records of answers cut at the token limit; and
	// simulated: every answer the simulator made, in another index.
	p.mustRun("--db", "cut.db", "gen", "--server", vllm, "--max-new-tokens", "24", "--export", "conversations", "--include-truncated", "--out", "cut", "seeds")
	p.mustRun(append([]string{"--db", "sim.db"}, append(simToolArgs, "--out", "sim", "seeds")...)...)
	for _, ds := range sets {
		var cut, made []string
		answers := newestTurns(t, filepath.Join(p.dir, "cut", ds))
		eachJSONLine(t, filepath.Join(p.dir, "cut", ds, "tokenized.jsonl"), func(l []byte) {
			var r struct{ ID string }
			json.Unmarshal(l, &r)
			if a := answers[r.ID]; len(a) > 0 && a[len(a)-1]["finish_reason"] == "length" {
				cut = append(cut, r.ID)
			}
		})
		for id := range newestTurns(t, filepath.Join(p.dir, "sim", ds)) {
			made = append(made, id)
		}
		sort.Strings(cut)
		sort.Strings(made)
		if len(cut) == 0 {
			t.Fatalf("%s: no record of an answer cut at 24 tokens", ds)
		}
		for _, c := range []struct {
			db, reason, dir string
			want            []string
		}{{"cut.db", "truncated_kept", "cut/" + ds, cut}, {"sim.db", "simulated", "sim/" + ds, made}} {
			code, out, errOut := p.check("--db", c.db, "--ids", c.reason, c.dir)
			if code != 0 || !slices.Equal(sortedLines(out), c.want) {
				t.Errorf("%s: check --ids %s: exit %d, %q; want 0 and %q\n%s", ds, c.reason, code, sortedLines(out), c.want, errOut)
			}
		}
	}

	// A broken server blanks the text of some answers, asked again: in a
	// conversation every text turn, in a trajectory its text turns, not
	// those that only call a tool.
	blank := tamperingServer(t, vllm, func(string) string { return "" })
	redo := map[string][]string{"sharegpt": {"s1", "s2", "s5", "s8"}, "traj": {"t0", "t3", "t4"}}
	var list []string
	for ds, ids := range redo {
		for _, id := range ids {
			list = append(list, ds+"\t"+id)
		}
	}
	writeTestFile(t, filepath.Join(p.dir, "blank.txt"), strings.Join(list, "\n")+"\n")
	p.mustRun(append(gen, "--server", blank, "--redo", "blank.txt", "seeds")...)
	want := map[string][]string{}
	var both []string
	for _, ds := range sets {
		want[ds] = emptyAnswers(t, filepath.Join(p.dir, "seeds", ds))
		if len(want[ds]) == 0 || len(want[ds]) > len(redo[ds]) {
			t.Fatalf("%s: %d answers with an empty turn after a redo of %d by a server that blanks the text", ds, len(want[ds]), len(redo[ds]))
		}
		for _, id := range want[ds] {
			both = append(both, ds+"\t"+id)
		}
	}
	sort.Strings(both)
	listsEmpty := func(how string) {
		t.Helper()
		for _, ds := range sets {
			code, out, errOut := p.check("--ids", "empty_content", "seeds/"+ds)
			if code != 0 || !slices.Equal(sortedLines(out), want[ds]) {
				t.Errorf("%s: %s: check --ids empty_content: exit %d, %q; want 0 and %q\n%s", how, ds, code, sortedLines(out), want[ds], errOut)
			}
		}
		code, out, errOut := p.check("--ids", "empty_content", "seeds")
		if code != 0 || !slices.Equal(sortedLines(out), both) {
			t.Errorf("%s: check --ids empty_content of a root: exit %d, %q; want 0 and %q\n%s", how, code, sortedLines(out), both, errOut)
		}
	}
	listsEmpty("from the index")

	// A clean dataset: nothing printed, exit 1, said.
	if code, out, errOut := p.check("--ids", "empty_content", "seeds/fncall"); code != 1 || out != "" || !strings.Contains(errOut, "no answer of fncall") {
		t.Errorf("check --ids empty_content of a clean dataset: exit %d, stdout %q, stderr %q; want 1, nothing, a message", code, out, errOut)
	}
	// What it cannot list: a usage error, nothing on stdout.
	for _, c := range []struct{ args, says []string }{
		{[]string{"--ids", "unanswered"}, []string{"query missing"}},
		{[]string{"--ids", "over_max_length"}, []string{"--max-length"}},
		{[]string{"--ids", "no_such_reason"}, []string{"empty_content", "mixed_provenance"}},
	} {
		code, out, errOut := p.check(append(c.args, "seeds/sharegpt")...)
		for _, s := range c.says {
			if code != 2 || out != "" || !strings.Contains(errOut, s) {
				t.Errorf("check %v: exit %d, stdout %q, stderr %q; want 2, nothing, %q said", c.args, code, out, errOut, s)
			}
		}
	}

	// The list, asked again of the server, clears the reason in both.
	_, out, _ := p.check("--ids", "empty_content", "seeds")
	writeTestFile(t, filepath.Join(p.dir, "listed.txt"), out)
	p.mustRun(append(gen, "--server", vllm, "--redo", "listed.txt", "seeds")...)
	code, reasons, all := p.checkJSON("seeds")
	for _, ds := range sets {
		if reasons[ds]["empty_content"] != 0 {
			t.Errorf("%s: gen --redo of check --ids' list: check still gives empty_content (exit %d)\n%s", ds, code, all)
		}
	}

	// Asked of a writer (ingest --follow holds the index), which reads
	// the answers itself: the same ids.
	p.mustRun(append(gen, "--server", blank, "--redo", "blank.txt", "seeds")...)
	startWriter(t, filepath.Join(p.dir, "gendex.db"), []string{"GENDEX_DB="}, "ingest", "--follow", filepath.Join(p.dir, "seeds"))
	listsEmpty("asked of a writer")
}
