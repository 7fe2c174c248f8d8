package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gendex/query"
)

// writeMultiTurnShareGPT writes n ShareGPT conversations of 1 to 3 human
// turns, every fourth with a system turn first, each human turn followed
// by the data's own gpt turn.
func writeMultiTurnShareGPT(t *testing.T, dir string, from, n int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "prompts.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for c := from; c < from+n; c++ {
		var turns []map[string]string
		if c%4 == 0 {
			turns = append(turns, map[string]string{"from": "system", "value": "You answer briefly."})
		}
		for u := range 1 + c%3 {
			turns = append(turns, map[string]string{"from": "human", "value": fmt.Sprintf("conversation %d, question %d: explain it", c, u+1)},
				map[string]string{"from": "gpt", "value": "the data's answer"})
		}
		line, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("sg-%05d", c), "conversations": turns})
		if _, err := f.Write(append(line, '\n')); err != nil {
			t.Fatal(err)
		}
	}
}

// checkVerdict runs `gendex check --format json` with args in p.dir and
// returns its exit code and the one dataset's reasons by name.
func (p *placeRun) checkVerdict(args ...string) (code int, reasons map[string]checkReason, out string) {
	p.t.Helper()
	code, out, errOut := p.check(append([]string{"--format", "json"}, args...)...)
	var v struct{ Datasets []verdict }
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Datasets) != 1 {
		p.t.Fatalf("gendex check --format json %q: %v, want one dataset\n%s\n%s", args, err, out, errOut)
	}
	reasons = map[string]checkReason{}
	for _, r := range v.Datasets[0].Reasons {
		reasons[r.Reason] = r
	}
	return code, reasons, out
}

// in is p for subtest t.
func (p *placeRun) in(t *testing.T) *placeRun { return &placeRun{t: t, bin: p.bin, dir: p.dir} }

// runFix runs the commands of a check's fix, joined by "; ", each a
// gendex command whose words have no spaces of their own.
func (p *placeRun) runFix(fix string) {
	p.t.Helper()
	for _, cmd := range strings.Split(fix, "; ") {
		words, ok := strings.CutPrefix(cmd, "gendex ")
		if !ok {
			p.t.Fatalf("fix %q: %q is not a gendex command", fix, cmd)
		}
		p.mustRun(strings.Fields(words)...)
	}
}

// blockedThenFixed checks that check of dataset folder ds says reason
// (blocking, its detail holding every one of details), then runs the fix
// it prints and checks again: the reason is gone. It returns the reasons
// after the fix.
func (p *placeRun) blockedThenFixed(ds, reason string, details ...string) map[string]checkReason {
	p.t.Helper()
	code, reasons, out := p.checkVerdict(ds)
	r, ok := reasons[reason]
	if code != 1 || !ok || !r.Blocks || r.Fix == "" {
		p.t.Fatalf("check: exit %d, want 1 and %s blocking with a fix\n%s", code, reason, out)
	}
	for _, d := range details {
		if !strings.Contains(r.Detail, d) {
			p.t.Errorf("check's %s says %q, want it to name %q", reason, r.Detail, d)
		}
	}
	p.runFix(r.Fix)
	_, reasons, out = p.checkVerdict(ds)
	if _, ok := reasons[reason]; ok {
		p.t.Fatalf("check after its fix %q: %s is still there\n%s", r.Fix, reason, out)
	}
	return reasons
}

// TestCheckLooksAtTheDisk: on a multi-turn ShareGPT run (1 to 3 human
// turns, system turns; gen --turns all --export conversations: 47
// records), check compares every file the index counts with the disk
// before its verdict. Prompts appended (index_behind), tokenized.jsonl
// deleted or cut to 2 of its 47 records, and an answer line edited in
// place (files_changed) each make it not ready, naming the file and what
// changed; the fix it prints (gendex ingest FILE, gendex ingest --reread
// FILE) clears the reason, and what is then owed is counted (5
// unanswered, 47 or 45 records missing, 1 stale). show of the edited
// answer points to the same re-read, which makes it readable again.
// Before, check was ready-or-not on the index alone: none of these
// reasons existed.
func TestCheckLooksAtTheDisk(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	ds := filepath.Join(p.dir, "data", "sg")
	writeMultiTurnShareGPT(t, ds, 0, 47)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "4096", "--turns", "all", "--export", "conversations", ds)
	tokenized := filepath.Join(ds, "tokenized.jsonl")
	clean, err := os.ReadFile(tokenized)
	if err != nil || bytes.Count(clean, []byte{'\n'}) != 47 {
		t.Fatalf("the run wrote %d records (%v), want 47", bytes.Count(clean, []byte{'\n'}), err)
	}
	_, reasons, out := p.checkVerdict(ds)
	for _, r := range []string{query.ReasonBehind, query.ReasonChanged, query.ReasonUnreadable, query.ReasonDiskUnchecked} {
		if _, ok := reasons[r]; ok {
			t.Fatalf("check of the run as gen left it says %s\n%s", r, out)
		}
	}

	t.Run("prompts appended", func(t *testing.T) {
		p := p.in(t)
		writeMultiTurnShareGPT(t, ds, 47, 5)
		after := p.blockedThenFixed(ds, query.ReasonBehind, filepath.Join(ds, "prompts.jsonl")+": 5 lines past where it was read")
		if r := after[query.ReasonUnanswered]; r.Count != float64(5) {
			t.Errorf("after the prompts were read: unanswered %v, want 5", r.Count)
		}
	})
	t.Run("tokenized deleted", func(t *testing.T) {
		p := p.in(t)
		os.Remove(tokenized)
		after := p.blockedThenFixed(ds, query.ReasonChanged, tokenized+": the file is gone")
		if r := after[query.ReasonNoRecord]; r.Count != float64(47) {
			t.Errorf("after the records' file was forgotten: no_record %v, want 47", r.Count)
		}
		p.mustRun("export", ds)
	})
	t.Run("tokenized cut to 2 records", func(t *testing.T) {
		p := p.in(t)
		recs, _ := os.ReadFile(tokenized)
		if bytes.Count(recs, []byte{'\n'}) != 47 {
			t.Fatalf("export wrote %d records again, want 47", bytes.Count(recs, []byte{'\n'}))
		}
		first := bytes.IndexByte(recs, '\n') + 1
		second := first + bytes.IndexByte(recs[first:], '\n') + 1
		if err := os.Truncate(tokenized, int64(second)); err != nil { // the same file, its first 2 records
			t.Fatal(err)
		}
		after := p.blockedThenFixed(ds, query.ReasonChanged, tokenized+": the file is shorter than what was indexed")
		if r := after[query.ReasonNoRecord]; r.Count != float64(45) {
			t.Errorf("after the cut file was read again: no_record %v, want 45", r.Count)
		}
		p.mustRun("export", ds)
	})
	t.Run("answer edited in place", func(t *testing.T) {
		p := p.in(t)
		raw := filepath.Join(ds, "raw_responses.jsonl")
		id, n := editAnswerInPlace(t, raw, 20)
		show := gendex(t, testEnv(nil), "--db", filepath.Join(p.dir, "gendex.db"), "query", "show", "sg", id)
		if want := "gendex ingest --reread " + raw; show.code == 0 || !strings.Contains(show.stderr, want) {
			t.Errorf("show of the edited answer: %s, want an error saying %q", show, want)
		}
		_, reasons, out := p.checkVerdict(ds)
		if r, ok := reasons[query.ReasonNotRead]; ok && !strings.Contains(r.Detail, "gendex ingest --reread "+raw) {
			t.Errorf("check's content_unchecked note does not name the re-read that works:\n%s", out)
		}
		after := p.blockedThenFixed(ds, query.ReasonChanged, raw+": 1 of its 47 answer lines differ", fmt.Sprintf("line %d", n))
		if r := after[query.ReasonStale]; r.Count != float64(1) {
			t.Errorf("after the answers were read again: stale_record %v, want 1 (its record was built from the old line)", r.Count)
		}
		if show := gendex(t, testEnv(nil), "--db", filepath.Join(p.dir, "gendex.db"), "query", "show", "sg", id); show.code != 0 || !strings.Contains(show.stdout, id) {
			t.Errorf("show after the re-read: %s", show)
		}
	})
}

// editAnswerInPlace changes one letter of an answer's text where it is
// (the same inode, length and ends): the first answer from line n of path
// on whose text starts with a letter. It returns the answer's id and
// line.
func editAnswerInPlace(t *testing.T, path string, n int) (id string, at int) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const key = `"text":"`
	var off int
	for i, line := range bytes.SplitAfter(data, []byte{'\n'}) {
		k := bytes.Index(line, []byte(key)) + len(key)
		if i+1 < n || k < len(key) || !isLetter(line[k]) {
			off += len(line)
			continue
		}
		var a struct{ ID string }
		if err := json.Unmarshal(line, &a); err != nil || a.ID == "" {
			t.Fatalf("line %d of %s: no id (%v)", i+1, path, err)
		}
		letter := byte('Q')
		if line[k] == letter {
			letter = 'W'
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte{letter}, int64(off+k)); err != nil {
			t.Fatal(err)
		}
		return a.ID, i + 1
	}
	t.Fatalf("%s: no answer text starting with a letter from line %d", path, n)
	return "", 0
}

func isLetter(b byte) bool { return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' }

// TestCheckSeesToolAnswersReplaced: a tool-calling set (OpenAI messages
// with parallel-free calls and glaive function_call/observation lines)
// answered against the simulator's tool model; its raw_responses.jsonl
// replaced by another file of the same size at its path (a tool that
// writes a copy and renames it over) makes check not ready,
// files_changed naming the new inode; the re-read it prints clears it.
func TestCheckSeesToolAnswersReplaced(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	ds := filepath.Join(p.dir, "agentic")
	if err := os.Rename(simToolDataset(t, 8), ds); err != nil {
		t.Fatal(err)
	}
	p.mustRun("gen", "--server", "sim", "--sim-tool-calls", "--sim-tool-call-parser", "qwen25", "--max-new-tokens", "400",
		"--include-truncated", "--export", "conversations", ds)
	raw := filepath.Join(ds, "raw_responses.jsonl")
	data, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	tmp := raw + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, raw); err != nil {
		t.Fatal(err)
	}
	p.blockedThenFixed(ds, query.ReasonChanged, raw+": another file is at its path")
}

// TestCheckWhileGenWrites: check asked while gen writes the index is
// answered by gen over its socket, from what gen has committed. Gen's
// own files, appended to as it goes, are never called changed (every
// check of its dataset while it runs); lines past what it has committed
// are only behind. Prompts appended to another dataset of the index
// meanwhile are index_behind with a fix that waits for the run (gendex
// ingest would find the index locked); once gen has ended, its dataset
// has nothing behind or changed, and the other's fix is gendex ingest
// FILE, which clears it.
func TestCheckWhileGenWrites(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	done, going := filepath.Join(p.dir, "data", "done"), filepath.Join(p.dir, "data", "going")
	writeMultiTurnShareGPT(t, done, 0, 10)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "256", "--turns", "all", "--export", "conversations", done)
	writeMultiTurnShareGPT(t, going, 0, 150)
	w := startWriter(t, filepath.Join(p.dir, "gendex.db"), nil, "gen", "--server", "sim", "--sim-decode-tps", "200", "--concurrency", "8",
		"--max-new-tokens", "64", "--turns", "all", "--export", "conversations", going)
	writeMultiTurnShareGPT(t, done, 10, 3)
	_, reasons, out := p.checkVerdict(done)
	r := reasons[query.ReasonBehind]
	select {
	case <-w.Done():
		t.Fatalf("gen ended before the test could check while it ran: exit %d\n%s", w.Wait(), w.Stderr())
	default:
	}
	if !r.Blocks || !strings.HasPrefix(r.Fix, "wait for the ") || !strings.Contains(r.Fix, "writes the index") || strings.Contains(r.Fix, "gendex ingest") {
		t.Errorf("check of prompts appended while gen runs: %+v, want index_behind whose fix waits for the run\n%s", r, out)
	}
	live, behind := 0, 0
	for running := true; running; {
		select {
		case <-w.Done():
			running = false
		default:
		}
		_, reasons, out := p.checkVerdict(going)
		for _, bad := range []string{query.ReasonChanged, query.ReasonUnreadable} {
			if _, ok := reasons[bad]; ok {
				t.Fatalf("check while gen writes (check %d): %s\n%s", live+1, bad, out)
			}
		}
		if running {
			live++
			time.Sleep(50 * time.Millisecond) // a reader among others, not a flood
		}
		if r, ok := reasons[query.ReasonBehind]; ok && running {
			behind++
			if !strings.HasPrefix(r.Fix, "wait for the ") {
				t.Errorf("check while gen writes: index_behind's fix does not wait for it: %q", r.Fix)
			}
		}
	}
	t.Logf("%d checks while gen wrote, %d of them saw lines it had not committed yet", live, behind)
	if w.Wait() != 0 || live < 3 {
		t.Fatalf("gen: exit %d after %d checks while it ran (want 3 at least)\n%s", w.Wait(), live, w.Stderr())
	}
	_, reasons, out = p.checkVerdict(going)
	for _, bad := range []string{query.ReasonBehind, query.ReasonChanged} {
		if _, ok := reasons[bad]; ok {
			t.Errorf("check once gen has ended: %s\n%s", bad, out)
		}
	}
	p.blockedThenFixed(done, query.ReasonBehind, filepath.Join(done, "prompts.jsonl")+": 3 lines past where it was read")
}
