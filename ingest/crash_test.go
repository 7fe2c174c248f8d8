package ingest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"gendex/store"
)

// These tests fail one commit at a time while a changed file is forgotten
// and read again, "restart" (close the index, open it again, index the same
// files), and check that the index then equals one built from scratch over
// the final files: a crash at any commit boundary may cost time, never a
// count.

var errInjected = errors.New("injected commit failure")

// crashMtime is the modification time the original files are given.
var crashMtime = time.Unix(1_700_000_000, 0)

// crashFiles is a dataset folder: file name -> lines.
type crashFiles map[string][]string

func (fs crashFiles) write(t *testing.T, dir string) {
	t.Helper()
	for name, lines := range fs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rawLine is a response with its own time (so throughput buckets do not
// depend on when it was indexed) and counts that depend on the id only
// (so which copy of a duplicated id is counted does not change a sum).
// Most carry speculative decoding counts (SGLang's recent names, or its
// earlier ones), some none, so that forgetting a file must keep the spec
// counters exact too.
func rawLine(i int) string {
	spec := ""
	switch c := i % 97; {
	case i%4 == 1 || c < 2:
	case i%3 == 0:
		spec = fmt.Sprintf(`,"spec_verify_ct":%d,"spec_accept_token_num":%d,"spec_draft_token_num":%d`, (c+1)/2, c/3, 3*((c+1)/2))
	default:
		spec = fmt.Sprintf(`,"spec_verify_ct":%d,"spec_accepted_drafts":%d,"spec_proposed_drafts":%d`, (c+2)/3, c/4, 3*((c+2)/3))
	}
	return fmt.Sprintf(`{"id":"id-%04d","meta_info":{"completion_tokens":%d,"prompt_tokens":%d,"finish_reason":{"type":"stop"}%s},"created":%d}`+"\n",
		i, i%97, i%13, spec, 1_700_000_000+i%50)
}

func crashDataset(n int) crashFiles {
	fs := crashFiles{}
	for i := 0; i < n; i++ {
		fs["prompts.jsonl"] = append(fs["prompts.jsonl"], fmt.Sprintf(`{"id":"id-%04d","text":"p"}`+"\n", i))
		switch {
		case i%11 == 0:
			fs["raw_responses.jsonl"] = append(fs["raw_responses.jsonl"], fmt.Sprintf(`{"custom_id":"id-%04d","response":null,"error":{"code":"boom","message":"m"}}`+"\n", i))
		case i%7 == 0:
			fs["raw_responses.jsonl"] = append(fs["raw_responses.jsonl"], fmt.Sprintf(`{"id":"id-%04d","text":"no count","created":%d}`+"\n", i, 1_700_000_000+i%50))
		case i%5 != 4:
			fs["raw_responses.jsonl"] = append(fs["raw_responses.jsonl"], rawLine(i))
		}
		// The second shard repeats every third id of the first (its
		// duplicates make it a sibling) and answers some of its own.
		if i%3 == 0 || i%5 == 4 {
			fs["raw_responses.2.jsonl"] = append(fs["raw_responses.2.jsonl"], rawLine(i))
		}
		if i%4 == 0 {
			fs["errors.jsonl"] = append(fs["errors.jsonl"], fmt.Sprintf(`{"id":"id-%04d","status":400,"error":"x"}`+"\n", i))
		}
		if i%2 == 0 {
			fs["tokenized.jsonl"] = append(fs["tokenized.jsonl"], fmt.Sprintf(`{"id":"id-%04d","input_ids":[1,2]}`+"\n", i))
		}
		// Exclusions, some of tokenized ids, and the turns of conversations
		// (the last turn's answer is in the responses files).
		if i%3 == 1 || i%10 == 0 {
			fs["excluded.jsonl"] = append(fs["excluded.jsonl"], fmt.Sprintf(`{"id":"id-%04d","reason":"length","detail":"line %d"}`+"\n", i, i))
		}
		if i%4 == 3 {
			for turn := 1; turn <= 1+i%3; turn++ {
				fs["turns.jsonl"] = append(fs["turns.jsonl"], fmt.Sprintf(`{"id":"id-%04d","turn":%d,"turns":4,"text":"t","completion_tokens":%d,"spec_verify_ct":%d}`+"\n", i, turn, i%7, 1+i%3))
			}
		}
		// Lines left out, which the skipped counters must follow: an id
		// over the index's key limit, invalid JSON, no id.
		if i%13 == 6 {
			fs["raw_responses.jsonl"] = append(fs["raw_responses.jsonl"], fmt.Sprintf(`{"id":"%0*d","completion_tokens":1}`+"\n", store.MaxIDLen+1, i))
		}
		if i%17 == 3 {
			fs["prompts.jsonl"] = append(fs["prompts.jsonl"], "{not json\n")
		}
		if i%9 == 2 {
			fs["raw_responses.2.jsonl"] = append(fs["raw_responses.2.jsonl"], `{"completion_tokens":1}`+"\n")
		}
	}
	return fs
}

func openAt(t *testing.T, path string, fail func(int) error) *store.DB {
	t.Helper()
	db, err := store.Open(path, store.Options{NoSync: true, FailCommit: fail})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// indexDir indexes every file of dir, in Discover's order, and returns the
// first error.
func indexDir(t *testing.T, ix *Indexer, dir string) error {
	t.Helper()
	srcs, err := Discover(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range srcs {
		if _, err := ix.IndexFile(context.Background(), src); err != nil {
			return err
		}
	}
	return nil
}

// indexSnapshot is everything the index says about a dataset that does not
// depend on file ids or on when it was built: the Summary, the histogram,
// the throughput buckets, the missing ids, every record (but its file id)
// and every file state (but its id).
func indexSnapshot(t *testing.T, db *store.DB, dataset string) string {
	t.Helper()
	var b strings.Builder
	err := db.View(func(v *store.View) error {
		if v.Forgetting() {
			b.WriteString("a removal is pending\n")
		}
		s, err := v.Summary(dataset)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "summary %+v missing_raw=%d missing_tokenized=%d\n", s, s.MissingRaw(), s.MissingTokenized())
		v.Histogram(dataset, func(base int64, counts []int64) {
			for i, n := range counts {
				if n != 0 {
					fmt.Fprintf(&b, "hist %d=%d\n", base+int64(i), n)
				}
			}
		})
		r, tk, u := v.Window(dataset, 0, 1<<40)
		first, _ := v.FirstSecond(dataset)
		fmt.Fprintf(&b, "window %d/%d/%d first=%d\n", r, tk, u, first)
		v.SpecHistogram(dataset, func(base int64, counts []int64) {
			for i, n := range counts {
				if n != 0 {
					fmt.Fprintf(&b, "spechist %d=%d\n", base+int64(i), n)
				}
			}
		})
		for sec := int64(1_700_000_000); sec < 1_700_000_050; sec++ {
			if n, tk, vf := v.SpecWindow(dataset, sec, sec+1); n != 0 {
				fmt.Fprintf(&b, "specsec %d %d/%d/%d\n", sec, n, tk, vf)
			}
		}
		in := map[string]map[store.Stage]bool{}
		for _, st := range store.Stages() {
			var n uint64
			err := v.Each(dataset, st, func(r *store.Record) error {
				x := *r
				x.File = 0
				if !x.OwnTime {
					x.Time = 0
				}
				if _, ok := v.FilePath(r.File); !ok {
					fmt.Fprintf(&b, "record %s %s: file %d unknown\n", st, r.ID, r.File)
				}
				fmt.Fprintf(&b, "%s %+v\n", st, x)
				if in[r.ID] == nil {
					in[r.ID] = map[store.Stage]bool{}
				}
				in[r.ID][st] = true
				n++
				return nil
			})
			if err != nil {
				return err
			}
			if n != s.Stages[st].Records {
				fmt.Fprintf(&b, "stage %s holds %d records, counter says %d\n", st, n, s.Stages[st].Records)
			}
		}
		var o store.Overlap
		for _, m := range in {
			if m[store.Prompts] && (m[store.Raw] || m[store.Errors]) {
				o.Answered++
			}
			if m[store.Errors] && !m[store.Raw] {
				o.ErrorsOpen++
			}
			if m[store.Prompts] && m[store.Errors] && !m[store.Raw] {
				o.Failed++
			}
			if m[store.Raw] && m[store.Tokenized] {
				o.RawTokenized++
			}
			if m[store.Raw] && m[store.Excluded] && !m[store.Tokenized] {
				o.RawExcluded++
			}
			if m[store.Raw] && !m[store.Prompts] {
				o.RawNoPrompt++
			}
		}
		o.NoPromptKnown = true
		if o != s.Overlap {
			fmt.Fprintf(&b, "the records say overlap %+v, counter says %+v\n", o, s.Overlap)
		}
		for _, pair := range [][2]store.Stage{{store.Prompts, store.Raw}, {store.Raw, store.Tokenized}} {
			var miss []string
			in := []store.Stage{pair[1]}
			if pair[1] == store.Raw {
				in = append(in, store.Errors)
			}
			if err := v.Missing(dataset, pair[0], func(id string) error { miss = append(miss, id); return nil }, in...); err != nil {
				return err
			}
			fmt.Fprintf(&b, "missing %s: %v\n", pair[1], miss)
		}
		if err := v.Untokenized(dataset, func(u *store.Untokenized) error {
			fmt.Fprintf(&b, "untokenized %s prompt=%v answered=%v excluded=%v failed=%v turns=%d\n", u.ID, u.Prompt, u.Answered, u.Excluded != nil, u.Failed != nil, u.Turns)
			return nil
		}); err != nil {
			return err
		}
		var files []string
		files2 := map[store.Stage]uint64{}
		skipped := map[store.Stage]uint64{}
		err = v.Files(func(fs store.FileState) error {
			if fs.ID != 0 {
				files2[fs.Stage]++
			}
			skipped[fs.Stage] += fs.Skipped
			fs.ID = 0
			files = append(files, fmt.Sprintf("file %+v", fs))
			return nil
		})
		sort.Strings(files)
		for _, f := range files {
			b.WriteString(f + "\n")
		}
		for _, st := range store.Stages() {
			if files2[st] != s.Stages[st].Files {
				fmt.Fprintf(&b, "stage %s: %d files with an id, counter says %d\n", st, files2[st], s.Stages[st].Files)
			}
			if skipped[st] != s.Stages[st].Skipped {
				fmt.Fprintf(&b, "stage %s: its files skipped %d lines, counter says %d\n", st, skipped[st], s.Stages[st].Skipped)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// scratch is the snapshot of a new index built over dir as it is now.
func scratch(t *testing.T, dir string) string {
	t.Helper()
	db := openAt(t, filepath.Join(t.TempDir(), "scratch.db"), nil)
	defer db.Close()
	if err := indexDir(t, &Indexer{DB: db}, dir); err != nil {
		t.Fatal(err)
	}
	return indexSnapshot(t, db, filepath.Base(dir))
}

// diffLines returns the first lines where a and b differ.
func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for i := 0; i < max(len(al), len(bl)) && len(out) < 8; i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n  got  %s\n  want %s", i+1, x, y))
		}
	}
	return strings.Join(out, "\n")
}

type crashCase struct {
	name   string
	n      int // ids in the dataset
	change func(t *testing.T, dir string, fs crashFiles)
	// restore, when set, changes the files again after the failed run and
	// before the restart.
	restore func(t *testing.T, dir string, fs crashFiles)
	// The indexer's batch sizes.
	readBatch, forgetBatch int
	// restartOnly, when set, is the one file the restarted run indexes
	// (as gen indexes only its own output), instead of the whole folder.
	restartOnly string
}

func truncateTo(t *testing.T, path string, lines []string) {
	t.Helper()
	if err := os.Truncate(path, int64(len(strings.Join(lines, "")))); err != nil {
		t.Fatal(err)
	}
}

var crashCases = []crashCase{
	{name: "truncated", n: 60, readBatch: 16, forgetBatch: 7, change: func(t *testing.T, dir string, fs crashFiles) {
		fs["raw_responses.jsonl"] = fs["raw_responses.jsonl"][:20]
		truncateTo(t, filepath.Join(dir, "raw_responses.jsonl"), fs["raw_responses.jsonl"])
	}},
	{name: "replaced", n: 60, readBatch: 16, forgetBatch: 7, change: func(t *testing.T, dir string, fs crashFiles) {
		lines := fs["raw_responses.jsonl"]
		fs["raw_responses.jsonl"] = append([]string{rawLine(9001), rawLine(9002)}, lines[len(lines)/2:]...)
		tmp := filepath.Join(dir, "new.tmp")
		if err := os.WriteFile(tmp, []byte(strings.Join(fs["raw_responses.jsonl"], "")), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "raw_responses.jsonl")); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "first-bytes-changed", n: 60, readBatch: 16, forgetBatch: 7, change: func(t *testing.T, dir string, fs crashFiles) {
		// Same inode, same length at first, other first bytes, then more.
		lines := fs["raw_responses.jsonl"]
		lines[0] = strings.Replace(lines[0], "id-0000", "id-X000", 1)
		lines = append(lines, rawLine(8000))
		fs["raw_responses.jsonl"] = lines
		f, err := os.OpenFile(filepath.Join(dir, "raw_responses.jsonl"), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteAt([]byte(strings.Join(lines, "")), 0); err != nil {
			t.Fatal(err)
		}
	}},
	{name: "sibling-truncated", n: 60, readBatch: 16, forgetBatch: 7, change: func(t *testing.T, dir string, fs crashFiles) {
		// The shard with duplicates shrinks: the first shard has none, so
		// it is the only file forgotten.
		fs["raw_responses.2.jsonl"] = fs["raw_responses.2.jsonl"][:5]
		truncateTo(t, filepath.Join(dir, "raw_responses.2.jsonl"), fs["raw_responses.2.jsonl"])
	}},
	{name: "sibling-truncated-restart-one-file", n: 60, readBatch: 16, forgetBatch: 7, restartOnly: "raw_responses.2.jsonl",
		// As sibling-truncated, but the next run indexes the changed file
		// only: the files forgotten with it must be read again all the same.
		change: func(t *testing.T, dir string, fs crashFiles) {
			fs["raw_responses.2.jsonl"] = fs["raw_responses.2.jsonl"][:5]
			truncateTo(t, filepath.Join(dir, "raw_responses.2.jsonl"), fs["raw_responses.2.jsonl"])
		}},
	{name: "prompts-truncated-then-restored", n: 40, readBatch: 8, forgetBatch: 5,
		// The prompts file is cut, and after the failed run put back as it
		// was: same inode, size and mtime as the index stored before the
		// cut. It must be indexed in full, not taken as unchanged.
		change: func(t *testing.T, dir string, fs crashFiles) {
			path := filepath.Join(dir, "prompts.jsonl")
			truncateTo(t, path, fs["prompts.jsonl"][:3])
		},
		restore: func(t *testing.T, dir string, fs crashFiles) {
			path := filepath.Join(dir, "prompts.jsonl")
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte(strings.Join(fs["prompts.jsonl"], "")), 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := os.Chtimes(path, crashMtime, crashMtime); err != nil {
				t.Fatal(err)
			}
		}},
	{name: "excluded-truncated", n: 60, readBatch: 16, forgetBatch: 7, change: func(t *testing.T, dir string, fs crashFiles) {
		fs["excluded.jsonl"] = fs["excluded.jsonl"][:4]
		truncateTo(t, filepath.Join(dir, "excluded.jsonl"), fs["excluded.jsonl"])
	}},
	{name: "tokenized-truncated", n: 60, readBatch: 16, forgetBatch: 7, change: func(t *testing.T, dir string, fs crashFiles) {
		fs["tokenized.jsonl"] = fs["tokenized.jsonl"][:3]
		truncateTo(t, filepath.Join(dir, "tokenized.jsonl"), fs["tokenized.jsonl"])
	}},
	{name: "turns-truncated", n: 60, readBatch: 16, forgetBatch: 7, change: func(t *testing.T, dir string, fs crashFiles) {
		fs["turns.jsonl"] = fs["turns.jsonl"][:5]
		truncateTo(t, filepath.Join(dir, "turns.jsonl"), fs["turns.jsonl"])
	}},
	{name: "prompts-replaced", n: 40, readBatch: 8, forgetBatch: 5, change: func(t *testing.T, dir string, fs crashFiles) {
		fs["prompts.jsonl"] = append([]string{`{"id":"new-prompt","text":"q"}` + "\n"}, fs["prompts.jsonl"][10:]...)
		tmp := filepath.Join(dir, "p.tmp")
		if err := os.WriteFile(tmp, []byte(strings.Join(fs["prompts.jsonl"], "")), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "prompts.jsonl")); err != nil {
			t.Fatal(err)
		}
	}},
}

// TestCrashAtEveryCommit: for each way a file changes, fail the k-th
// commit after the change, for every k until a run has no failure; after
// each failure reopen the index, index the same files again, and compare
// everything with an index built from scratch.
func TestCrashAtEveryCommit(t *testing.T) {
	t.Parallel()
	for _, tc := range crashCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for k := 1; ; k++ {
				if runCrash(t, tc, k) {
					t.Logf("%d commits after the change, each failed once", k-1)
					if k < 3 {
						t.Fatalf("only %d commits after the change: the case does not exercise the forget", k-1)
					}
					return
				}
			}
		})
	}
}

// runCrash runs one case failing commit k, and reports whether the run had
// fewer than k commits (no failure was injected).
func runCrash(t *testing.T, tc crashCase, k int) (clean bool) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fs := crashDataset(tc.n)
	fs.write(t, dir)
	for name := range fs {
		if err := os.Chtimes(filepath.Join(dir, name), crashMtime, crashMtime); err != nil {
			t.Fatal(err)
		}
	}
	dbPath := filepath.Join(t.TempDir(), "gendex.db")
	newIx := func(db *store.DB) *Indexer {
		return &Indexer{DB: db, BatchRecords: tc.readBatch, ForgetBatch: tc.forgetBatch}
	}

	db := openAt(t, dbPath, nil)
	if err := indexDir(t, newIx(db), dir); err != nil {
		t.Fatal(err)
	}
	db.Close()

	tc.change(t, dir, fs)

	failed := false
	db = openAt(t, dbPath, func(n int) error {
		if n == k {
			failed = true
			return errInjected
		}
		return nil
	})
	err := indexDir(t, newIx(db), dir)
	if failed != errors.Is(err, errInjected) {
		t.Fatalf("commit %d: injected %v, indexing returned %v", k, failed, err)
	}
	db.Close()
	if tc.restore != nil {
		tc.restore(t, dir, fs)
	}
	want := scratch(t, dir)

	// Restart: a new process over the same files.
	db = openAt(t, dbPath, nil)
	defer db.Close()
	if tc.restartOnly != "" {
		src := Source{Path: filepath.Join(dir, tc.restartOnly), Dataset: "ds", Stage: store.Raw}
		if _, err := newIx(db).IndexFile(context.Background(), src); err != nil {
			t.Fatalf("commit %d failed; the next run: %v", k, err)
		}
	} else if err := indexDir(t, newIx(db), dir); err != nil {
		t.Fatalf("commit %d failed; the next run: %v", k, err)
	}
	if strings.Contains(want, "counter says") {
		t.Fatalf("a new index's counters disagree with its files:\n%s", want)
	}
	if got := indexSnapshot(t, db, "ds"); got != want {
		t.Fatalf("commit %d failed; after a restart the index differs from a new one:\n%s", k, diffLines(got, want))
	}
	return !failed
}

// TestCrashBetweenRemovalBatches: a file too large for one removal batch
// is truncated; the run fails part-way through removing its old records.
// The stored state must say so (phase forgetting, part removed, counters
// exact for what is still there), and the next run must finish the removal
// before reading anything, ending equal to a new index.
func TestCrashBetweenRemovalBatches(t *testing.T) {
	t.Parallel()
	const lines, batch = 3000, 100
	for _, k := range []int{2, 3, 7, 16, 31} {
		t.Run(fmt.Sprint("fail-commit-", k), func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "ds")
			os.MkdirAll(dir, 0o755)
			fs := crashFiles{}
			for i := 0; i < lines; i++ {
				fs["raw_responses.jsonl"] = append(fs["raw_responses.jsonl"], rawLine(i))
				if i%10 == 0 {
					fs["prompts.jsonl"] = append(fs["prompts.jsonl"], fmt.Sprintf(`{"id":"id-%04d","text":"p"}`+"\n", i))
				}
			}
			fs.write(t, dir)
			dbPath := filepath.Join(t.TempDir(), "gendex.db")
			db := openAt(t, dbPath, nil)
			if err := indexDir(t, &Indexer{DB: db}, dir); err != nil {
				t.Fatal(err)
			}
			db.Close()

			fs["raw_responses.jsonl"] = fs["raw_responses.jsonl"][:lines/3]
			truncateTo(t, filepath.Join(dir, "raw_responses.jsonl"), fs["raw_responses.jsonl"])
			want := scratch(t, dir)

			db = openAt(t, dbPath, func(n int) error {
				if n == k {
					return errInjected
				}
				return nil
			})
			ix := &Indexer{DB: db, ForgetBatch: batch}
			if err := indexDir(t, ix, dir); !errors.Is(err, errInjected) {
				t.Fatalf("indexing: %v; want the injected failure", err)
			}
			// Commit 1 began the forget; each later one removed a batch.
			var st store.FileState
			var sum store.Summary
			db.View(func(v *store.View) (err error) {
				st, _, err = v.File(filepath.Join(dir, "raw_responses.jsonl"))
				if err == nil {
					sum, err = v.Summary("ds")
				}
				return err
			})
			if st.Phase != store.PhaseForgetting || st.Forget == nil || st.Forget.Removed != uint64(k-2)*batch || st.ID != 0 || st.Offset != 0 {
				t.Fatalf("after failing commit %d the file's state is %+v %+v; want forgetting, %d removed", k, st, st.Forget, (k-2)*batch)
			}
			if r := sum.Stage(store.Raw); r.Records != lines-uint64(k-2)*batch || r.Files != 0 {
				t.Fatalf("after failing commit %d: raw records %d, files %d; want %d, 0", k, r.Records, r.Files, lines-uint64(k-2)*batch)
			}
			// A write to the file being forgotten is refused.
			err := db.Update(func(tx *store.Tx) error {
				x := st
				x.Phase, x.Forget = store.PhaseReady, nil
				return tx.PutFile(&x)
			})
			if err == nil || !strings.Contains(err.Error(), "still being removed") {
				t.Fatalf("PutFile on a file being forgotten: %v", err)
			}
			db.Close()

			db = openAt(t, dbPath, nil)
			defer db.Close()
			if err := indexDir(t, &Indexer{DB: db, ForgetBatch: batch}, dir); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(want, "counter says") {
				t.Fatalf("a new index's counters disagree with its files:\n%s", want)
			}
			if got := indexSnapshot(t, db, "ds"); got != want {
				t.Fatalf("after the restart the index differs from a new one:\n%s", diffLines(got, want))
			}
		})
	}
}
