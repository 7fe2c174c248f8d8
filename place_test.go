package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests of "what counts as answered" (README): a dataset's answers
// count only in their own folder, and the simulator's never stand in for
// a real server's. A "real server" here is `gendex sim --unmarked`: it
// answers as the simulator does but says nothing of being one, as SGLang
// says nothing.

// answers reads the answer lines under dir/<dataset>/raw_responses.jsonl of
// the four demo datasets: how many, and how many the simulator marked.
func (p *placeRun) answers(dir string) (n, simulated int) {
	p.t.Helper()
	for _, ds := range []string{"B1_ids", "B2_text", "B3_chat", "B4_sharegpt"} {
		f, err := os.Open(filepath.Join(p.dir, dir, ds, "raw_responses.jsonl"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			p.t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line struct {
				Model     string `json:"model"`
				Simulated bool   `json:"simulated"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				p.t.Fatal(err)
			}
			if line.Model == "" {
				p.t.Errorf("%s/%s: an answer line without its model: %s", dir, ds, sc.Bytes())
			}
			n++
			if line.Simulated {
				simulated++
			}
		}
		f.Close()
	}
	return n, simulated
}

func (p *placeRun) wantRaw(db string, want float64) {
	p.t.Helper()
	for ds, row := range p.progress(db) {
		if row["raw"] != want || row["prompts"] != 50.0 {
			p.t.Errorf("%s: progress %v; want %v answers of 50 prompts", ds, row, want)
		}
	}
}

// TestDryRunThenRealRun: README's dry run (--out) and then the real run
// beside the prompts, one index: each makes its own 200 answers, and the
// index then counts the real ones.
func TestDryRunThenRealRun(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	p.mustRun("gen", "--server", "sim", "--out", "dry", "demo")
	if n, sim := p.answers("dry"); n != 200 || sim != 200 {
		t.Fatalf("dry run: %d answers, %d marked simulated; want 200, 200", n, sim)
	}
	real := startSimProcess(t, p.bin, "--unmarked")
	errOut := p.mustRun("gen", "--server", real, "demo")
	if n, sim := p.answers("demo"); n != 200 || sim != 0 {
		t.Fatalf("real run: %d answers, %d simulated; want 200, 0\n%s", n, sim, errOut)
	}
	if !strings.Contains(errOut, "forgets the simulator's 50 answers in "+filepath.Join(p.dir, "dry", "B1_ids")) {
		t.Errorf("the real run does not say that the dry run's answers stop counting:\n%s", errOut)
	}
	p.wantRaw("gendex.db", 50)
	if code, errOut := p.run("gen", "--server", real, "demo"); code != 0 || !strings.Contains(errOut, "nothing to do") ||
		!strings.Contains(errOut, "50 answers in "+filepath.Join(p.dir, "demo", "B1_ids")+" (model sim-model)") {
		t.Errorf("a second real run: exit %d; want nothing to do, saying where the answers are and who made them\n%s", code, errOut)
	}
}

// TestSimulatorBesidePromptsThenRealServer: the simulator's answers
// beside the prompts never count for a real server's run: gen stops
// before any request and says to use --out; with --out it makes its own.
func TestSimulatorBesidePromptsThenRealServer(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	p.mustRun("gen", "--server", "sim", "demo")
	real := startSimProcess(t, p.bin, "--unmarked")
	code, errOut := p.run("gen", "--server", real, "demo")
	if code != 5 || !strings.Contains(errOut, "made by the simulator") || !strings.Contains(errOut, "--out DIR") {
		t.Fatalf("real run over the simulator's answers: exit %d; want 5 (refused), naming the simulator's answers and --out\n%s", code, errOut)
	}
	if n, sim := p.answers("demo"); n != 200 || sim != 200 {
		t.Fatalf("the refused run wrote: %d answers, %d simulated; want the dry run's 200 alone", n, sim)
	}
	p.mustRun("gen", "--server", real, "--out", "real", "demo") // what the refusal says
	if n, sim := p.answers("real"); n != 200 || sim != 0 {
		t.Fatalf("real run with --out: %d answers, %d simulated; want 200 real", n, sim)
	}
	p.wantRaw("gendex.db", 50)
}

// TestAnotherOutIsRefused: a second --out for prompts whose real answers
// the index counts elsewhere is refused, naming both folders; both ways
// out it gives work as written.
func TestAnotherOutIsRefused(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	real := startSimProcess(t, p.bin, "--unmarked")
	p.mustRun("gen", "--server", real, "--out", "o1", "demo")
	code, errOut := p.run("gen", "--server", real, "--out", "o2", "--temperature", "0.9", "demo")
	if code != 1 || !strings.Contains(errOut, filepath.Join(p.dir, "o1", "B1_ids")) || !strings.Contains(errOut, filepath.Join(p.dir, "o2", "B1_ids")) {
		t.Fatalf("another --out: exit %d; want 1, naming both folders\n%s", code, errOut)
	}
	if n, _ := p.answers("o2"); n != 0 {
		t.Fatalf("the refused run wrote %d answers", n)
	}
	// Way out 1, as the message gives it: an index of its own.
	if !strings.Contains(errOut, "gendex --db OTHER.db gen ...") {
		t.Fatalf("the refusal does not give --db:\n%s", errOut)
	}
	p.mustRun("--db", "OTHER.db", "gen", "--server", real, "--out", "o2", "--temperature", "0.9", "demo")
	if n, _ := p.answers("o2"); n != 200 {
		t.Fatalf("with --db OTHER.db: %d answers in o2, want 200", n)
	}
	p.wantRaw("OTHER.db", 50)
	// Way out 2, as written: drop, then run again.
	i := strings.Index(errOut, "gendex --db gendex.db drop ")
	if i < 0 {
		t.Fatalf("the refusal does not give drop:\n%s", errOut)
	}
	drop := strings.Fields(strings.SplitN(errOut[i:], " (", 2)[0])[1:]
	p.mustRun(drop...)
	p.mustRun("gen", "--server", real, "--out", "o3", "demo")
	if n, _ := p.answers("o3"); n != 200 {
		t.Fatalf("after drop: %d answers in o3, want 200", n)
	}
	p.wantRaw("gendex.db", 50)
}

// TestSameNamedRootsNeverMerge: two roots that both hold B1_ids (the same
// ids): the second is refused, naming both folders, and nothing of it is
// indexed.
func TestSameNamedRootsNeverMerge(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	copyPrompts(t, filepath.Join("testdata", "demo", "B1_ids"), filepath.Join(p.dir, "b", "B1_ids"))
	real := startSimProcess(t, p.bin, "--unmarked")
	p.mustRun("gen", "--server", real, filepath.Join("demo", "B1_ids"))
	code, errOut := p.run("gen", "--server", real, "b")
	if code != 1 || !strings.Contains(errOut, filepath.Join(p.dir, "demo", "B1_ids")) || !strings.Contains(errOut, filepath.Join(p.dir, "b", "B1_ids")) {
		t.Fatalf("second root: exit %d; want 1 naming both folders\n%s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(p.dir, "b", "B1_ids", "raw_responses.jsonl")); err == nil {
		t.Error("the refused run created its answer file")
	}
	rows := p.progress("gendex.db")
	if len(rows) != 1 || rows["B1_ids"]["prompts"] != 50.0 || rows["B1_ids"]["raw"] != 50.0 || rows["B1_ids"]["skipped"] != 0.0 {
		t.Errorf("progress after the refusal: %v", rows)
	}
}

// TestUpgradeKeepsCounts: an index written by an earlier gendex reads
// with the same counts, before and after a writer opens it. Each fixture
// in testdata/upgrade is what that commit wrote over the demo from the
// folder given below: NAME.db.gz the index, NAME.files.tar.gz the folder's
// files (answers/, prompts/), NAME.QUESTION.json what that commit's query
// answered. bb39388 wrote answers that do not say who made them
// (gen --server sim --out answers prompts); a5ad860 is the main of
// issues 26 and 27 (the same, with --export conversations), bab0d83 the
// main before issue 43 (the same again: answers without a provenance,
// which check says are unknown). The files are
// unpacked in the test's own folder and the index told with gendex
// relocate (from the folder the fixture was made in, which the index
// names and no test reads), so nothing outside the test's folders is read. Then a run
// from another folder is refused (the old lines do not say who made them),
// and a run over the same folders has nothing to do.
func TestUpgradeKeepsCounts(t *testing.T) {
	t.Parallel()
	for _, fx := range []struct {
		name, root string
		unmarked   bool // the answers do not say the simulator made them
	}{
		{"bb39388", "/tmp/gendex-v4-run", true},
		{"a5ad860", "/tmp/gendex-a5-run", false},
		{"bab0d83", "/tmp/gendex-bab-run", false},
	} {
		t.Run(fx.name, func(t *testing.T) { testUpgrade(t, fx.name, fx.root, fx.unmarked) })
	}
}

func testUpgrade(t *testing.T, name, oldRoot string, unmarked bool) {
	p := newPlaceRun(t)
	fixture := func(ext string) string { return filepath.Join("testdata", "upgrade", name+ext) }
	gz, err := os.ReadFile(fixture(".db.gz"))
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	db, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.dir, "old.db"), db, 0o600); err != nil {
		t.Fatal(err)
	}
	newRoot := filepath.Join(p.dir, "run")
	untar(t, fixture(".files.tar.gz"), newRoot)
	// check compares every question with the fixture's answer, whose
	// files' paths say $ROOT for the folder (relocated: after relocate, at
	// newRoot, with every pending_bytes known; before it, at oldRoot, the
	// path the index names and no file is at, so paths and pending_bytes
	// are not compared).
	check := func(when string, relocated bool) {
		t.Helper()
		for _, q := range []string{"progress", "tokens", "finish", "files"} {
			want := readJSONRows(t, fixture("."+q+".json"))
			code, out, stderr := runGendex(t, p.bin, p.dir, "--db", "old.db", "query", q, "--format", "json")
			if code != 0 {
				t.Fatalf("%s: query %s: exit %d\n%s", when, q, code, stderr)
			}
			var got []map[string]any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%s: query %s: %d rows, want %d", when, q, len(got), len(want))
			}
			for i := range want {
				for k, v := range want[i] { // new keys may be added; none may change
					if q == "files" && k == "path" {
						if relocated {
							v = strings.Replace(v.(string), "$ROOT", newRoot, 1)
						} else {
							continue
						}
					}
					if q == "files" && k == "pending_bytes" && !relocated {
						continue // the files are not at the paths the index names
					}
					if g, ok := got[i][k]; !ok || !jsonEqual(g, v) {
						t.Errorf("%s: query %s row %d: %s = %v, want %v", when, q, i, k, g, v)
					}
				}
			}
		}
	}
	check("read-only", false)
	errOut := p.mustRun("--db", "old.db", "relocate", oldRoot, newRoot)
	if !strings.Contains(errOut, "relocated 8 files") && !strings.Contains(errOut, "relocated 16 files") {
		t.Errorf("relocate: %s", errOut)
	}
	check("relocated", true)
	_, reasons, out := p.checkJSON("--db", "old.db")
	for _, ds := range []string{"B1_ids", "B2_text", "B3_chat", "B4_sharegpt"} {
		if reasons[ds]["made_by"] != 50 || !strings.Contains(out, "(provenance unknown): 50 answer lines") {
			t.Errorf("check of an old index: %s's answers want made_by 50, provenance unknown\n%s", ds, out)
		}
	}
	if unmarked { // (the simulator's known answers elsewhere are forgotten instead)
		code, errOut := p.run("--db", "old.db", "gen", "--server", "sim", "--out", "new", "demo")
		if code != 1 || !strings.Contains(errOut, filepath.Join(newRoot, "answers", "B1_ids")) || !strings.Contains(errOut, "model not recorded") {
			t.Errorf("a run from other folders over an old index: exit %d; want 1, naming the old folders\n%s", code, errOut)
		}
		check("after a writer opened it", true)
	}
	args := []string{"--db", "old.db", "gen", "--server", "sim", "--out", filepath.Join(newRoot, "answers")}
	if !unmarked {
		args = append(args, "--export", "conversations")
	}
	errOut = p.mustRun(append(args, filepath.Join(newRoot, "prompts"))...)
	if !strings.Contains(errOut, "nothing to do") {
		t.Errorf("a run over the relocated folders: want nothing to do\n%s", errOut)
	}
	check("after a run over the same folders", true)
}

// untar unpacks the gzipped tar file at path into dir (regular files and
// folders only).
func untar(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
					err = os.WriteFile(dst, b, 0o644)
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func readJSONRows(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// TestIngestSameNamedFoldersNeverMerge: ingest of a second folder named
// like a dataset the index holds (or two such folders at once) is refused,
// naming both folders; --dataset, the way out it gives, indexes it apart.
func TestIngestSameNamedFoldersNeverMerge(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	copyPrompts(t, filepath.Join("testdata", "demo", "B1_ids"), filepath.Join(p.dir, "a", "B1_ids"))
	copyPrompts(t, filepath.Join("testdata", "demo", "B1_ids"), filepath.Join(p.dir, "b", "B1_ids"))
	p.mustRun("ingest", "a")
	for _, args := range [][]string{{"ingest", "b"}, {"--db", "two.db", "ingest", "a", "b"}} {
		code, errOut := p.run(args...)
		if code != 1 || strings.Count(errOut, filepath.Join(p.dir, "a", "B1_ids")) != 1 || !strings.Contains(errOut, filepath.Join(p.dir, "b", "B1_ids")) ||
			!strings.Contains(errOut, "gendex ingest --dataset NAME FOLDER") {
			t.Errorf("gendex %q: exit %d; want 1, naming both folders once and --dataset\n%s", args, code, errOut)
		}
	}
	p.mustRun("ingest", "--dataset", "B1_b", filepath.Join("b", "B1_ids"))
	rows := p.progress("gendex.db")
	if len(rows) != 2 || rows["B1_ids"]["prompts"] != 50.0 || rows["B1_b"]["prompts"] != 50.0 {
		t.Errorf("progress: %v", rows)
	}
}

// TestRelocateChecksEveryFile: relocate moves a run's files in the index
// only when every one is at its new path with at least the bytes indexed
// and the same bytes at both ends of them (a copy annotated in place past
// its first 4 KiB is not the file read); else it names the file and moves
// nothing.
// After it, a run over the new folder asks nothing again.
func TestRelocateChecksEveryFile(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	real := startSimProcess(t, p.bin, "--unmarked")
	p.mustRun("gen", "--server", real, "--out", "a", "demo")
	copyTree(t, filepath.Join(p.dir, "a"), filepath.Join(p.dir, "b"))
	copyTree(t, filepath.Join(p.dir, "demo"), filepath.Join(p.dir, "b-demo"))

	bad := filepath.Join(p.dir, "b", "B3_chat", "raw_responses.jsonl")
	good, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		why  string
		data []byte
		want string
	}{
		{"first bytes changed", append([]byte("X"), good[1:]...), "its first"},
		{"shorter", good[:len(good)/2], "the index read"},
		{"rewritten in place past its first 4 KiB", annotatedAfter(good, 4096), "rewritten in place"},
		{"gone", nil, "no such file"},
	} {
		if c.data == nil {
			os.Remove(bad)
		} else if err := os.WriteFile(bad, c.data, 0o644); err != nil {
			t.Fatal(err)
		}
		code, errOut := p.run("relocate", "a", "b")
		if code != 1 || !strings.Contains(errOut, bad) || !strings.Contains(errOut, c.want) || !strings.Contains(errOut, "nothing was moved") {
			t.Errorf("%s: exit %d, want 1 naming %s (%q)\n%s", c.why, code, bad, c.want, errOut)
		}
		p.wantRaw("gendex.db", 50)
		if code, _ := p.run("relocate", "b", "a"); code != 3 {
			t.Errorf("%s: a relocate from a folder the index holds nothing under exited %d, want 3 (not in the index)", c.why, code)
		}
	}
	if err := os.WriteFile(bad, good, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, errOut := p.run("relocate", "a", "demo"); code != 1 || !strings.Contains(errOut, "nothing was moved") {
		t.Errorf("relocate onto a folder without the files: exit %d\n%s", code, errOut)
	}
	errOut := p.mustRun("relocate", "a", "b")
	if !strings.Contains(errOut, "relocated 4 files (200 records)") {
		t.Errorf("relocate: %s", errOut)
	}
	if err := os.RemoveAll(filepath.Join(p.dir, "a")); err != nil {
		t.Fatal(err)
	}
	errOut = p.mustRun("gen", "--server", real, "--out", "b", "demo")
	if !strings.Contains(errOut, "nothing to do") {
		t.Errorf("a run over the relocated answers asked again:\n%s", errOut)
	}
	p.wantRaw("gendex.db", 50)
}

// annotatedAfter is data with a field added to each line that starts past
// its first n bytes, as a tool that annotates a file in place leaves it.
func annotatedAfter(data []byte, n int) []byte {
	var out []byte
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		if len(out) >= n {
			l = bytes.Replace(l, []byte("{"), []byte(`{"note":1,`), 1)
		}
		out = append(out, l...)
	}
	return out
}

// TestOneFolderThreeSpellings: a run started through a symlink and resumed
// through the real path, a folder moved (mv) after its run, and one folder
// given twice (its root and its own path) are each one place: nothing is
// refused, nothing asked again, every count stays. Before, the first two
// were refused as "another folder" (the second naming the folder that was
// gone) and the third as "two datasets are named B1_ids".
func TestOneFolderThreeSpellings(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	real := startSimProcess(t, p.bin, "--unmarked")
	if err := os.Symlink(p.dir, filepath.Join(p.dir, "link")); err != nil {
		t.Fatal(err)
	}
	p.mustRun("gen", "--server", real, "--max-new-tokens", "16", filepath.Join("link", "demo", "B1_ids"))
	errOut := p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "demo")
	if !strings.Contains(errOut, "150 prompts to answer") {
		t.Errorf("resumed through the real path: want the 150 prompts not answered through the link asked, no more\n%s", errOut)
	}
	p.wantRaw("gendex.db", 50)
	if n, _ := p.answers("demo"); n != 200 {
		t.Errorf("%d answer lines, want 200", n)
	}

	if err := os.Rename(filepath.Join(p.dir, "demo"), filepath.Join(p.dir, "moved")); err != nil {
		t.Fatal(err)
	}
	errOut = p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "moved")
	if !strings.Contains(errOut, "nothing to do") || !strings.Contains(errOut, "moved") {
		t.Errorf("a run over the moved folder: want its answers found there, nothing to do\n%s", errOut)
	}
	p.wantRaw("gendex.db", 50)

	errOut = p.mustRun("gen", "--server", real, "--max-new-tokens", "16", "moved", filepath.Join("moved", "B1_ids"), filepath.Join("link", "moved", "B2_text"))
	if !strings.Contains(errOut, "nothing to do") {
		t.Errorf("one folder given three times: want one dataset, nothing to do\n%s", errOut)
	}
	p.wantRaw("gendex.db", 50)
	if n, _ := p.answers("moved"); n != 200 {
		t.Errorf("%d answer lines, want 200", n)
	}
}

// TestDryRunRecordsNeverReachTheRealFolder: issue 27's case 1, as a user
// ran it. A dry run with --export, then the real run interrupted at 38 of
// 60 answers, then `gendex export dry`: refused, and the command it gives
// works as written: after it, every count equals the files, no record in
// data/ was made from the simulator's answers, and the next real run
// answers the rest. Before, the refusal gave `gendex --db gendex.db export
// --out data dry`, which wrote the simulator's records into the real
// tokenized.jsonl and made progress say 60 answered where the folder held
// 38.
func TestDryRunRecordsNeverReachTheRealFolder(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	data := filepath.Join(p.dir, "data", "chat_s")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 60 {
		fmt.Fprintf(&b, `{"id":"c%03d","messages":[{"role":"user","content":"tell me about %d"}]}`+"\n", i, i)
	}
	writePrompts(t, data, b.String())
	p.mustRun("gen", "--server", "sim", "--out", "dry", "--export", "conversations", "--max-new-tokens", "16", "data")
	real := startSimProcess(t, p.bin, "--unmarked", "--decode-tps", "40")
	gen := startGendex(t, p.bin, p.dir, "gen", "--server", real, "--export", "conversations", "--max-new-tokens", "16", "--concurrency", "4", "data")
	lines := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(data, name))
		return strings.Count(string(b), "\n")
	}
	waitFor(t, 60*time.Second, "38 real answers", func() bool { return lines("raw_responses.jsonl") >= 38 })
	gen.Interrupt()
	gen.Wait()
	answered := lines("raw_responses.jsonl")
	if answered >= 60 {
		t.Fatalf("the real run was not interrupted: %d answers\n%s", answered, gen.Stderr())
	}
	records := lines("tokenized.jsonl") + lines("excluded.jsonl")
	tokBefore, _ := os.ReadFile(filepath.Join(data, "tokenized.jsonl"))

	code, errOut := p.run("export", "dry")
	if code != 1 || !strings.Contains(errOut, "refused") {
		t.Fatalf("export dry after the real run: exit %d, want a refusal\n%s", code, errOut)
	}
	// Every command it gives, run as written, one after the other (they
	// are ways out, each safe): none may write into the real folder or
	// make a count differ from the files.
	var cmds []string
	for _, l := range strings.Split(errOut, "\n") {
		if l := strings.TrimSpace(l); strings.HasPrefix(l, "gendex ") {
			cmds = append(cmds, l)
		}
	}
	if len(cmds) == 0 {
		t.Fatalf("the refusal gives no command:\n%s", errOut)
	}
	for _, cmdLine := range cmds {
		p.run(strings.Fields(cmdLine)[1:]...) // as written (no quoting needed here); a refusal is fine
		tokAfter, _ := os.ReadFile(filepath.Join(data, "tokenized.jsonl"))
		if !bytes.Equal(tokBefore, tokAfter) || lines("tokenized.jsonl")+lines("excluded.jsonl") != records {
			t.Errorf("%q wrote into the real run's folder: tokenized.jsonl %d -> %d bytes", cmdLine, len(tokBefore), len(tokAfter))
		}
		rows := p.progress("gendex.db")
		if r := rows["chat_s"]; r["raw"] != float64(answered) || r["tokenized"].(float64)+r["excluded"].(float64) != float64(records) {
			t.Errorf("after %q: progress %v; the folder holds %d answers and %d records or exclusions", cmdLine, r, answered, records)
		}
	}
	errOut = p.mustRun("gen", "--server", real, "--export", "conversations", "--max-new-tokens", "16", "data")
	if lines("raw_responses.jsonl") != 60 || lines("tokenized.jsonl")+lines("excluded.jsonl") != 60 {
		t.Errorf("the next real run: %d answers, %d records or exclusions; want 60 each\n%s", lines("raw_responses.jsonl"), lines("tokenized.jsonl")+lines("excluded.jsonl"), errOut)
	}
	if sim := strings.Count(string(mustRead(t, filepath.Join(data, "raw_responses.jsonl"))), `"simulated":true`); sim != 0 {
		t.Errorf("%d simulated answers in the real folder", sim)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDryRunOverDryRunNamesTheRule: a dry run whose dataset's answers
// the index holds from another dry run's folder says the rule that drops
// them (one answer folder counts for a dataset: this run's, named), not
// that "a dry run never stands in for this run", which is one.
func TestDryRunOverDryRunNamesTheRule(t *testing.T) {
	t.Parallel()
	dir := genPrompts(t, 2)
	db := filepath.Join(t.TempDir(), "g.db")
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	env := testEnv(nil)
	mustGendex(t, env, "--db", db, "gen", "--server", "sim", "--out", a, dir)
	r := mustGendex(t, env, "--db", db, "gen", "--server", "sim", "--out", b, dir)
	name := filepath.Base(dir)
	want := "the index counts one answer folder for a dataset, this run's (" + filepath.Join(b, name) + "): it forgets the simulator's 2 answers in " + filepath.Join(a, name)
	if strings.Contains(r.stderr, "never stands in") || !strings.Contains(r.stderr, want) {
		t.Errorf("the second dry run's log does not name the rule:\n%s\nwant %q", r.stderr, want)
	}
}
