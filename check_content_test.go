package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestCheckContentCounts: check's content reasons count exactly the
// answers the files show, on ShareGPT prompts of one human turn with a
// system turn answered through servers that go wrong as real ones do: a
// reasoning parser that leaves its marker in the content
// (think_in_content), a blank content (empty_content), one text for every
// prompt (repeated_text); and --max-length counts exactly the records
// whose answer's prompt and completion tokens pass it. (The conversations'
// turns are TestSeedShapesSpecForgeRecipe's and
// TestCheckFixesClearTheirReasons'.)
func TestCheckContentCounts(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary and runs servers; skipped with -short")
	}
	bin := gendexBinary(t)
	dir := t.TempDir()
	vllm := startSimProcess(t, bin, "--unmarked", "--flavor", "vllm", "--reasoning")
	const n = 12
	for _, ds := range []struct {
		name string
		edit func(string) string
	}{
		{"clean", func(s string) string { return s }},
		{"think", func(s string) string { return "<think>\n" + s }},
		{"blank", func(string) string { return " \n " }},
		{"same", func(string) string { return "I cannot help with that." }},
	} {
		var lines []string
		for i := 1; i <= n; i++ {
			lines = append(lines, fmt.Sprintf(`{"id":"%s-%d","conversations":[{"from":"system","value":"Be brief."},{"from":"human","value":"Question %d about %s?"}]}`,
				ds.name, i, i, strings.Repeat("caches ", i*i)))
		}
		writeTestFile(t, filepath.Join(dir, "data", ds.name, "prompts.jsonl"), strings.Join(lines, "\n")+"\n")
		url := tamperingServer(t, vllm, ds.edit)
		if code, _, errOut := runGendex(t, bin, dir, "gen", "--server", url, "--max-new-tokens", "8192", "--export", "conversations", "data/"+ds.name); code != 0 {
			t.Fatalf("%s: gen: exit %d\n%s", ds.name, code, errOut)
		}
	}
	// The length of each answer as its line says: prompt + completion.
	var lengths []int
	eachJSONLine(t, filepath.Join(dir, "data", "clean", "raw_responses.jsonl"), func(l []byte) {
		var a struct {
			P int `json:"prompt_tokens"`
			C int `json:"completion_tokens"`
		}
		json.Unmarshal(l, &a)
		lengths = append(lengths, a.P+a.C)
	})
	sorted := slices.Sorted(slices.Values(lengths)) // in the order they finished: the median is not the middle one
	limit := sorted[n/2]
	over := 0
	for _, l := range lengths {
		if l > limit {
			over++
		}
	}
	if over == 0 || over == n {
		t.Fatalf("the answers' lengths %v do not straddle %d", lengths, limit)
	}
	code, out, errOut := runGendex(t, bin, dir, "check", "--max-length", fmt.Sprint(limit), "--format", "json", "data")
	var v struct{ Datasets []verdict }
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 1 {
		t.Fatalf("check: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	want := map[string]map[string]int{
		"clean": {"over_max_length": over},
		"think": {"think_in_content": n},
		"blank": {"empty_content": n},
		"same":  {"repeated_text": n},
	}
	for _, d := range v.Datasets {
		got := map[string]int{}
		for _, r := range d.Reasons {
			// The answers' lengths are the clean set's; the others'
			// content is theirs.
			if r.Blocks && (d.Dataset == "clean" || r.Reason != "over_max_length") {
				c, _ := r.Count.(float64)
				got[r.Reason] = int(c)
			}
		}
		if w := want[d.Dataset]; !mapsEqual(w, got) {
			t.Errorf("%s: check gives %v; the answers hold %v (--max-length %d)", d.Dataset, got, w, limit)
		}
	}
	if len(v.Datasets) != 4 {
		t.Errorf("check judged %d datasets, want 4:\n%s", len(v.Datasets), out)
	}
}
