package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sampledData writes a dataset "ds" of four prompts with three samples
// each, as someone's tool writes them ("sample" and "samples" on each
// answer line): every sample of p1 and p2 answered, p3's sample 1 failed
// for good, p4's sample 2 not asked. Each answer counts its prompt's 10
// prompt tokens, as a server counts a request.
func sampledData(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data", "ds")
	var prompts, raw, errs strings.Builder
	for p := 1; p <= 4; p++ {
		fmt.Fprintf(&prompts, `{"id":"p%d","text":"q"}`+"\n", p)
		for s := range 3 {
			switch {
			case p == 3 && s == 1:
				fmt.Fprintf(&errs, `{"id":"p%d","sample":%d,"samples":3,"status":400,"error":"bad"}`+"\n", p, s)
			case p == 4 && s == 2:
			default:
				fmt.Fprintf(&raw, `{"id":"p%d","sample":%d,"samples":3,"text":"a","prompt_tokens":10,"completion_tokens":%d,"finish_reason":"stop"}`+"\n", p, s, 1+s)
			}
		}
	}
	writeTestFile(t, filepath.Join(dir, "prompts.jsonl"), prompts.String())
	writeTestFile(t, filepath.Join(dir, "raw_responses.jsonl"), raw.String())
	writeTestFile(t, filepath.Join(dir, "errors.jsonl"), errs.String())
	return filepath.Dir(dir)
}

type sampledProgress struct {
	Prompts     uint64  `json:"prompts"`
	Raw         uint64  `json:"raw"`
	Errors      uint64  `json:"errors"`
	MissingRaw  uint64  `json:"missing_raw"`
	Answered    uint64  `json:"answered"`
	Failed      uint64  `json:"failed"`
	Samples     uint64  `json:"samples"`
	PromptsDone uint64  `json:"prompts_done"`
	DonePct     float64 `json:"done_pct"`
}

type missingUnit struct {
	ID     string `json:"id"`
	Sample int    `json:"sample"`
}

// Answer lines that name their "sample" are indexed one per (id, sample):
// progress counts the prompts, the answers and the prompts done with every
// sample; missing names each missing (id, sample), also after a line is
// deleted and the index made again; prompt tokens are summed per answer.
func TestIngestSampledAnswers(t *testing.T) {
	t.Parallel()
	bin := gendexBinary(t)
	data := sampledData(t)
	copyTree(t, filepath.Join(data, "ds"), filepath.Join(data, "ds2")) // for a TOTAL row
	db := filepath.Join(t.TempDir(), "g.db")
	mustRunGendex(t, bin, "--db", db, "ingest", data)
	prog := func(want sampledProgress) {
		t.Helper()
		rows, err := queryJSON[sampledProgress](t, bin, db, "progress", "ds")
		if err != nil || len(rows) != 1 {
			t.Fatalf("progress: %v %+v", err, rows)
		}
		if rows[0] != want {
			t.Errorf("progress %+v\nwant     %+v", rows[0], want)
		}
	}
	missing := func(want ...missingUnit) {
		t.Helper()
		rows, err := queryJSON[missingUnit](t, bin, db, "missing", "ds")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(rows, want) && (len(rows) > 0 || len(want) > 0) {
			t.Errorf("missing %+v, want %+v", rows, want)
		}
	}
	prog(sampledProgress{Prompts: 4, Raw: 10, Errors: 1, MissingRaw: 1, Answered: 10, Failed: 1, Samples: 3, PromptsDone: 3, DonePct: 91.67})
	missing(missingUnit{"p4", 2})
	if f := strings.Fields(lastLine(mustRunGendex(t, bin, "--db", db, "query", "progress", "--format", "table"))); len(f) < 2 || f[0] != "TOTAL" || f[len(f)-2] != "3" {
		t.Errorf("progress's TOTAL row %q: want the datasets' one samples, 3, not unknown", f)
	}
	out := mustRunGendex(t, bin, "--db", db, "query", "missing", "ds", "--format", "tsv")
	if !strings.HasPrefix(out, "dataset\tstage\tid\tsample\n") || !strings.Contains(out, "ds\traw\tp4\t2\n") {
		t.Errorf("missing's tsv does not name the id and sample:\n%s", out)
	}
	type tokens struct {
		Prompt uint64 `json:"prompt_tokens"`
	}
	if rows, err := queryJSON[tokens](t, bin, db, "tokens", "ds"); err != nil || len(rows) == 0 || rows[0].Prompt != 100 {
		t.Errorf("tokens: %+v %v; want 100 prompt tokens, 10 for each of the 10 answers' requests", rows, err)
	}
	if _, _, stderr := runGendex(t, bin, "", "--db", db, "query", "tokens", "ds"); !strings.Contains(stderr, "its prompt counted 3 times") {
		t.Errorf("tokens does not say the prompt tokens count each sample's request:\n%s", stderr)
	}

	// Delete p2's sample 1 and make the index again: it is missing too.
	raw := filepath.Join(data, "ds", "raw_responses.jsonl")
	b, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, l := range strings.SplitAfter(string(b), "\n") {
		if !strings.Contains(l, `"id":"p2","sample":1,`) {
			kept = append(kept, l)
		}
	}
	if err := os.WriteFile(raw, []byte(strings.Join(kept, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(db)
	mustRunGendex(t, bin, "--db", db, "ingest", data)
	prog(sampledProgress{Prompts: 4, Raw: 9, Errors: 1, MissingRaw: 2, Answered: 9, Failed: 1, Samples: 3, PromptsDone: 2, DonePct: 83.33})
	missing(missingUnit{"p2", 1}, missingUnit{"p4", 2})
	if out := mustRunGendex(t, bin, "--db", db, "query", "missing", "ds", "--format", "tsv", "--no-header"); out != "p2\t1\np4\t2\n" {
		t.Errorf("missing --no-header = %q, want the ids and samples", out)
	}
	// No training record yet: every unit is listed, each with why.
	type untokenized struct {
		missingUnit
		Reason string `json:"reason"`
	}
	rows, err := queryJSON[untokenized](t, bin, db, "missing", "ds", "--stage", "tokenized")
	if err != nil {
		t.Fatal(err)
	}
	why := map[missingUnit]string{}
	for _, r := range rows {
		why[r.missingUnit] = r.Reason
	}
	if len(rows) != 12 || len(why) != 12 || why[missingUnit{"p4", 2}] != "no answer yet" || why[missingUnit{"p2", 1}] != "no answer yet" ||
		!strings.HasPrefix(why[missingUnit{"p3", 1}], "failed") || why[missingUnit{"p1", 2}] != "not exported yet" {
		t.Errorf("missing --stage tokenized: %+v; want the 12 units, each with why", rows)
	}
}

// lastLine is out's last line, its newline dropped.
func lastLine(out string) string {
	out = strings.TrimRight(out, "\n")
	return out[strings.LastIndexByte(out, '\n')+1:]
}

// TestIngestNamesDuplicateSamples: a line written twice in a sampled
// dataset (an answer and an earlier turn of the chat seed shape, sample
// above 0) is named in ingest's warning by its id, turn and sample, not by
// the index's unit key (it printed "c4\x002").
func TestIngestNamesDuplicateSamples(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	root := filepath.Join(p.dir, "seeds")
	seedShapes(t, root)
	p.mustRun(append(append([]string{"--db", "g.db"}, simToolArgs...), "--samples", "3", "--seed", "7", root)...)
	var wants []string
	for _, f := range []string{"raw_responses.jsonl", "turns.jsonl"} {
		path := filepath.Join(root, "chat", f)
		var again []byte
		eachJSONLine(t, path, func(b []byte) {
			var l struct {
				ID     string `json:"id"`
				Sample int    `json:"sample"`
				Turn   int    `json:"turn"`
			}
			if json.Unmarshal(b, &l) == nil && l.Sample > 0 && again == nil {
				again = append(append([]byte(nil), b...), '\n') // b is the reader's buffer
				id := l.ID
				if l.Turn > 0 {
					id += fmt.Sprintf("#%d", l.Turn)
				}
				wants = append(wants, fmt.Sprintf("duplicate id %q sample %d (first at ", id, l.Sample))
			}
		})
		out, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil || again == nil {
			t.Fatalf("%s: no line of a sample above 0 (%v)", path, err)
		}
		out.Write(again)
		out.Close()
	}
	_, _, stderr := runGendex(t, p.bin, p.dir, "--db", "fresh.db", "ingest", root)
	for _, w := range wants {
		if !strings.Contains(stderr, w) {
			t.Errorf("ingest does not say %q:\n%s", w, stderr)
		}
	}
	if strings.Contains(stderr, `\x00`) || strings.ContainsRune(stderr, 0) {
		t.Errorf("ingest names a unit key:\n%s", stderr)
	}
}
