package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gendex/store"
)

// README's SpecForge recipe, as written (no --api), against the simulator
// speaking vLLM with a drafter: every prompt shape is answered by the
// route vLLM offers, the conversations are exported, the token-id prompts
// are said at the start to get no conversations records, with a command
// that makes their ids records and works as written; the server's accept
// length over a window is its counters' figure for that window, not the
// last sample's; query spec says why it has no per-dataset figures, and
// plot accept draws the server-wide one.
func TestSpecForgeRecipeOnVLLM(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	url := startSimProcess(t, p.bin, "--flavor", "vllm", "--unmarked", "--spec-draft-tokens", "4", "--metrics", "--decode-tps", "300")
	errOut := p.mustRun("gen", "--server", url, "--max-new-tokens", "256", "--export", "conversations", "demo")
	for _, want := range []string{"token-id prompts to /v1/completions", "chat prompts to /v1/chat/completions", "chosen for vLLM"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the ready line does not say %q:\n%s", want, errOut)
		}
	}
	for _, ds := range []string{"B1_ids", "B2_text", "B3_chat", "B4_sharegpt"} {
		if n := len(answerLines(t, filepath.Join(p.dir, "demo", ds, "raw_responses.jsonl"))); n != 50 {
			t.Errorf("%s: %d answers of 50", ds, n)
		}
		if ds != "B1_ids" && len(answerLines(t, filepath.Join(p.dir, "demo", ds, "tokenized.jsonl"))) == 0 {
			t.Errorf("%s: no conversations records", ds)
		}
	}
	// The note comes before the first answer, with the command.
	note := strings.Index(errOut, "B1_ids: its prompts are token ids")
	if note < 0 || note > strings.Index(errOut, "answers (") {
		t.Fatalf("no word before the first request that B1_ids gets no conversations records:\n%s", errOut)
	}
	cmdLine := strings.TrimSpace(strings.SplitN(errOut[note:], "\n", 3)[1])
	var detail string
	for _, m := range answerLines(t, filepath.Join(p.dir, "demo", "B1_ids", "excluded.jsonl")) {
		if m["reason"] == "ids_prompt" {
			detail = m["detail"].(string)
		}
	}
	if !strings.HasSuffix(detail, cmdLine) {
		t.Errorf("the exclusion's advice %q is not gen's %q", detail, cmdLine)
	}
	// The command works as written, from another folder.
	sh := exec.Command("sh", "-c", cmdLine)
	sh.Dir, sh.Env = t.TempDir(), []string{"PATH=" + filepath.Dir(p.bin) + ":/usr/bin:/bin"}
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdLine, err, out)
	}
	ids := 0
	for _, m := range answerLines(t, filepath.Join(p.dir, "demo-ids", "B1_ids", "tokenized.jsonl")) {
		if _, ok := m["input_ids"].([]any); ok {
			ids++
		}
	}
	if ids == 0 {
		t.Errorf("%s made no ids records", cmdLine)
	}
	// In place, the same index refuses, naming the command that works.
	code, errOut := p.run("export", "--format", "ids", filepath.Join("demo", "B1_ids"))
	if code != 1 || !strings.Contains(errOut, "as ids_prompt") || !strings.Contains(errOut, "export --format ids --out") {
		t.Errorf("export --format ids in place: exit %d; want 1 and the way out\n%s", code, errOut)
	}

	// A tiny run after the long one: the last sample's accept length is
	// that run's, the window's is the counters' over both.
	writeIDPrompts(t, filepath.Join(p.dir, "tiny", "T"), "T", 5)
	p.mustRun("gen", "--server", url, "--max-new-tokens", "2", filepath.Join("tiny", "T"))
	acc, drafts := simSpecCounters(t, url)
	want := fmt.Sprintf("%.2f", 1+acc/drafts)
	got := queryCell(t, p, "accept_length", "server", "--window", "1h")
	if got != want {
		t.Errorf("query server --window 1h: accept_length %s; the counters give 1 + %.0f/%.0f = %s", got, acc, drafts, want)
	}
	db, err := store.Open(filepath.Join(p.dir, "gendex.db"), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(v *store.View) error {
		if last, ok, _ := v.LastServerSample(url); ok {
			if x, ok := last.Get(store.MetricAcceptLength); ok && fmt.Sprintf("%.2f", x) == want {
				t.Logf("the last sample's figure equals the window's (%s): this run does not tell them apart", want)
			}
		}
		return nil
	})
	db.Close()

	_, stdout, stderr := runGendex(t, p.bin, p.dir, "query", "spec")
	if out := stdout + stderr; !strings.Contains(out, "no per-request speculative counts") || !strings.Contains(out, "query server --window") {
		t.Errorf("query spec does not say why it has no figures, nor where the server's is:\n%s", out)
	}
	if code, stdout, stderr := runGendex(t, p.bin, p.dir, "plot", "accept", "--width", "80", "--height", "20"); code != 0 || !strings.Contains(stdout+stderr, "server-wide") {
		t.Errorf("plot accept: exit %d\n%s%s", code, stdout, stderr)
	}
}

// simSpecCounters reads vLLM's accepted-token and draft counters from the
// simulator's /metrics.
func simSpecCounters(t *testing.T, url string) (accepted, drafts float64) {
	t.Helper()
	return simCounters(t, url, "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_drafts_total")
}

// simCounters reads two counters (any labels) from the simulator's /metrics.
func simCounters(t *testing.T, url, accName, draftsName string) (accepted, drafts float64) {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch {
		case f[0] == accName || strings.HasPrefix(f[0], accName+"{"):
			accepted = v
		case f[0] == draftsName || strings.HasPrefix(f[0], draftsName+"{"):
			drafts = v
		}
	}
	if drafts == 0 {
		t.Fatal("the simulator drafted nothing")
	}
	return accepted, drafts
}

// queryCell runs gendex query ARGS in p.dir and returns column col of its
// only row.
func queryCell(t *testing.T, p *placeRun, col string, args ...string) string {
	t.Helper()
	return rowCell(t, queryRow(t, p, args...), col)
}

// rowCell is column col of a queryRow's row; a row without it fails the
// test.
func rowCell(t *testing.T, row map[string]string, col string) string {
	t.Helper()
	c, ok := row[col]
	if !ok {
		t.Fatalf("no column %s in %v", col, row)
	}
	return c
}

// queryRow runs gendex query ARGS in p.dir and returns its only row, by
// column.
func queryRow(t *testing.T, p *placeRun, args ...string) map[string]string {
	t.Helper()
	code, out, _ := runGendex(t, p.bin, p.dir, append([]string{"query"}, args...)...)
	if code != 0 {
		t.Fatalf("query %v: exit %d", args, code)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("query %v: want one row:\n%s", args, out)
	}
	head, cells := strings.Split(lines[0], "\t"), strings.Split(lines[1], "\t")
	row := map[string]string{}
	for i, h := range head {
		if i < len(cells) {
			row[h] = cells[i]
		}
	}
	return row
}

// The same recipe against the simulator speaking llama.cpp (the facts of
// a real llama-server: ../shared/sglang-api.md section 13) with a drafter:
// every shape answered by its routes, the conversations exported, the
// token-id prompts said to get no records of either format (its answers
// carry no output ids), and the accept length over the window its
// counters'.
func TestSpecForgeRecipeOnLlamaCpp(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	url := startSimProcess(t, p.bin, "--flavor", "llamacpp", "--unmarked", "--spec-draft-tokens", "4", "--metrics", "--decode-tps", "300")
	errOut := p.mustRun("gen", "--server", url, "--max-new-tokens", "256", "--export", "conversations", "demo")
	for _, want := range []string{"llama.cpp", "token-id prompts to /v1/completions", "chosen for llama.cpp",
		"B1_ids: its prompts are token ids", "llama.cpp's answers carry no output ids"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("gen does not say %q:\n%s", want, errOut)
		}
	}
	checkTokenIDPrompts(t, p, "demo")
	for _, ds := range []string{"B2_text", "B3_chat", "B4_sharegpt"} {
		if len(answerLines(t, filepath.Join(p.dir, "demo", ds, "tokenized.jsonl"))) == 0 {
			t.Errorf("%s: no conversations records", ds)
		}
	}
	acc, drafts := simCounters(t, url, "llamacpp:spec_decode_num_accepted_tokens_total", "llamacpp:spec_decode_num_drafts_total")
	want := fmt.Sprintf("%.2f", 1+acc/drafts)
	if got := queryCell(t, p, "accept_length", "server", "--window", "1h"); got != want {
		t.Errorf("query server --window 1h: accept_length %s; the counters give 1 + %.0f/%.0f = %s", got, acc, drafts, want)
	}
}
