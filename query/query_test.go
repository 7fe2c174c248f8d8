package query_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/query"
	"gendex/query/format"
	"gendex/store"
)

// The fixture root has three datasets:
//   - alpha: every example line of every shape (prompts, the six response
//     shapes, tokenized), plus an answer without counts, a duplicate id, and
//     an errors.jsonl with one failure answered later and one open;
//   - beta: flat responses with known completion counts for percentiles, one
//     without any count, no prompts file, no times of their own;
//   - clock: responses with their own finish times around a fixed "now".

func TestFixtureIsWhatTheTestsAssume(t *testing.T) {
	// Guards the model: if a fixture edit makes a test vacuous, say so here.
	m := model(t, fixtureRoot)
	if got := names(m); !slices.Equal(got, []string{"alpha", "beta", "clock"}) {
		t.Fatalf("datasets %q", got)
	}
	a := m["alpha"]
	if len(a.prompts) != 12 || len(a.raw) != 7 || len(a.errs) != 3 || len(a.tok) != 3 {
		t.Errorf("alpha: %d prompts, %d raw, %d errors, %d tokenized; want 12, 7, 3, 3", len(a.prompts), len(a.raw), len(a.errs), len(a.tok))
	}
	if m["beta"].hasPrompts || m["clock"].hasPrompts {
		t.Error("beta and clock must have no prompts file")
	}
}

func TestProgress(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	m := model(t, fixtureRoot)
	var want [][]any
	for _, n := range names(m) {
		d := m[n]
		var prompts, missingRaw, done, answers, failed any
		answered, withAnswer := 0, 0
		for id := range d.prompts {
			_, r := d.raw[id]
			_, e := d.errs[id]
			if r || e {
				answered++
			}
			if r {
				withAnswer++
			}
		}
		if d.hasPrompts {
			prompts = int64(len(d.prompts))
			missingRaw = int64(len(d.prompts) - answered)
			done = fixed(100*float64(answered)/float64(len(d.prompts)), 2)
			answers, failed = int64(withAnswer), int64(answered-withAnswer)
		}
		open := 0
		for id := range d.errs {
			if _, ok := d.raw[id]; !ok {
				open++
			}
		}
		notTok := 0
		for id := range d.raw {
			if _, ok := d.tok[id]; !ok {
				notTok++
			}
		}
		// The fixture has no exclusions (TestProgressExcluded has).
		// Nor a redo: nothing asked again, nothing stale.
		var noPrompt any // answers whose id is no prompt's, unknown without prompts
		if d.hasPrompts {
			n := 0
			for id := range d.raw {
				if _, ok := d.prompts[id]; !ok {
					n++
				}
			}
			noPrompt = int64(n)
		}
		want = append(want, []any{n, prompts, int64(len(d.raw)), int64(len(d.tok)), int64(open), missingRaw, int64(0), int64(notTok), done, cutOf(d.raw), int64(0), int64(0), int64(0), answers, failed, int64(0), noPrompt}) // redo, stale, tool_stops, answered, failed, skipped, no_prompt
	}
	cols := []string{"dataset", "prompts", "raw", "tokenized", "errors", "missing_raw", "excluded", "missing_tokenized", "done_pct", "truncated", "redo", "stale", "tool_stops", "answered", "failed", "skipped", "no_prompt"}
	r := answer(t, db, time.Now(), "progress")
	checkRows(t, "progress", r, cols, want)

	// Spelled out for alpha, so a wrong model cannot hide a wrong answer:
	// 12 prompts; 9 answered or failed (7 responses, 2 open errors); B5, B6, B7 missing.
	if got := normRow(r.Rows[0]); !slices.Equal(got, []any{"alpha", int64(12), int64(7), int64(3), int64(2), int64(3), int64(0), int64(5), "75.00", int64(1), int64(0), int64(0), int64(0), int64(7), int64(2), int64(0), int64(0)}) {
		t.Errorf("alpha progress %v", got)
	}

	// TOTAL: beta and clock have no prompts file, so the prompt totals are unknown.
	total := normRow(r.Total)
	if total[0] != "TOTAL" || total[1] != nil || total[5] != nil || total[8] != nil {
		t.Errorf("TOTAL %v: prompts, missing_raw and done_pct must be unknown", total)
	}
	var raw int64
	for _, row := range want {
		raw += row[2].(int64)
	}
	if total[2] != raw {
		t.Errorf("TOTAL raw = %v, want %d", total[2], raw)
	}

	// One dataset asked by name: only its row.
	one := answer(t, db, time.Now(), "progress", "alpha")
	checkRows(t, "progress alpha", one, cols, want[:1])
	if got := normRow(one.Total); got[1] != int64(12) || got[8] != "75.00" {
		t.Errorf("TOTAL of alpha alone %v: prompts and done_pct are known", got)
	}
}

func TestProgressWithoutPromptsFile(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	r := answer(t, db, time.Now(), "progress", "beta")
	if len(r.Rows) != 1 {
		t.Fatalf("rows %v", r.Rows)
	}
	row := r.Rows[0]
	for _, i := range []int{1, 5, 8, 13, 14} { // prompts, missing_raw, done_pct, answered, failed
		if row[i] != nil {
			t.Errorf("beta %s = %v, want unknown (nil): there is no prompts file", r.Columns[i], row[i])
		}
	}
	if norm(row[2]) != int64(len(model(t, fixtureRoot)["beta"].raw)) {
		t.Errorf("beta raw = %v", row[2])
	}
	var out bytes.Buffer
	if err := format.Write(&out, r, format.Options{Format: query.Table}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(out.String(), format.Unknown); n != 5 {
		t.Errorf("table shows %d %q cells, want 5:\n%s", n, format.Unknown, out.String())
	}

	err := answerErr(t, db, "missing", "beta")
	if !strings.Contains(err.Error(), "beta") || !strings.Contains(err.Error(), "prompts") {
		t.Errorf("missing beta: error %q should say that beta has no prompts file", err)
	}
	// Tokenized records missing can still be told: they need responses only.
	r = answer(t, db, time.Now(), "missing", "beta", "--stage", "tokenized")
	if len(r.Rows) != 8 {
		t.Errorf("missing beta --stage tokenized: %d rows, want 8", len(r.Rows))
	}
}

func TestTokens(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	m := model(t, fixtureRoot)
	row := func(name string, recs []mRec) []any {
		var prompt, completion, unkC, unkP, cut int64
		var known []int64
		for _, r := range recs {
			if r.finish == "length" {
				cut++
			}
			if r.completion < 0 {
				unkC++
			} else {
				completion += r.completion
				known = append(known, r.completion)
			}
			if r.prompt < 0 {
				unkP++
			} else {
				prompt += r.prompt
			}
		}
		slices.Sort(known)
		var p, c, avg, reasoning any = prompt, completion, nil, nil
		for _, r := range recs {
			if r.reasoning >= 0 {
				n, _ := reasoning.(int64)
				reasoning = n + r.reasoning
			}
		}
		if unkP == int64(len(recs)) && len(recs) > 0 {
			p = nil
		}
		if len(known) > 0 {
			avg = fixed(float64(completion)/float64(len(known)), 1)
		} else if len(recs) > 0 {
			c = nil
		}
		return []any{name, int64(len(recs)), p, c, reasoning, avg, nearestRank(known, 50), nearestRank(known, 90), nearestRank(known, 99), unkC, unkP, cut, int64(0)}
	}
	var want [][]any
	var all []mRec
	for _, n := range names(m) {
		var recs []mRec
		for _, id := range sortedIDs(m[n].raw) {
			recs = append(recs, m[n].raw[id])
		}
		all = append(all, recs...)
		want = append(want, row(n, recs))
	}
	cols := []string{"dataset", "records", "prompt_tokens", "completion_tokens", "reasoning_tokens", "avg_completion_tokens",
		"p50_completion_tokens", "p90_completion_tokens", "p99_completion_tokens", "unknown_tokens", "unknown_prompt_tokens", "truncated", "skipped"}
	r := answer(t, db, time.Now(), "tokens")
	checkRows(t, "tokens", r, cols, want)
	if got, w := normRow(r.Total), row("TOTAL", all); !slices.Equal(got, w) {
		t.Errorf("tokens TOTAL:\n got %v\nwant %v", got, w)
	}

	// Spelled out: beta's counts are 1..9 and 100 with one unknown, so the
	// nearest-rank p50 is the 5th value, p90 the 9th, p99 the 10th.
	if got := normRow(answer(t, db, time.Now(), "tokens", "beta").Rows[0]); !slices.Equal(got,
		[]any{"beta", int64(11), int64(1380), int64(145), nil, "14.5", int64(5), int64(9), int64(100), int64(1), int64(3), int64(2), int64(0)}) {
		t.Errorf("beta tokens %v", got)
	}
	// alpha: the duplicate B4 line (999 tokens) is not counted; the first is (4 output_ids).
	a := normRow(answer(t, db, time.Now(), "tokens", "alpha").Rows[0])
	if a[3] != int64(10+5+21+2+4+7) || a[9] != int64(1) || a[10] != int64(2) {
		t.Errorf("alpha tokens %v: want completion 49, 1 unknown, 2 unknown prompt", a)
	}
}

func TestTokensAllUnknown(t *testing.T) {
	// A dataset whose every response lacks a count: the sums are unknown, never 0.
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "u", "raw_responses.jsonl"), `{"id":"u1","text":"a"}`+"\n"+`{"id":"u2","text":"b","finish_reason":"stop"}`+"\n")
	db, problems := ingesttest.Index(t, root)
	if len(problems) != 2 {
		t.Errorf("%d problems reported, want one warning per line without a count: %v", len(problems), problems)
	}
	got := normRow(answer(t, db, time.Now(), "tokens", "u").Rows[0])
	if want := []any{"u", int64(2), nil, nil, nil, nil, nil, nil, nil, int64(2), int64(2), int64(0), int64(0)}; !slices.Equal(got, want) {
		t.Errorf("tokens of all-unknown dataset:\n got %v\nwant %v", got, want)
	}
}

func TestFinish(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	m := model(t, fixtureRoot)
	all := map[string]int64{}
	for _, d := range m {
		for _, r := range d.raw {
			if r.finish != "" {
				all[r.finish]++
			}
		}
	}
	// The fixed reasons first, each whether seen or not; then the others,
	// the most common first.
	fixed := []string{"stop", "length", "tool_calls", "abort", "content_filter"}
	var others []string
	for _, k := range sortedIDs(all) {
		if !slices.Contains(fixed, k) {
			others = append(others, k)
		}
	}
	slices.SortStableFunc(others, func(a, b string) int { return int(all[b] - all[a]) })
	reasons := append(fixed, others...)
	cols := append(append([]string{"dataset", "records"}, reasons...), "unknown")
	var want [][]any
	for _, n := range names(m) {
		row := []any{n, int64(len(m[n].raw))}
		unknown := int64(len(m[n].raw))
		for _, reason := range reasons {
			c := int64(0)
			for _, r := range m[n].raw {
				if r.finish == reason {
					c++
				}
			}
			row = append(row, c)
			unknown -= c
		}
		want = append(want, append(row, unknown))
	}
	r := answer(t, db, time.Now(), "finish")
	checkRows(t, "finish", r, cols, want)
	// Spelled out: the fixed reasons, tool_calls and content_filter 0.
	if !slices.Equal(cols, []string{"dataset", "records", "stop", "length", "tool_calls", "abort", "content_filter", "unknown"}) {
		t.Errorf("model columns %q", cols)
	}
	total := normRow(r.Total)
	if total[0] != "TOTAL" || total[1] != int64(27) || total[len(total)-1] != int64(4) {
		t.Errorf("finish TOTAL %v: want 27 records, 4 without a reason", total)
	}
}

func TestErrors(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	m := model(t, fixtureRoot)
	var want [][]any
	for _, n := range names(m) {
		for _, id := range sortedIDs(m[n].errs) {
			if _, answered := m[n].raw[id]; answered {
				continue
			}
			e := m[n].errs[id]
			want = append(want, []any{n, id, e.finish, e.message, e.path + ":" + strconv.Itoa(e.line)})
		}
	}
	r := answer(t, db, time.Now(), "errors")
	checkRows(t, "errors", r, []string{"dataset", "id", "reason", "message", "source"}, want)
	if len(want) != 2 || want[0][1] != "A9_failed-0000001" || want[0][2] != "http 400" || want[1][2] != "context_length_exceeded" {
		t.Errorf("model errors %v", want)
	}
	if r := answer(t, db, time.Now(), "errors", "beta"); len(r.Rows) != 0 || len(r.Columns) != 5 {
		t.Errorf("errors beta = %v, want no rows and the columns", r)
	}
}

func TestMissing(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	m := model(t, fixtureRoot)
	a := m["alpha"]
	var raw, tok []string
	var reasons []any
	for _, id := range sortedIDs(a.prompts) {
		_, r := a.raw[id]
		_, e := a.errs[id]
		if !r && !e {
			raw = append(raw, id)
		}
	}
	// Every prompt or response without a tokenized record, with why.
	both := map[string]bool{}
	for id := range a.prompts {
		both[id] = true
	}
	for id := range a.raw {
		both[id] = true
	}
	for _, id := range sortedIDs(both) {
		if _, ok := a.tok[id]; ok {
			continue
		}
		tok = append(tok, id)
		_, answered := a.raw[id]
		e, failed := a.errs[id]
		switch {
		case answered:
			reasons = append(reasons, "not exported yet")
		case failed:
			reasons = append(reasons, "failed: "+e.finish+": "+e.message)
		default:
			reasons = append(reasons, "no answer yet")
		}
	}
	for _, tc := range []struct {
		args  []string
		stage string
		ids   []string
	}{
		{[]string{"missing", "alpha"}, "raw", raw},
		{[]string{"missing", "alpha", "--stage", "raw"}, "raw", raw},
		{[]string{"missing", "--stage", "tokenized", "alpha"}, "tokenized", tok},
	} {
		var want [][]any
		cols := []string{"dataset", "stage", "id"}
		for i, id := range tc.ids {
			want = append(want, []any{"alpha", tc.stage, id})
			if tc.stage == "tokenized" {
				want[i] = append(want[i], reasons[i])
			}
		}
		if tc.stage == "tokenized" {
			cols = append(cols, "reason")
		}
		checkRows(t, strings.Join(tc.args, " "), answer(t, db, time.Now(), tc.args...), cols, want)
	}
	if !slices.Equal(raw, []string{"B5_text-0000001", "B6_chat-0000001", "B7_sharegpt-0000001"}) {
		t.Errorf("model missing raw %q", raw)
	}
	if len(tok) != 10 || slices.Contains(tok, "A1_deepswekimi-0000001") || !slices.Contains(reasons, any("no answer yet")) {
		t.Errorf("model missing tokenized %q %q", tok, reasons) // tokenized without a response is not "missing"
	}
	// Nothing tokenized: every response is missing.
	r := answer(t, db, time.Now(), "missing", "clock", "--stage", "tokenized")
	if len(r.Rows) != len(m["clock"].raw) {
		t.Errorf("clock has no tokenized file: all %d responses are missing, got %d", len(m["clock"].raw), len(r.Rows))
	}
}

func TestDatasets(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	m := model(t, fixtureRoot)
	var want [][]any
	for _, n := range names(m) {
		d := m[n]
		want = append(want, []any{n, int64(d.files), int64(len(d.prompts)), int64(len(d.raw)), int64(len(d.tok)), int64(len(d.errs)), int64(0), int64(0)})
	}
	r := answer(t, db, time.Now(), "datasets")
	checkRows(t, "datasets", r, []string{"dataset", "files", "prompts", "raw", "tokenized", "errors", "turns", "excluded"}, want)
}

func TestUnknownDataset(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	for _, args := range [][]string{
		{"progress", "alpha", "gamma"},
		{"tokens", "gamma"},
		{"throughput", "gamma"},
		{"finish", "gamma"},
		{"errors", "gamma"},
		{"missing", "gamma"},
		{"show", "gamma", "x"},
	} {
		err := answerErr(t, db, args...)
		for _, s := range []string{`"gamma"`, "alpha, beta, clock"} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%q: error %q does not hold %s", args, err, s)
			}
		}
	}

	// An empty index says how to fill it.
	empty, err := store.Open(filepath.Join(t.TempDir(), "empty.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	err = answerErr(t, empty, "progress", "alpha")
	if !strings.Contains(err.Error(), "empty") || !strings.Contains(err.Error(), "ingest") {
		t.Errorf("error on an empty index %q should say it is empty and how to fill it", err)
	}
	if r := answer(t, empty, time.Now(), "progress"); len(r.Rows) != 0 || len(r.Columns) == 0 {
		t.Errorf("progress of an empty index = %+v, want columns and no rows", r)
	}
}

func TestShow(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	m := model(t, fixtureRoot)
	a := m["alpha"]
	for _, tc := range []struct {
		args []string
		want mRec
	}{
		{[]string{"show", "alpha", "B2_opencodeinstruct-0000017"}, a.raw["B2_opencodeinstruct-0000017"]},
		{[]string{"show", "alpha", "B3_code-0000042"}, a.raw["B3_code-0000042"]},
		// the first line of a duplicated id
		{[]string{"show", "alpha", "B4_ids_only-0000001"}, a.raw["B4_ids_only-0000001"]},
		// an error read from the responses file
		{[]string{"show", "alpha", "B3_code-0000043"}, a.errs["B3_code-0000043"]},
		// answered later: the response is shown first, the error with --stage
		{[]string{"show", "alpha", "A9_late-0000001"}, a.raw["A9_late-0000001"]},
		{[]string{"show", "alpha", "A9_late-0000001", "--stage", "errors"}, a.errs["A9_late-0000001"]},
		{[]string{"show", "alpha", "--stage", "prompts", "B2_opencodeinstruct-0000017"}, a.prompts["B2_opencodeinstruct-0000017"]},
		{[]string{"show", "alpha", "B2_opencodeinstruct-0000017", "--stage", "tokenized"}, a.tok["B2_opencodeinstruct-0000017"]},
		// only a prompt: found without --stage
		{[]string{"show", "alpha", "B5_text-0000001"}, a.prompts["B5_text-0000001"]},
		{[]string{"show", "alpha", "A1_deepswekimi-0000001"}, a.tok["A1_deepswekimi-0000001"]},
	} {
		if tc.want.text == nil {
			t.Fatalf("%q: not in the model", tc.args)
		}
		r := answer(t, db, time.Now(), tc.args...)
		if !bytes.Equal(r.Line, tc.want.text) {
			t.Errorf("%q:\n got %s\nwant %s", tc.args, r.Line, tc.want.text)
		}
		var out bytes.Buffer
		if err := format.Write(&out, r, format.Options{Format: query.JSON}); err != nil || out.String() != string(tc.want.text)+"\n" {
			t.Errorf("%q written as %q, %v", tc.args, out.String(), err)
		}
	}
	for _, args := range [][]string{
		{"show", "alpha", "no-such-id"},
		{"show", "alpha", "B5_text-0000001", "--stage", "raw"},
	} {
		err := answerErr(t, db, args...)
		if !strings.Contains(err.Error(), args[2]) || !strings.Contains(err.Error(), "alpha") {
			t.Errorf("%q: error %q should name the dataset and the id", args, err)
		}
	}
}

func TestShowCRLFAndBOM(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "w", "raw_responses.jsonl"),
		"\ufeff{\"id\":\"w1\",\"completion_tokens\":1}\r\n{\"id\":\"w2\",\"completion_tokens\":2}\r\n")
	db, _ := ingesttest.Index(t, root)
	for id, want := range map[string]string{"w1": `{"id":"w1","completion_tokens":1}`, "w2": `{"id":"w2","completion_tokens":2}`} {
		if got := answer(t, db, time.Now(), "show", "w", id).Line; string(got) != want {
			t.Errorf("show %s = %q, want %q (without BOM and CR)", id, got, want)
		}
	}
}

func TestShowChangedFile(t *testing.T) {
	root := copyTree(t, fixtureRoot)
	db, _ := ingesttest.Index(t, root)
	raw := filepath.Join(root, "alpha", "raw_responses.jsonl")
	data, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	// Another writer rewrote the file: the same lines in another order.
	lines := strings.SplitAfter(string(data), "\n")
	slices.Reverse(lines[:len(lines)-1])
	writeFile(t, raw, strings.Join(lines, ""))
	err = answerErr(t, db, "show", "alpha", "B2_opencodeinstruct-0000017")
	for _, s := range []string{"changed", raw, "B2_opencodeinstruct-0000017", "ingest"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q should hold %q", err, s)
		}
	}
	// The file is gone.
	os.Remove(raw)
	err = answerErr(t, db, "show", "alpha", "B3_code-0000042")
	if !strings.Contains(err.Error(), raw) || !strings.Contains(err.Error(), "B3_code-0000042") {
		t.Errorf("error %q should name the file and the id", err)
	}
	// The file was cut short: the record's bytes are no longer there.
	writeFile(t, raw, string(data[:len(data)/2]))
	err = answerErr(t, db, "show", "alpha", "B4_ids_only-0000001")
	if !strings.Contains(err.Error(), "B4_ids_only-0000001") {
		t.Errorf("error %q should name the id", err)
	}
}

func TestShowDetectsEditInsideALongLine(t *testing.T) {
	root := copyTree(t, fixtureRoot)
	db, _ := ingesttest.Index(t, root)
	raw := filepath.Join(root, "alpha", "raw_responses.jsonl")
	data, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	// Line 1's completion_tokens is 10; make it 99 (same length).
	edited := bytes.Replace(data, []byte(`"completion_tokens":10,`), []byte(`"completion_tokens":99,`), 1)
	if bytes.Equal(edited, data) {
		t.Fatal("fixture changed: no completion_tokens 10 on line 1")
	}
	writeFile(t, raw, string(edited))
	q, _ := query.Parse([]string{"show", "alpha", "B2_opencodeinstruct-0000017"})
	if r, err := query.Answer(db, q, time.Now()); err == nil {
		t.Errorf("show printed the edited line %s as the indexed record", r.Line)
	}
}

func TestThroughputOwnTimes(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	m := model(t, fixtureRoot)
	now := time.Date(2026, 11, 28, 10, 0, 0, 500e6, time.UTC)
	for _, tc := range []struct {
		window  string
		seconds int64
		records int // spelled out from the fixture's comments
	}{
		{"30s", 30, 7},
		{"1s", 1, 3},
		{"1h", 3600, 8},
		{"90s", 90, 7},
		{"30m", 1800, 8},
	} {
		// The window is the seconds [now-w, now], the current one's half
		// gone by included: every answer up to the moment asked.
		var records, tokens, unknown int64
		for _, r := range m["clock"].raw {
			if sec := r.own.Unix(); sec >= now.Unix()-tc.seconds && sec <= now.Unix() {
				records++
				if r.completion < 0 {
					unknown++
				} else {
					tokens += r.completion
				}
			}
		}
		if records != int64(tc.records) {
			t.Errorf("window %s: the model has %d records, the fixture was written for %d", tc.window, records, tc.records)
		}
		// The window starts no earlier than the dataset's first response.
		first := int64(1 << 62)
		for _, r := range m["clock"].raw {
			first = min(first, r.own.Unix())
		}
		seconds := float64(min(tc.seconds, now.Unix()-first)) + 0.5
		want := [][]any{{"clock", fixed(seconds, 2), records, tokens,
			fixed(float64(records)/seconds, 2), fixed(float64(tokens)/seconds, 1), unknown, nil}}
		r := answer(t, db, now, "throughput", "--window", tc.window, "clock")
		checkRows(t, "throughput "+tc.window, r, []string{"dataset", "window_s", "records", "completion_tokens", "records_per_s", "tokens_per_s", "unknown_tokens", "accept_length"}, want)
	}
	// Spelled out for 30s: c1 c2 c3 c7 c8 (c8 without a count), and c4 and
	// c6, which finished in the current second, over 30.5 s.
	got := normRow(answer(t, db, now, "throughput", "clock").Rows[0])
	if !slices.Equal(got, []any{"clock", "30.50", int64(7), int64(11 + 12 + 13 + 17 + 14 + 16), "0.23", "2.7", int64(1), nil}) {
		t.Errorf("throughput clock 30s = %v", got)
	}
	// Before any record: nothing, and zero rates rather than unknown.
	got = normRow(answer(t, db, now.Add(-24*time.Hour), "throughput", "clock").Rows[0])
	if !slices.Equal(got, []any{"clock", "30.50", int64(0), int64(0), "0.00", "0.0", int64(0), nil}) {
		t.Errorf("throughput of an empty window = %v", got)
	}
}

func TestThroughputIndexingTime(t *testing.T) {
	// beta's responses carry no time: they count at the moment they were indexed.
	before := time.Now()
	db, _ := ingesttest.Index(t, fixtureRoot)
	after := time.Now()
	m := model(t, fixtureRoot)
	var tokens, unknown int64
	for _, r := range m["beta"].raw {
		if r.completion < 0 {
			unknown++
		} else {
			tokens += r.completion
		}
	}
	n := int64(len(m["beta"].raw))
	window := after.Sub(before).Truncate(time.Second) + 10*time.Second
	// Asked at the start of the second after the indexing (whole seconds),
	// the window starts at the first response, indexed between before and
	// after.
	at := time.Unix(after.Unix()+1, 0)
	w := at.Unix() - before.Unix()
	r := answer(t, db, at, "throughput", "beta", "--window", window.String())
	if got := normRow(r.Rows[0]); got[1] != w && got[1] != w-1 {
		t.Errorf("window_s = %v; want the seconds since indexing, %d", got[1], w)
	} else {
		w = got[1].(int64)
	}
	checkRows(t, "throughput beta", r, []string{"dataset", "window_s", "records", "completion_tokens", "records_per_s", "tokens_per_s", "unknown_tokens", "accept_length"},
		[][]any{{"beta", w, n, tokens, fixed(float64(n)/float64(w), 2), fixed(float64(tokens)/float64(w), 1), unknown, nil}})
	// A window that ended before the indexing sees none of them.
	r = answer(t, db, before.Add(-time.Hour), "throughput", "beta", "--window", "30s")
	if got := normRow(r.Rows[0]); got[2] != int64(0) {
		t.Errorf("beta before indexing: %v records, want 0", got[2])
	}
	// In alpha, the lines without a time of their own (the Batch line, the
	// ids-only line, the line without counts) count now; the others do not.
	r = answer(t, db, at, "throughput", "alpha", "--window", window.String())
	var own, none int64
	for _, rec := range m["alpha"].raw {
		if rec.own.IsZero() {
			none++
		} else if sec := rec.own.Unix(); sec >= at.Unix()-w && sec < at.Unix() {
			own++
		}
	}
	if got := normRow(r.Rows[0]); got[2] != none+own || none != 3 {
		t.Errorf("alpha: %v records in the window, want %d without a time of their own (+%d own)", got[2], none, own)
	}
}

func TestThroughputAllUnknown(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	now := time.Date(2026, 11, 28, 9, 59, 51, 0, time.UTC) // only c8 (no count) in the 1s window before
	got := normRow(answer(t, db, now, "throughput", "clock", "--window", "1s").Rows[0])
	if !slices.Equal(got, []any{"clock", int64(1), int64(1), nil, "1.00", nil, int64(1), nil}) {
		t.Errorf("throughput with only unknown counts = %v, want the tokens unknown, not 0", got)
	}
}

// Every answer up to the moment asked counts, the current second's too,
// over the part of it gone by: c6 (10:00:00) and c4 (10:00:00.900) count
// once any of their second has gone by, beside c7 (09:59:59.2) in the last
// whole one. (The index keeps seconds: an answer counts from its second's
// start.)
func TestThroughputCountsTheCurrentSecond(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	sec := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now  time.Time
		want []any
	}{
		{sec, []any{"clock", int64(1), int64(1), int64(17), "1.00", "17.0", int64(0), nil}}, // none of 10:00:00 gone by
		{sec.Add(500 * time.Millisecond), []any{"clock", "1.50", int64(3), int64(17 + 14 + 16), "2.00", "31.3", int64(0), nil}},
		{sec.Add(999 * time.Millisecond), []any{"clock", "2.00", int64(3), int64(17 + 14 + 16), "1.50", "23.5", int64(0), nil}},
		{sec.Add(time.Second), []any{"clock", int64(1), int64(2), int64(14 + 16), "2.00", "30.0", int64(0), nil}},
		{sec.Add(time.Second + time.Millisecond), []any{"clock", "1.00", int64(3), int64(14 + 16 + 15), "3.00", "45.0", int64(0), nil}},
	} {
		if got := normRow(answer(t, db, tc.now, "throughput", "--window", "1s", "clock").Rows[0]); !slices.Equal(got, tc.want) {
			t.Errorf("at %s: %v, want %v", tc.now.Format("15:04:05.000"), got, tc.want)
		}
	}
}

// TOTAL follows the rows' rule over the datasets with a response in the
// window: when only clock has responses in the last hour (beta's were
// indexed later, by the wall clock), TOTAL is clock's window and clock's
// rate, not the same records spread over the full hour.
func TestThroughputTotalOneRunning(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	now := time.Date(2026, 11, 28, 10, 0, 0, 500e6, time.UTC)
	r := answer(t, db, now, "throughput", "--window", "1h", "clock", "beta")
	var records int64
	var clock []any
	for _, row := range r.Rows {
		records += norm(row[2]).(int64)
		if row[0] == "clock" {
			clock = normRow(row)
		} else if norm(row[2]) != int64(0) {
			t.Fatalf("%v: only clock should have responses in the window", row)
		}
	}
	got := normRow(r.Total)
	if got[0] != "TOTAL" || got[2] != records || clock == nil || !slices.Equal(got[1:], clock[1:]) {
		t.Errorf("throughput TOTAL %v, want clock's row %v", got, clock)
	}
}

// Run streams to a Sink: the rows arrive one by one, in the same order as
// Answer collects them, and a Sink error stops the answer.
func TestRunStreamsAndStopsOnSinkError(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	q, err := query.Parse([]string{"missing", "alpha", "--stage", "tokenized"})
	if err != nil {
		t.Fatal(err)
	}
	s := &failingSink{after: 2}
	err = query.Run(db, q, time.Now(), s)
	if err != errSinkFull || s.rows != 2 {
		t.Errorf("Run = %v after %d rows, want errSinkFull after 2", err, s.rows)
	}
}

var errSinkFull = &sinkError{}

type sinkError struct{}

func (*sinkError) Error() string { return "sink full" }

type failingSink struct{ after, rows int }

func (s *failingSink) Columns([]string) error { return nil }
func (s *failingSink) Row([]any) error {
	if s.rows == s.after {
		return errSinkFull
	}
	s.rows++
	return nil
}
func (s *failingSink) Total([]any) error { return nil }
func (s *failingSink) Line([]byte) error { return nil }
func (s *failingSink) Note(string) error { return nil }

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Some pipelines write the literal finish reason "unknown" (or "length",
// "stop", ...); the finish answer must still have one column per name.
func TestFinishColumnsAreUnique(t *testing.T) {
	root := t.TempDir()
	writeFile(t, filepath.Join(root, "f", "raw_responses.jsonl"),
		`{"id":"f1","completion_tokens":1,"finish_reason":"unknown"}`+"\n"+
			`{"id":"f2","completion_tokens":1,"finish_reason":"unknown"}`+"\n"+
			`{"id":"f3","completion_tokens":1}`+"\n")
	db, _ := ingesttest.Index(t, root)
	r := answer(t, db, time.Now(), "finish")
	seen := map[string]bool{}
	for _, c := range r.Columns {
		if seen[c] {
			t.Errorf("column %q appears twice in %q (row %v)", c, r.Columns, r.Rows[0])
		}
		seen[c] = true
	}
}

func TestFiles(t *testing.T) {
	db, _ := ingesttest.Index(t, fixtureRoot)
	r := answer(t, db, time.Now(), "files", "alpha")
	if len(r.Rows) == 0 {
		t.Fatal("no files")
	}
	for _, row := range r.Rows {
		if row[0] != "alpha" {
			t.Errorf("files alpha lists %v", row)
		}
		path := row[2].(string)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		// Everything was read, up to the end (or an unfinished last line).
		indexed, pending := row[8].(int64), row[9].(int64)
		if indexed+pending != fi.Size() || indexed <= 0 {
			t.Errorf("%s: indexed %d + pending %d != size %d", path, indexed, pending, fi.Size())
		}
	}
}
