package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// The seed-shaped end-to-end test: testdata/seedgen writes datasets in
// every shape the seeds have (ShareGPT of one to three human turns and
// system turns, function calling ending at the assistant's call, glaive
// trajectories, OpenAI agent trajectories with parallel calls, token ids,
// a reasoning model's conversations) with messy lines; README's SpecForge
// recipe runs as written against `gendex sim` speaking SGLang and vLLM
// (tool calls on, unmarked: it stands in for the GPU); and every count and
// verdict gendex gives is compared with testdata/seedread, a reading of the
// files that imports nothing of gendex.

// seedFlavors are the servers the recipe runs against: the recipe's own
// URL for each, and the simulator's flags (a tool-calling model with the
// server flags README's table asks for; SGLang's a reasoning model).
var seedFlavors = []struct {
	name, readmeURL string
	sim             []string
}{
	{"sglang", "http://gpu1:30000", []string{"--tool-calls", "--tool-call-parser", "qwen25", "--reasoning"}},
	{"vllm", "http://gpu1:8000", []string{"--flavor", "vllm", "--tool-calls", "--enable-auto-tool-choice", "--tool-call-parser", "hermes"}},
}

// seedCounts is seedread's JSON for one dataset (the fields compared).
type seedCounts struct {
	Prompts    int
	Duplicates int
	Answers    int
	Failed     int
	Unanswered int
	Records    int
	Truncated  int
	TurnLines  int `json:"turn_lines"`
	TornPrompt int `json:"torn_prompt"`

	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`

	Excluded map[string]int
	NoRecord int `json:"no_record"`
	Stale    int
	Empty    int
	EmptyIDs []string `json:"empty_ids"`
	Think    int
	Repeated int

	OverMax       int   `json:"over_max"`
	OverMaxTokens int64 `json:"over_max_tokens"`
	Longest       int64 `json:"longest"`
	LenUnknown    int   `json:"length_unknown"`

	ToolStops     map[string]int    `json:"tool_stops"`
	ExpectedStops map[string]int    `json:"expected_stops"`
	StopMismatch  map[string]string `json:"stop_mismatch"`
	AnswerCalls   int               `json:"answer_calls"`
	RecordCalls   int               `json:"record_calls"`
	AnswerResults int               `json:"answer_results"`
	RecordResults int               `json:"record_results"`

	IDsRecords       int               `json:"ids_records"`
	IDsOverMax       int               `json:"ids_over_max"`
	IDsOverMaxTokens int64             `json:"ids_over_max_tokens"`
	IDsLongest       int64             `json:"ids_longest"`
	IDsExcluded      map[string]int    `json:"ids_excluded"`
	NoLoss           map[string]string `json:"turns_without_loss"`

	Unsendable map[string]string `json:"unsendable"`
	NotRefused map[string]string `json:"unsendable_not_refused"`
}

func (c seedCounts) excluded() (n int) {
	for _, k := range c.Excluded {
		n += k
	}
	return n
}

// testdataTool returns the stdlib program ./testdata/<name> (seedgen,
// seedread), built by TestMain before any test started.
func testdataTool(t *testing.T, name string) string {
	t.Helper()
	return built(t, name)
}

// specForgeRecipe is README's SpecForge section's commands, as written:
// its first gen line for the server (the one whose URL is url), export,
// and the gate (check) the text after them gives.
func specForgeRecipe(t *testing.T, url string) [][]string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(readme), "\n## SpecForge: from a ShareGPT file to training data\n")
	if !ok {
		t.Fatal("README has no section \"SpecForge: from a ShareGPT file to training data\"")
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	sec = strings.ReplaceAll(sec, "\\\n", " ") // a command continued on the next line
	var cmds [][]string
	for _, l := range strings.Split(sec, "\n") {
		l, _, _ = strings.Cut(strings.TrimSpace(l), "#")
		if strings.HasPrefix(l, "gendex gen ") && (!strings.Contains(l, url) || len(cmds) > 0) {
			continue // the other server's line, or the same server's other way (a mixture)
		}
		if strings.HasPrefix(l, "gendex ") {
			cmds = append(cmds, shellWords(t, strings.TrimSpace(l)))
		}
	}
	gate := regexp.MustCompile("`(gendex check [^`]*)`").FindStringSubmatch(sec)
	if gate == nil {
		t.Fatal("README's SpecForge section names no `gendex check ...` gate")
	}
	cmds = append(cmds, shellWords(t, gate[1]))
	if len(cmds) != 3 || cmds[0][1] != "gen" || cmds[1][1] != "export" {
		t.Fatalf("README's SpecForge recipe for %s: want gen, export, check; got %q", url, cmds)
	}
	return cmds
}

// TestSeedShapesSpecForgeRecipe runs README's SpecForge recipe verbatim on
// the seed-shaped datasets against the simulator in SGLang and vLLM
// flavors, and compares gen's, export's, query's and check's counts and
// verdicts with seedread's reading of the files.
func TestSeedShapesSpecForgeRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs servers; skipped with -short")
	}
	bin := gendexBinary(t)
	t.Parallel()
	gen, read := testdataTool(t, "seedgen"), testdataTool(t, "seedread")
	for _, fl := range seedFlavors {
		t.Run(fl.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if out, err := exec.Command(gen, "-root", filepath.Join(dir, "data")).CombinedOutput(); err != nil {
				t.Fatalf("seedgen: %v\n%s", err, out)
			}
			url := startSimProcess(t, bin, append([]string{"--unmarked"}, fl.sim...)...)
			var stderr [3]string
			var gate string
			for i, words := range specForgeRecipe(t, fl.readmeURL) {
				for k, w := range words {
					if w == fl.readmeURL {
						words[k] = url
					}
				}
				code, out, errOut := runGendex(t, bin, dir, words[1:]...)
				stderr[i] = errOut
				if i == 2 {
					gate = out
				}
				if i < 2 && code != 0 {
					t.Fatalf("%s: exit %d\n%s%s", strings.Join(words, " "), code, out, errOut)
				}
			}
			// The ids records of the same answers, the way README gives
			// for a second format: an index and a folder of their own.
			if code, _, errOut := runGendex(t, bin, dir, "--db", "ids.db", "export", "--format", "ids", "--out", "records-ids", "data"); code != 0 {
				t.Fatalf("export --format ids: exit %d\n%s", code, errOut)
			}
			out, err := exec.Command(read, "-root", filepath.Join(dir, "data"), "-ids", filepath.Join(dir, "records-ids"), "-max-length", "4096", "-context", "32768").Output()
			if err != nil {
				t.Fatalf("seedread: %v", err)
			}
			var truth map[string]seedCounts
			if err := json.Unmarshal(out, &truth); err != nil || len(truth) != 6 {
				t.Fatalf("seedread: %v, %d datasets:\n%s", err, len(truth), out)
			}
			for _, l := range strings.Split(gate, "\n") {
				if len([]rune(l)) > 80 && strings.Contains(strings.TrimSpace(l), " ") { // a path alone cannot wrap
					t.Errorf("the recipe's check: a line over 80 columns: %q", l)
				}
			}
			// Each comparison is a subtest of its own (named by what it
			// compares), so that a failure says which and .ci/mutants can
			// name one.
			base := seedRun{bin: bin, dir: dir, truth: truth}
			part := func(name string, f func(s *seedRun)) {
				t.Run(name, func(t *testing.T) {
					s := base
					s.t = t
					f(&s)
				})
			}
			part("files", (*seedRun).theFilesAreMessy)
			part("gen", func(s *seedRun) { s.genSummary(stderr[0]) })
			part("export", func(s *seedRun) { s.exportLines(stderr[1]) })
			part("query", (*seedRun).progressAndTokens)
			part("tools", (*seedRun).toolConversations)
			part("stop-names", (*seedRun).stopNames)
			part("unsendable", (*seedRun).unsendablePrompts)
			part("ids-loss", (*seedRun).idsLoss)
			part("check", func(s *seedRun) {
				s.checkVerdicts(nil, "data", func(c seedCounts) map[string]int { return c.wantBlocking() })
			})
			part("check-max-length", func(s *seedRun) {
				s.checkVerdicts([]string{"--max-length", "4096"}, "data", func(c seedCounts) map[string]int {
					w := c.wantBlocking()
					if c.OverMax > 0 {
						w["over_max_length"] = c.OverMax
						w["over_max_length.tokens"] = int(c.OverMaxTokens)
						w["over_max_length.longest"] = int(c.Longest)
					}
					return w
				})
			})
			part("check-ids", func(s *seedRun) {
				s.checkVerdicts([]string{"--db", "ids.db", "--max-length", "4096"}, "records-ids", func(c seedCounts) map[string]int {
					w := c.wantBlocking()
					delete(w, "all_excluded") // token ids make ids records
					for r, n := range c.IDsExcluded {
						if !exportReasons[r] { // a new exclusion (an ids record without its loss): check blocks on it
							w[r] = n
						}
					}
					if c.IDsOverMax > 0 {
						w["over_max_length"] = c.IDsOverMax
						w["over_max_length.tokens"] = int(c.IDsOverMaxTokens)
						w["over_max_length.longest"] = int(c.IDsLongest)
					}
					return w
				})
			})
		})
	}
}

// seedRun is one flavor's run: the folder, the binary and the truth.
type seedRun struct {
	t     *testing.T
	bin   string
	dir   string
	truth map[string]seedCounts
}

func (s *seedRun) names() []string {
	var ns []string
	for n := range s.truth {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// theFilesAreMessy: the generator made what the test claims to test (a
// duplicate id, a torn last line, failures, multi-turn conversations), so
// a change to it cannot quietly make the run trivial.
func (s *seedRun) theFilesAreMessy() {
	for _, n := range s.names() {
		c := s.truth[n]
		if c.Duplicates != 1 || c.TornPrompt != 1 || c.Prompts < 20 || c.Answers < 20 {
			s.t.Errorf("%s: the generated prompts are not messy: %+v", n, c)
		}
	}
	if c := s.truth["sharegpt"]; c.TurnLines == 0 || c.Failed == 0 {
		s.t.Errorf("sharegpt: no multi-turn conversation or no failure: %d turn lines, %d failed", c.TurnLines, c.Failed)
	}
	for _, n := range []string{"sharegpt", "fncall", "glaive", "agent", "thinking"} {
		if c := s.truth[n]; len(c.Unsendable) != 2 {
			s.t.Errorf("%s: want 2 prompts that cannot be sent (an unknown role, over the context): %v", n, c.Unsendable)
		}
	}
	if c := s.truth["agent"]; c.AnswerResults == 0 || c.AnswerCalls == 0 {
		s.t.Errorf("agent: the model's calls got no results: %d calls, %d results", c.AnswerCalls, c.AnswerResults)
	}
}

var (
	genLine  = regexp.MustCompile(`(?m)^  (\S+): (\d+)/(\d+) answered.*?, (\d+) (?:errors?|failed).*$`)
	genTurns = regexp.MustCompile(`(\d+) earlier turns answered`)
)

// genSummary: gen's line per dataset says its answers (not its failures)
// of its prompts, and its failures.
func (s *seedRun) genSummary(stderr string) {
	seen := map[string]bool{}
	for _, m := range genLine.FindAllStringSubmatch(stderr, -1) {
		c, ok := s.truth[m[1]]
		if !ok {
			continue
		}
		seen[m[1]] = true
		answered, _ := strconv.Atoi(m[2])
		prompts, _ := strconv.Atoi(m[3])
		failed, _ := strconv.Atoi(m[4])
		turns := 0
		if t := genTurns.FindStringSubmatch(m[0]); t != nil {
			turns, _ = strconv.Atoi(t[1])
		}
		if turns != c.TurnLines {
			s.t.Errorf("%s: gen says %d earlier turns answered; turns.jsonl holds %d\n%s", m[1], turns, c.TurnLines, m[0])
		}
		if answered != c.Answers || prompts != c.Prompts || failed != c.Failed {
			s.t.Errorf("%s: gen says %d/%d answered, %d failed; the files hold %d answers of %d prompts, %d failed\n%s",
				m[1], answered, prompts, failed, c.Answers, c.Prompts, c.Failed, m[0])
		}
	}
	for _, n := range s.names() {
		if !seen[n] {
			s.t.Errorf("%s: gen's summary has no line for it:\n%s", n, stderr)
		}
	}
}

var exportLine = regexp.MustCompile(`export: (\S+): (\d+) answers: (\d+) conversations records, (\d+) excluded(?: \(([^)]*)\))?, (\d+) left`)

// exportLines: export's line per dataset says its answers, records and
// exclusions by reason.
func (s *seedRun) exportLines(stderr string) {
	seen := map[string]bool{}
	for _, m := range exportLine.FindAllStringSubmatch(stderr, -1) {
		c, ok := s.truth[m[1]]
		if !ok {
			continue
		}
		seen[m[1]] = true
		var reasons []string
		for r, n := range c.Excluded {
			reasons = append(reasons, fmt.Sprintf("%s %d", r, n))
		}
		sort.Strings(reasons)
		got := fmt.Sprintf("%s answers, %s records, %s excluded (%s), %s left", m[2], m[3], m[4], m[5], m[6])
		want := fmt.Sprintf("%d answers, %d records, %d excluded (%s), 0 left", c.Answers, c.Records, c.excluded(), strings.Join(reasons, ", "))
		if got != want {
			s.t.Errorf("%s: export says %q; the files hold %q", m[1], got, want)
		}
	}
	for _, n := range s.names() {
		if !seen[n] {
			s.t.Errorf("%s: export has no line for it:\n%s", n, stderr)
		}
	}
}

// queryJSON runs gendex query ARGS --format json in the run's folder.
func (s *seedRun) queryJSON(args ...string) map[string]map[string]any {
	s.t.Helper()
	code, out, errOut := runGendex(s.t, s.bin, s.dir, append(append([]string{"query"}, args...), "--format", "json")...)
	var rows []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &rows) != nil {
		s.t.Fatalf("query %v: exit %d\n%s%s", args, code, out, errOut)
	}
	by := map[string]map[string]any{}
	for _, r := range rows {
		by[fmt.Sprint(r["dataset"])] = r
	}
	return by
}

// progressAndTokens: query progress and tokens count what the files hold.
func (s *seedRun) progressAndTokens() {
	progress, tokens := s.queryJSON("progress"), s.queryJSON("tokens")
	for _, n := range s.names() {
		c := s.truth[n]
		for col, want := range map[string]int64{"prompts": int64(c.Prompts), "raw": int64(c.Answers), "errors": int64(c.Failed),
			"missing_raw": int64(c.Unanswered), "tokenized": int64(c.Records), "excluded": int64(c.excluded()),
			"missing_tokenized": int64(c.NoRecord), "stale": int64(c.Stale)} {
			if got, ok := progress[n][col].(float64); !ok || int64(got) != want {
				s.t.Errorf("%s: query progress %s = %v; the files say %d", n, col, progress[n][col], want)
			}
		}
		for col, want := range map[string]int64{"prompt_tokens": c.PromptTokens, "completion_tokens": c.CompletionTokens} {
			if got, ok := tokens[n][col].(float64); !ok || int64(got) != want {
				s.t.Errorf("%s: query tokens %s = %v; the answer lines add up to %d", n, col, tokens[n][col], want)
			}
		}
	}
}

// toolConversations: query stops counts the raw lines' stops; every call
// the model made, parallel ones too, and every result paired to it is in
// the records.
func (s *seedRun) toolConversations() {
	stops := s.queryJSON("stops")
	for _, n := range s.names() {
		c := s.truth[n]
		for _, r := range []string{"other_tool", "more_calls", "no_call", "bad_arguments"} {
			if got, _ := stops[n][r].(float64); int(got) != c.ToolStops[r] {
				s.t.Errorf("%s: query stops %s = %v; the raw lines hold %d", n, r, stops[n][r], c.ToolStops[r])
			}
		}
		if c.AnswerCalls != c.RecordCalls || c.AnswerResults != c.RecordResults {
			s.t.Errorf("%s: the model made %d calls and got %d results; its records hold %d calls and %d tool turns",
				n, c.AnswerCalls, c.AnswerResults, c.RecordCalls, c.RecordResults)
		}
	}
}

// stopNames: where the data ends at its call, the stops are named by what
// the model did (issue 50, item 1: the data's tool no stop, another tool
// other_tool, text no_call).
func (s *seedRun) stopNames() {
	for _, n := range s.names() {
		c := s.truth[n]
		if len(c.StopMismatch) == 0 {
			continue
		}
		var ids []string
		for id := range c.StopMismatch {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		var ex []string
		for _, id := range ids[:min(3, len(ids))] {
			ex = append(ex, id+": "+c.StopMismatch[id])
		}
		s.t.Errorf("%s: %d of the answers to data that ends at its call have the wrong stop (the data's tool is no stop, another tool other_tool, text no_call); stops by what the model did %v, the raw lines say %v; e.g.\n  %s",
			n, len(ids), c.ExpectedStops, c.ToolStops, strings.Join(ex, "\n  "))
	}
}

// unsendablePrompts: a prompt that cannot be sent (a turn of an unknown
// role, more tokens than the server's context) is refused before it is
// sent, with its file:line, on every shape (issue 50, item 5), as
// ShareGPT's unknown speaker is.
func (s *seedRun) unsendablePrompts() {
	for _, n := range s.names() {
		c := s.truth[n]
		for id, why := range c.NotRefused {
			s.t.Errorf("%s: %s cannot be sent, and was not refused naming its file:line: %s", n, id, why)
		}
	}
}

// idsLoss: every regenerated turn's own tokens carry the loss in its ids
// record (issue 50, item 2), or the record is excluded with its reason.
func (s *seedRun) idsLoss() {
	s.idsRecords("regenerated turns without loss", func(c seedCounts) map[string]string { return c.NoLoss })
}

// idsRecords fails for each dataset whose ids records bad finds at fault.
func (s *seedRun) idsRecords(what string, bad func(seedCounts) map[string]string) {
	for _, n := range s.names() {
		c := s.truth[n]
		if c.IDsRecords == 0 {
			s.t.Errorf("%s: export --format ids made no ids record", n)
		}
		m := bad(c)
		if len(m) == 0 {
			continue
		}
		var ids []string
		for id := range m {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		var ex []string
		for _, id := range ids[:min(3, len(ids))] {
			ex = append(ex, id+": "+m[id])
		}
		s.t.Errorf("%s: %d of %d ids records: %s; e.g.\n  %s", n, len(ids), c.IDsRecords, what, strings.Join(ex, "\n  "))
	}
}

// exportReasons are the exclusions of README's export table: check gives
// none of them as a reason of its own (all_excluded aside). An exclusion
// of another reason (an ids record that cannot carry its loss, issue 50)
// is one check blocks on, by its name.
var exportReasons = map[string]bool{"bad_answer": true, "abort": true, "content_filter": true, "length": true,
	"tool_stop": true, "no_text": true, "ids_prompt": true, "no_output_ids": true, "max_len": true}

// wantBlocking is the reasons the files give a dataset not to be ready,
// without --max-length, with their counts.
func (c seedCounts) wantBlocking() map[string]int {
	w := map[string]int{}
	put := func(r string, n int) {
		if n > 0 {
			w[r] = n
		}
	}
	// A prompts file whose last line has no newline holds a line the
	// index has not read (a writer still writing, or a cut copy): the
	// gate blocks until it is completed or cut, as check's fix says.
	put("index_behind", c.TornPrompt)
	put("unanswered", c.Unanswered)
	put("no_record", c.NoRecord)
	put("stale_record", c.Stale)
	if c.Records == 0 {
		put("all_excluded", c.excluded())
	}
	put("truncated_kept", c.Truncated)
	put("think_in_content", c.Think)
	put("empty_content", c.Empty)
	put("repeated_text", c.Repeated)
	return w
}

// checkVerdicts runs check (with args, --format json) on target and
// compares each dataset's verdict, its blocking reasons with their counts
// and its failed prompts with want's and the files'.
func (s *seedRun) checkVerdicts(args []string, target string, want func(seedCounts) map[string]int) {
	s.t.Helper()
	words := append(append([]string{"check"}, args...), "--format", "json", target)
	code, out, errOut := runGendex(s.t, s.bin, s.dir, words...)
	var v struct {
		Ready    bool
		Datasets []struct {
			Dataset string
			Ready   bool
			Reasons []struct {
				Reason string
				Blocks bool
				Count  *float64
				Tokens *float64
				Detail string
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		s.t.Fatalf("gendex %s: %v\n%s%s", strings.Join(words, " "), err, out, errOut)
	}
	allReady := true
	for _, d := range v.Datasets {
		c, ok := s.truth[d.Dataset]
		if !ok {
			s.t.Errorf("gendex %s: a dataset the files do not hold: %s", strings.Join(words, " "), d.Dataset)
			continue
		}
		w, got, notes := want(c), map[string]int{}, map[string]int{}
		for _, r := range d.Reasons {
			n := -1
			if r.Count != nil {
				n = int(*r.Count)
			}
			if r.Blocks {
				got[r.Reason] = n
				if r.Tokens != nil {
					got[r.Reason+".tokens"] = int(*r.Tokens)
				}
				if m := longestIn.FindStringSubmatch(r.Detail); m != nil {
					got[r.Reason+".longest"], _ = strconv.Atoi(m[1])
				}
			} else {
				notes[r.Reason] = n
			}
		}
		if !mapsEqual(w, got) || d.Ready != (len(w) == 0) {
			why := ""
			if c.Empty > 0 {
				why = fmt.Sprintf(" (empty: %v)", c.EmptyIDs[:min(3, len(c.EmptyIDs))])
			}
			s.t.Errorf("gendex %s: %s: ready %v, blocking %v; the files say ready %v, blocking %v%s",
				strings.Join(words, " "), d.Dataset, d.Ready, got, len(w) == 0, w, why)
		}
		if notes["failed_prompts"] != c.Failed && !(c.Failed == 0 && notes["failed_prompts"] == 0) {
			s.t.Errorf("gendex %s: %s: failed_prompts %d; the files hold %d failed prompts", strings.Join(words, " "), d.Dataset, notes["failed_prompts"], c.Failed)
		}
		if notes["made_by"] != c.Answers {
			s.t.Errorf("gendex %s: %s: made_by %d answers; the files hold %d", strings.Join(words, " "), d.Dataset, notes["made_by"], c.Answers)
		}
		allReady = allReady && len(w) == 0
	}
	if len(v.Datasets) != len(s.truth) {
		s.t.Errorf("gendex %s: %d datasets judged; the files hold %d", strings.Join(words, " "), len(v.Datasets), len(s.truth))
	}
	if v.Ready != allReady || (code == 0) != allReady {
		s.t.Errorf("gendex %s: exit %d, ready %v; the files say ready %v", strings.Join(words, " "), code, v.Ready, allReady)
	}
}

// longestIn finds the longest record's tokens a reason's detail names.
var longestIn = regexp.MustCompile(`the longest (\d+)`)

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
