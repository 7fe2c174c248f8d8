package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
)

// An export's records are those in its own output folder: these tests run
// the binary as a user does, in a working directory with relative paths
// and the default index (./gendex.db), and run every command a refusal
// recommends exactly as it is written.

// runIn runs the gendex binary in dir (runGendex) and returns its exit
// code and what it wrote, stdout then stderr.
func runIn(t *testing.T, bin, dir string, args ...string) (int, string) {
	t.Helper()
	code, stdout, stderr := runGendex(t, bin, dir, args...)
	return code, stdout + stderr
}

// recommended returns the commands a refusal recommends (its lines
// "    gendex ..."), each split into arguments as a POSIX shell splits it.
func recommended(t *testing.T, stderr string) [][]string {
	t.Helper()
	var cmds [][]string
	for _, line := range strings.Split(stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, "    gendex "); ok {
			cmds = append(cmds, shellWords(t, rest))
		}
	}
	return cmds
}

// shellWords splits a command line as a POSIX shell does, for the words
// and single quotes a refusal's command may hold.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quoted := false, false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case quoted && c == '\'':
			quoted = false
		case quoted:
			w.WriteByte(c)
		case c == '\'':
			quoted, in = true, true
		case c == ' ':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		case strings.IndexByte("\"\\$`*?;&|<>()", c) >= 0:
			t.Fatalf("a recommended command holds %q, which this test does not split: %s", c, line)
		default:
			w.WriteByte(c)
			in = true
		}
	}
	if quoted {
		t.Fatalf("an unclosed quote: %s", line)
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// writeChatPrompts writes n chat-message prompts to dir/prompts.jsonl.
func writeChatPrompts(t *testing.T, dir, name string, n int) {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		line, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%s-%05d", name, i), "messages": []map[string]string{
			{"role": "system", "content": "Be brief."}, {"role": "user", "content": fmt.Sprintf("question %d about %s", i, name)}}})
		b.Write(append(line, '\n'))
	}
	writePrompts(t, dir, b.String())
}

// placeData writes, under work/data, datasets whose ids records need no
// server once gen --server sim answered them (gen keeps the prompt ids of
// chat messages; token-id prompts are their own): chat prompts, 2-turn
// ShareGPT conversations and token-id prompts (the last are excluded
// from conversations records, so their tokenized.jsonl stays empty).
func placeData(t *testing.T) (work string, datasets []string) {
	t.Helper()
	work = t.TempDir()
	writeChatPrompts(t, filepath.Join(work, "data", "chat"), "chat", 40)
	writeShareGPTPrompts(t, filepath.Join(work, "data", "sg"), "sg", 12, 2)
	writeIDPrompts(t, filepath.Join(work, "data", "ids"), "ids", 20)
	return work, []string{"chat", "ids", "sg"}
}

// keptIDs returns, for each answer of raw that the ids format keeps (no
// turn cut or aborted, output ids in every turn), its last turn's
// output_ids.
func keptIDs(t *testing.T, raw string) map[string][]int {
	t.Helper()
	type turn struct {
		OutputIDs []int  `json:"output_ids"`
		Finish    string `json:"finish_reason"`
	}
	kept := map[string][]int{}
	for _, l := range jsonLines(t, raw) {
		var a struct {
			turn
			Turns []turn `json:"turns"`
		}
		b, _ := json.Marshal(l)
		if err := json.Unmarshal(b, &a); err != nil {
			t.Fatal(err)
		}
		turns := a.Turns
		if len(turns) == 0 {
			turns = []turn{a.turn}
		}
		ok := a.Finish != "length" && a.Finish != "abort"
		for _, tu := range turns {
			ok = ok && tu.Finish != "length" && tu.Finish != "abort" && len(tu.OutputIDs) > 0
		}
		if ok {
			kept[idOfLine(t, l)] = turns[len(turns)-1].OutputIDs
		}
	}
	return kept
}

// checkIDsRecords checks that out/<ds>/tokenized.jsonl holds exactly one
// ids record per answer of answers/<ds> that the ids format keeps, each
// ending with that answer's output ids, and that every other answer has
// one exclusion; it returns how many records there are.
func checkIDsRecords(t *testing.T, answers, out, ds string) int {
	t.Helper()
	kept := keptIDs(t, filepath.Join(answers, ds, "raw_responses.jsonl"))
	seen := map[string]bool{}
	for _, l := range jsonLines(t, filepath.Join(out, ds, "tokenized.jsonl")) {
		id := idOfLine(t, l)
		var in, mask []int
		json.Unmarshal(l["input_ids"], &in)
		json.Unmarshal(l["loss_mask"], &mask)
		want, ok := kept[id]
		switch {
		case seen[id]:
			t.Errorf("%s: %s has two records", ds, id)
		case !ok:
			t.Errorf("%s: %s has a record, but the ids format excludes it", ds, id)
		case len(in) != len(mask) || len(in) <= len(want) || !slices.Equal(in[len(in)-len(want):], want):
			t.Errorf("%s: %s: input_ids %v (mask %d) do not end with the answer's output_ids %v", ds, id, in, len(mask), want)
		}
		seen[id] = true
	}
	if len(seen) != len(kept) {
		t.Errorf("%s: %d ids records in %s; %d answers are kept", ds, len(seen), out, len(kept))
	}
	answered := len(jsonLines(t, filepath.Join(answers, ds, "raw_responses.jsonl")))
	if n := len(jsonLines(t, filepath.Join(out, ds, "excluded.jsonl"))); n != answered-len(kept) {
		t.Errorf("%s: %d exclusions; want %d", ds, n, answered-len(kept))
	}
	return len(seen)
}

// snapshot returns the bytes of every file under dir, by relative path.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	filepath.WalkDir(dir, func(path string, e os.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			b, _ := os.ReadFile(path)
			rel, _ := filepath.Rel(dir, path)
			files[rel] = string(b)
		}
		return nil
	})
	return files
}

// TestExportSecondFormatByTheRecommendedCommand: after `gen --server sim
// --export conversations data`, `export --format ids data` is refused
// (tokenized.jsonl beside the answers holds conversations records), and
// the command the refusal recommends, run exactly as written, writes one
// ids record per kept answer into its own folder, without touching the
// conversations records; run again it has nothing to do and says where
// the records are. (Before, the recommended command indexed the
// conversations records as its own: "nothing to do", empty files.)
func TestExportSecondFormatByTheRecommendedCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	work, datasets := placeData(t)
	if code, out := runIn(t, bin, work, "gen", "--server", "sim", "--export", "conversations", "data"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	data := filepath.Join(work, "data")
	before := snapshot(t, data)
	code, refusal := runIn(t, bin, work, "export", "--format", "ids", "data")
	if code != 1 || !strings.Contains(refusal, "holds conversations records") {
		t.Fatalf("export --format ids: exit %d; want a refusal\n%s", code, refusal)
	}
	if after := snapshot(t, data); !maps(before, after) {
		t.Errorf("the refused export changed files under data")
	}
	cmds := recommended(t, refusal)
	if len(cmds) != 1 {
		t.Fatalf("want one recommended command:\n%s", refusal)
	}
	code, out := runIn(t, bin, work, cmds[0]...)
	if code != 0 {
		t.Fatalf("the recommended command %q: exit %d\n%s", cmds[0], code, out)
	}
	dir := filepath.Join(work, argAfter(t, cmds[0], "--out"))
	records := 0
	for _, ds := range datasets {
		records += checkIDsRecords(t, data, dir, ds)
	}
	if records == 0 {
		t.Fatalf("no ids records\n%s", out)
	}
	if after := snapshot(t, data); !maps(before, after) {
		t.Errorf("the recommended command changed files under data")
	}
	code, out = runIn(t, bin, work, cmds[0]...)
	if code != 0 || !strings.Contains(out, "nothing to do: every answer of chat has a record or an exclusion in "+filepath.Join(argAfter(t, cmds[0], "--out"), "chat")+" (") {
		t.Errorf("the recommended command again: exit %d\n%s", code, out)
	}
}

// maps reports whether two snapshots are equal.
func maps(a, b map[string]string) bool {
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

// argAfter returns the argument after flag in args.
func argAfter(t *testing.T, args []string, flag string) string {
	t.Helper()
	i := slices.Index(args, flag)
	if i < 0 || i+1 == len(args) {
		t.Fatalf("%q has no %s", args, flag)
	}
	return args[i+1]
}

// TestExportOutWithTheSameIndex: the index holds each answer's one record,
// so after `gen --export conversations data` (records beside the answers)
// `export --out train data` with the same index is refused before
// anything is written, saying where the records are and how many; each
// command it recommends works as written: the first writes train's own
// records (the same as those beside the answers) with train's own index,
// the second completes the records where they are. (Before, the export
// said "nothing to do" and left train's files empty.)
func TestExportOutWithTheSameIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	work, datasets := placeData(t)
	if code, out := runIn(t, bin, work, "gen", "--server", "sim", "--export", "conversations", "data"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	code, refusal := runIn(t, bin, work, "export", "--out", "train", "data")
	if code != 1 {
		t.Fatalf("export --out train with the same index: exit %d; want a refusal\n%s", code, refusal)
	}
	for _, ds := range datasets {
		records := len(jsonLines(t, filepath.Join(work, "data", ds, "tokenized.jsonl")))
		exclusions := len(jsonLines(t, filepath.Join(work, "data", ds, "excluded.jsonl")))
		want := fmt.Sprintf("%s: the index gendex.db holds its records and exclusions in %s (%d records, %d exclusions), not in %s",
			ds, filepath.Join("data", ds), records, exclusions, filepath.Join("train", ds))
		if !strings.Contains(refusal, want) {
			t.Errorf("the refusal does not say %q:\n%s", want, refusal)
		}
	}
	if _, err := os.Stat(filepath.Join(work, "train")); !os.IsNotExist(err) {
		t.Errorf("the refused export made train: %v", err)
	}
	cmds := recommended(t, refusal)
	if len(cmds) != 2 {
		t.Fatalf("want two recommended commands:\n%s", refusal)
	}
	code, out := runIn(t, bin, work, cmds[0]...)
	if code != 0 || argAfter(t, cmds[0], "--out") != "train" {
		t.Fatalf("the first recommended command %q: exit %d\n%s", cmds[0], code, out)
	}
	for _, ds := range datasets {
		sameExports(t, filepath.Join(work, "data", ds), filepath.Join(work, "train", ds))
	}
	if n := len(jsonLines(t, filepath.Join(work, "train", "chat", "tokenized.jsonl"))); n == 0 {
		t.Errorf("train/chat holds no records\n%s", out)
	}
	// The second adds to the records beside the answers: an answer that
	// has none yet gets one there.
	raw := filepath.Join(work, "data", "chat", "raw_responses.jsonl")
	lines := jsonLines(t, raw)
	extra := lines[0]
	extra["id"] = json.RawMessage(`"chat-extra"`)
	extra["finish_reason"] = json.RawMessage(`"stop"`)
	line, _ := json.Marshal(extra)
	f, _ := os.OpenFile(raw, os.O_APPEND|os.O_WRONLY, 0)
	f.Write(append(line, '\n'))
	f.Close()
	p := filepath.Join(work, "data", "chat", "prompts.jsonl")
	pl, _ := os.ReadFile(p)
	first, _, _ := bytes.Cut(pl, []byte("\n"))
	os.WriteFile(p, append(pl, append(bytes.Replace(first, []byte(`"chat-00000"`), []byte(`"chat-extra"`), 1), '\n')...), 0o644)
	code, out = runIn(t, bin, work, cmds[1]...)
	if code != 0 || slices.Contains(cmds[1], "--out") || !strings.Contains(out, "chat: 1 answers: 1 conversations records") {
		t.Fatalf("the second recommended command %q: exit %d\n%s", cmds[1], code, out)
	}
	for _, ds := range datasets {
		exportedOnce(t, filepath.Join(work, "data", ds))
	}
}

// TestExportBesideAfterOut: records written into --out A make the index's
// records A's: an export beside the answers with the same index is
// refused, and both commands it recommends work as written (beside the
// answers with an index of their own; into A, where there is nothing
// left to do).
func TestExportBesideAfterOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	work, datasets := placeData(t)
	if code, out := runIn(t, bin, work, "gen", "--server", "sim", "data"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	if code, out := runIn(t, bin, work, "export", "--out", "A", "data"); code != 0 {
		t.Fatalf("export --out A: exit %d\n%s", code, out)
	}
	code, refusal := runIn(t, bin, work, "export", "data")
	if code != 1 || !strings.Contains(refusal, "in "+filepath.Join("A", "chat")+" (") {
		t.Fatalf("export beside the answers after --out A: exit %d; want a refusal naming A\n%s", code, refusal)
	}
	for _, ds := range datasets {
		if _, err := os.Stat(filepath.Join(work, "data", ds, "tokenized.jsonl")); !os.IsNotExist(err) {
			t.Errorf("%s: the refused export made tokenized.jsonl: %v", ds, err)
		}
	}
	cmds := recommended(t, refusal)
	if len(cmds) != 2 {
		t.Fatalf("want two recommended commands:\n%s", refusal)
	}
	if code, out := runIn(t, bin, work, cmds[0]...); code != 0 || slices.Contains(cmds[0], "--out") {
		t.Fatalf("the first recommended command %q: exit %d\n%s", cmds[0], code, out)
	}
	for _, ds := range datasets {
		exportedOnce(t, filepath.Join(work, "data", ds))
		sameExports(t, filepath.Join(work, "data", ds), filepath.Join(work, "A", ds))
	}
	code, out := runIn(t, bin, work, cmds[1]...)
	if code != 0 || argAfter(t, cmds[1], "--out") != "A" || !strings.Contains(out, "nothing to do: every answer of sg has a record or an exclusion in "+filepath.Join("A", "sg")+" (") {
		t.Errorf("the second recommended command %q: exit %d\n%s", cmds[1], code, out)
	}
}

// TestExportNothingToDoSaysWhere: an export with nothing to do names the
// folder of the records and exclusions, and counts them.
func TestExportNothingToDoSaysWhere(t *testing.T) {
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 5})
	root, out := t.TempDir(), t.TempDir()
	writeChatPrompts(t, filepath.Join(root, "chat"), "chat", 30)
	db := filepath.Join(t.TempDir(), "g.db")
	mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", url, root)
	mustGendex(t, testEnv(nil), "--db", db, "export", "--format", "ids", "--max-len", "60", "--out", out, root)
	dir := filepath.Join(out, "chat")
	records := len(jsonLines(t, filepath.Join(dir, "tokenized.jsonl")))
	exclusions := len(jsonLines(t, filepath.Join(dir, "excluded.jsonl")))
	if records == 0 || exclusions == 0 {
		t.Fatalf("%d records, %d exclusions: the test wants both", records, exclusions)
	}
	r := mustGendex(t, testEnv(nil), "--db", db, "export", "--format", "ids", "--max-len", "60", "--out", out, root)
	want := fmt.Sprintf("export: nothing to do: every answer of chat has a record or an exclusion in %s (%d records, %d exclusions)", dir, records, exclusions)
	if !strings.Contains(r.stderr, want) {
		t.Errorf("export again: want %q\n%s", want, r.stderr)
	}
}

// TestExportServerSim: `export --server sim` tokenizes with the built-in
// simulator, as `gen --server sim` answered: the ids records of text
// prompts are the simulator's ids of the text and the answer's output
// ids. A --server that is no URL is a usage error before anything runs.
func TestExportServerSim(t *testing.T) {
	t.Parallel()
	url := simURL(t, sim.Config{Seed: 6})
	root, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "text")
	os.MkdirAll(dir, 0o755)
	texts := map[string]string{}
	var b strings.Builder
	for i := range 20 {
		id, text := fmt.Sprintf("t-%02d", i), fmt.Sprintf("tell me about %d", i)
		texts[id] = text
		fmt.Fprintf(&b, `{"id":%q,"text":%q}`+"\n", id, text)
	}
	writePrompts(t, dir, b.String())
	db := filepath.Join(t.TempDir(), "g.db")
	mustGendex(t, testEnv(nil), "--db", db, "gen", "--server", url, root)
	if r := gendex(t, testEnv(nil), "--db", db, "export", "--format", "ids", "--out", out, root); r.code != 1 || !strings.Contains(r.stderr, "need their prompts tokenized") {
		t.Fatalf("export --format ids without a server: want exit 1, answers left\n%s", r)
	}
	r := mustGendex(t, testEnv(nil), "--db", db, "export", "--format", "ids", "--server", "sim", "--out", out, root)
	if !strings.Contains(r.stderr, "--server sim") {
		t.Errorf("export --server sim does not say what it started:\n%s", r.stderr)
	}
	kept := keptIDs(t, filepath.Join(dir, "raw_responses.jsonl"))
	var ids []string
	for _, l := range jsonLines(t, filepath.Join(out, "text", "tokenized.jsonl")) {
		id := idOfLine(t, l)
		ids = append(ids, id)
		var in []int
		json.Unmarshal(l["input_ids"], &in)
		if want := append(sim.Encode(texts[id], true), kept[id]...); !slices.Equal(in, want) {
			t.Errorf("%s: input_ids %v; want %v", id, in, want)
		}
	}
	sort.Strings(ids)
	if len(ids) != len(kept) || len(ids) == 0 {
		t.Errorf("%d records; %d answers kept", len(ids), len(kept))
	}
	for _, bad := range []string{"gpu1:30000", "localhost", "ftp://x"} {
		if r := gendex(t, testEnv(nil), "--db", db, "export", "--format", "ids", "--server", bad, root); r.code != 2 || !strings.Contains(r.stderr, "want a server URL") {
			t.Errorf("--server %s: want a usage error\n%s", bad, r)
		}
	}
}

// TestGenRefusalCommandWritesTheOtherFormat: gen --export ids after gen
// --export conversations is refused (a file holds one format), and the
// command its refusal gives, its placeholders filled in, writes one ids
// record per kept answer into DIR. (Before, it said "nothing to do" and
// left DIR's files empty: the conversations records beside the answers
// were indexed as its own.)
func TestGenRefusalCommandWritesTheOtherFormat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	work, datasets := placeData(t)
	if code, out := runIn(t, bin, work, "gen", "--server", "sim", "--export", "conversations", "data"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	code, refusal := runIn(t, bin, work, "gen", "--server", "sim", "--export", "ids", "data")
	_, cmd, found := strings.Cut(refusal, "(gendex ")
	cmd, _, closed := strings.Cut(cmd, ")")
	if code != 1 || !found || !closed {
		t.Fatalf("gen --export ids after conversations: exit %d; want a refusal giving a command\n%s", code, refusal)
	}
	cmd = strings.NewReplacer("ROOT|DATASET_DIR...", "data", "...", "data", "OTHER.db", "other.db").Replace(cmd)
	cmd = strings.ReplaceAll(cmd, "DIR", "ids-out")
	args := shellWords(t, cmd)
	if code, out := runIn(t, bin, work, args...); code != 0 {
		t.Fatalf("gendex %s: exit %d\n%s", cmd, code, out)
	}
	records := 0
	for _, ds := range datasets {
		records += checkIDsRecords(t, filepath.Join(work, "data"), filepath.Join(work, "ids-out"), ds)
	}
	if records == 0 {
		t.Errorf("gendex %s wrote no ids records", cmd)
	}
}

// TestGenExportRecordsElsewhereSaysWhatToRun: gen --export after an export
// --out elsewhere with the same index is refused (the index's records are
// in the other folder), saying what to run; both commands work as
// written: export keeps making the records where they are, and gen with
// an index of its own makes them beside the answers.
func TestGenExportRecordsElsewhereSaysWhatToRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	work, datasets := placeData(t)
	genArgs := []string{"gen", "--server", "sim", "--out", "answers", "--max-len", "4096", "--export", "conversations", "data"}
	if code, out := runIn(t, bin, work, "gen", "--server", "sim", "--out", "answers", "data"); code != 0 {
		t.Fatalf("gen: exit %d\n%s", code, out)
	}
	if code, out := runIn(t, bin, work, "export", "--format", "conversations", "--max-len", "4096", "--out", "records", "answers"); code != 0 {
		t.Fatalf("export --out records: exit %d\n%s", code, out)
	}
	code, refusal := runIn(t, bin, work, genArgs...)
	cmds := recommended(t, refusal)
	if code != 1 || len(cmds) != 2 || !strings.Contains(refusal, "run gen without --export") {
		t.Fatalf("gen --export after export --out: exit %d, %d commands; want 1 and two commands\n%s", code, len(cmds), refusal)
	}
	// Keep them where they are: the records are all there already.
	if code, out := runIn(t, bin, work, cmds[0]...); code != 0 || !strings.Contains(out, "nothing to do") {
		t.Errorf("gendex %q: exit %d; want 0, nothing to do\n%s", cmds[0], code, out)
	}
	if !slices.Contains(cmds[0], "--max-len=4096") {
		t.Errorf("the export command drops gen's --max-len: %q", cmds[0])
	}
	// Or an index of its own: gen's own arguments in place of "...".
	if !slices.Equal(cmds[1], []string{"--db", "OTHER.db", "gen", "..."}) {
		t.Fatalf("the second command is %q", cmds[1])
	}
	if code, out := runIn(t, bin, work, append([]string{"--db", "other.db"}, genArgs...)...); code != 0 {
		t.Fatalf("gen with an index of its own: exit %d\n%s", code, out)
	}
	for _, ds := range datasets {
		for _, dir := range []string{"answers", "records"} {
			if _, err := os.Stat(filepath.Join(work, dir, ds, "tokenized.jsonl")); err != nil {
				t.Errorf("%s: no records in %s: %v", ds, dir, err)
			}
		}
	}
}
