package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"gendex/store/terminal"
)

// "answered" counts answers: a prompt that failed for good is its own
// count (failed), and one gen does not send for its shape is to go,
// neither answered nor failed, in gen's lines and summary, query progress,
// the shell's watch and progress, the web view and check alike. Before,
// every view counted a failed prompt as answered ("1/298 answered" over a
// file of 0 answers), gen called the prompts it did not send "failed", and
// check's fix for them (gen --server URL) sent nothing.

// failingShareGPT writes two datasets under a new root and returns it.
// "sharegpt": n multi-turn ShareGPT conversations (1 to 3 human turns, a
// system turn in every other one), "long", a conversation far over
// --sim-context 2048 (the server refuses it: it fails for good), and
// "odd", whose prompt is at data.prompt (no key gen reads: gen does not
// send it). "lost": one conversation, far over 2048 tokens too: it holds
// no answer, ever.
func failingShareGPT(t *testing.T, n int) string {
	t.Helper()
	var lines []string
	for i := range n {
		var conv []map[string]string
		if i%2 == 1 {
			conv = append(conv, map[string]string{"from": "system", "value": "You answer briefly."})
		}
		for turn := range 1 + i%3 {
			conv = append(conv, map[string]string{"from": "human", "value": fmt.Sprintf("question %d, turn %d: why is the sky blue?", i, turn)},
				map[string]string{"from": "gpt", "value": fmt.Sprintf("the data's answer %d.%d", i, turn)})
		}
		b, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("c%02d", i), "conversations": conv})
		lines = append(lines, string(b))
	}
	long := func(id string) string {
		b, _ := json.Marshal(map[string]any{"id": id, "conversations": []map[string]string{
			{"from": "system", "value": "You answer briefly."},
			{"from": "human", "value": strings.Repeat("a very long question ", 2000)}, {"from": "gpt", "value": "x"}}})
		return string(b)
	}
	lines = append(lines, long("long"), `{"id":"odd","data":{"prompt":"what is two and two?"}}`)
	root := t.TempDir()
	for name, ls := range map[string][]string{"sharegpt": lines, "lost": {long("lost")}} {
		writeTestFile(t, filepath.Join(root, name, "prompts.jsonl"), strings.Join(ls, "\n")+"\n")
	}
	return root
}

// lineIDs reads the ids of a JSONL file's lines by itself (none when the
// file is absent).
func lineIDs(t *testing.T, path string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return ids
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l struct{ ID string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		ids[l.ID] = true
	}
	return ids
}

// fileCounts counts, from dir's files alone, the prompts answered (an id
// in raw_responses.jsonl) and failed (in errors.jsonl, not answered).
func fileCounts(t *testing.T, dir string) (answered, failed int) {
	t.Helper()
	answers := lineIDs(t, filepath.Join(dir, "raw_responses.jsonl"))
	for id := range lineIDs(t, filepath.Join(dir, "errors.jsonl")) {
		if !answers[id] {
			failed++
		}
	}
	return len(answers), failed
}

// genFailing runs gen on failingShareGPT(n) with its lines every 20 ms,
// against server (flags: by default the simulator, with a context of 2048
// tokens, decoding slowly enough for several lines after the failures); it returns the
// index, the root and gen's stderr.
func genFailing(t *testing.T, n int, server ...string) (db, root, stderr string) {
	t.Helper()
	if len(server) == 0 {
		// 40 tokens/s: the conversations go on for seconds after the
		// failed prompts fail (their long prompt is tokenized first, which
		// takes the longer the busier the machine).
		server = []string{"--server", "sim", "--sim-context", "2048", "--sim-decode-tps", "40", "--max-new-tokens", "24"}
	}
	root = failingShareGPT(t, n)
	db = filepath.Join(t.TempDir(), "g.db")
	args := append(append([]string{"--db", db, "gen"}, server...), root)
	r := gendex(t, testEnv(map[string]string{"GENDEX_LOG_EVERY": "20ms"}), args...)
	if r.code != 1 || !strings.Contains(r.stderr, "1 prompt not sent for its shape (still to go)") {
		t.Fatalf("gen with a prompt it cannot send: want exit 1 saying so\n%s", r)
	}
	for name, want := range map[string][2]int{"sharegpt": {n, 1}, "lost": {0, 1}} {
		if a, f := fileCounts(t, filepath.Join(root, name)); a != want[0] || f != want[1] {
			t.Fatalf("%s: the files hold %d answers and %d failed prompts; want %v\n%s", name, a, f, want, r)
		}
	}
	return db, root, r.stderr
}

// TestAnsweredCountsAnswers: gen's live lines and summary, and query
// progress, count as answered the prompts with an answer in the file, and
// the failed apart: answered + failed + to go is the prompts, and the
// share done is answered or failed out of prompts. A dataset whose one
// prompt failed is 0 answered.
func TestAnsweredCountsAnswers(t *testing.T) {
	t.Parallel()
	const n = 12
	db, root, stderr := genFailing(t, n)
	for _, want := range []string{
		fmt.Sprintf("  sharegpt: %d/%d answered (%d this run), 1 failed, 1 to go", n, n+2, n),
		"  lost: 0/1 answered (0 this run), 1 failed, 0 to go",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("gen's summary does not say %q:\n%s", want, stderr)
		}
	}
	// A live line: answered/prompts, the share done, the failed (when
	// any), the prompts to go.
	live := regexp.MustCompile(`  (sharegpt|lost) (\d+)/(\d+) answered \(([0-9.]+)% done\)(?:, (\d+) failed)?, (\d+) to go`)
	lines := live.FindAllStringSubmatch(stderr, -1)
	failedSeen := map[string]bool{}
	for _, m := range lines {
		answers, _ := fileCounts(t, filepath.Join(root, m[1]))
		a, _ := strconv.Atoi(m[2])
		total, _ := strconv.Atoi(m[3])
		done, _ := strconv.ParseFloat(m[4], 64)
		f, _ := strconv.Atoi(m[5])
		left, _ := strconv.Atoi(m[6])
		if a > answers || a+f+left != total || fmt.Sprintf("%.1f", done) != fmt.Sprintf("%.1f", 100*float64(a+f)/float64(total)) {
			t.Errorf("live line %q: answered + failed + to go must be the prompts, answered at most the %d answers of the file, done their share", m[0], answers)
		}
		failedSeen[m[1]] = failedSeen[m[1]] || f == 1
	}
	// The refused prompts fail for good once the server's aborts are
	// retried, a few tenths of a second in, while the conversations go on.
	if !failedSeen["sharegpt"] && !failedSeen["lost"] {
		t.Errorf("no live line counts a failed prompt:\n%s", stderr)
	}

	prog := progressJSON(t, db)
	for name, want := range map[string]map[string]float64{
		"sharegpt": {"answered": n, "failed": 1, "missing_raw": 1, "prompts": n + 2},
		"lost":     {"answered": 0, "failed": 1, "missing_raw": 0, "prompts": 1},
	} {
		for col, v := range want {
			if prog[name][col] != v {
				t.Errorf("query progress %s %s = %v; want %v (%v)", name, col, prog[name][col], v, prog[name])
			}
		}
		if done := fmt.Sprintf("%.2f", 100*(want["answered"]+want["failed"])/want["prompts"]); fmt.Sprintf("%.2f", prog[name]["done_pct"]) != done {
			t.Errorf("query progress %s done_pct = %v; want %s (answered or failed, out of prompts)", name, prog[name]["done_pct"], done)
		}
	}
}

// progressJSON is query progress of db, by dataset.
func progressJSON(t *testing.T, db string) map[string]map[string]any {
	t.Helper()
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "progress", "--format", "json")
	var rows []map[string]any
	decodeJSON(t, r.stdout, &rows)
	out := map[string]map[string]any{}
	for _, row := range rows {
		out[row["dataset"].(string)] = row
	}
	return out
}

// TestWatchCountsFailedApart: in an 80-column terminal, the shell's watch
// and progress show the file's answers as answered and the failed prompt
// apart, every line within the terminal.
func TestWatchCountsFailedApart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the shell in tmux")
	}
	bin := gendexBinary(t)
	db, _, _ := genFailing(t, 12)
	tm := newTerm(t, t.TempDir())
	tm.tmux("resize-window", "-t", "t", "-x", "80", "-y", "40")
	tm.typeLine(bin + " --db " + db + " shell")
	tm.waitFor("gendex>")

	// cells reads the row of dataset under the header holding head, by
	// header name, from the newest table on the screen.
	cells := func(dataset, head string) map[string]string {
		ls := strings.Split(tm.tmux("capture-pane", "-t", "t", "-p", "-J"), "\n")
		var cols []string
		got := map[string]string{}
		for _, l := range ls {
			f := strings.Fields(l)
			switch {
			case strings.Contains(l, head) && len(f) > 0 && f[0] == "dataset":
				cols, got = f, map[string]string{}
			case cols != nil && len(f) == len(cols) && f[0] == dataset:
				for i, c := range cols {
					got[c] = f[i]
				}
			}
		}
		return got
	}
	fits := func(what string) {
		for _, l := range strings.Split(tm.tmux("capture-pane", "-t", "t", "-p", "-J"), "\n") {
			if w := terminal.Width(strings.TrimRight(l, " ")); w > 80 {
				t.Errorf("%s: a line of %d columns in an 80-column terminal: %q", what, w, l)
			}
		}
	}

	tm.typeLine("watch 30")
	tm.waitUntil("watch's row of lost", func(string) bool { return cells("lost", "answered")["answered"] != "" })
	for name, want := range map[string][3]string{"sharegpt": {"12", "1", "14"}, "lost": {"0", "1", "1"}} {
		w := cells(name, "answered")
		if got := [3]string{w["answered"], w["fail"], w["prompts"]}; got != want {
			t.Errorf("watch's %s: %v; want answered, fail, prompts %v", name, w, want)
		}
	}
	fits("watch")
	tm.send("C-c")
	tm.waitFor("^C")

	tm.typeLine("progress")
	tm.waitUntil("progress's row of lost", func(string) bool { return cells("lost", "to_go")["ans"] != "" })
	for name, want := range map[string][3]string{"sharegpt": {"12", "1", "1"}, "lost": {"0", "1", "0"}} {
		p := cells(name, "to_go")
		if got := [3]string{p["ans"], p["fail"], p["to_go"]}; got != want {
			t.Errorf("the shell's progress of %s: %v; want ans, fail, to_go %v", name, p, want)
		}
	}
	fits("progress")
	tm.send("C-d")
}

// TestWebCountsFailedApart: the web view's run page shows the file's
// answers as answered, the failed prompt apart, and done % as answered or
// failed out of prompts.
func TestWebCountsFailedApart(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	db, _, _ := genFailing(t, 12)
	url, _ := startWeb(t, p, []string{"GENDEX_TOKEN=tok-49", "GENDEX_DB=" + db})
	page := webGet(t, url+"live", "tok-49")
	for name, want := range map[string]map[string]string{
		"sharegpt": {"answered": "12", "failed": "1", "missing_raw": "1", "done_pct": "92.86"},
		"lost":     {"answered": "0", "failed": "1", "missing_raw": "0", "done_pct": "100.00"},
	} {
		for col, v := range want {
			if got := webCell(page, name, col); got != v {
				t.Errorf("the web view's %s of %s: %q; want %q", col, name, got, v)
			}
		}
	}
	if !strings.Contains(page, "answered or failed for good, out of prompts") {
		t.Error("the web view does not say what done % counts")
	}
}

// TestUnsentShapeFix: check calls the prompt gen did not send for its
// shape unanswered, with a fix that sends it (gen --prompt, the key that
// holds it); run as printed, with the server's URL, it clears the reason.
func TestUnsentShapeFix(t *testing.T) {
	t.Parallel()
	url := startSimProcess(t, gendexBinary(t), "--context", "2048")
	db, root, _ := genFailing(t, 4, "--server", url)
	dir := filepath.Join(root, "sharegpt")
	r := gendex(t, testEnv(nil), "--db", db, "check", "--format", "json", "sharegpt")
	fix := checkFix(t, r.stdout, "unanswered")
	want := "gendex gen --server URL --prompt data.prompt " + dir
	if fix != want {
		t.Fatalf("check's fix for the prompt gen did not send: %q; want %q\n%s", fix, want, r)
	}
	args := append([]string{"--db", db}, strings.Fields(strings.TrimPrefix(strings.Replace(fix, "URL", url, 1), "gendex "))...)
	if r := gendex(t, testEnv(nil), args...); r.code != 0 {
		t.Fatalf("the printed fix, run: %s", r)
	}
	r = gendex(t, testEnv(nil), "--db", db, "check", "--format", "json", "sharegpt")
	if fix := checkFix(t, r.stdout, "unanswered"); fix != "" {
		t.Errorf("after the printed fix, check still says unanswered (fix %q)\n%s", fix, r)
	}
	if prog := progressJSON(t, db)["sharegpt"]; prog["answered"] != float64(5) || prog["failed"] != float64(1) || prog["missing_raw"] != float64(0) {
		t.Errorf("after the fix: %v; want 5 answered, 1 failed, none to go", prog)
	}
}

// checkFix returns the fix of reason in check's JSON answer ("" when the
// reason is not given).
func checkFix(t *testing.T, out, reason string) string {
	t.Helper()
	var v any
	decodeJSON(t, out, &v)
	var find func(any) string
	find = func(x any) string {
		switch x := x.(type) {
		case map[string]any:
			if x["reason"] == reason {
				s, _ := x["fix"].(string)
				return s
			}
			for _, e := range x {
				if s := find(e); s != "" {
					return s
				}
			}
		case []any:
			for _, e := range x {
				if s := find(e); s != "" {
					return s
				}
			}
		}
		return ""
	}
	return find(v)
}
