package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/store"
)

func openDB(t testing.TB) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gendex.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

type collector struct{ problems []Problem }

func (c *collector) report(p Problem) { c.problems = append(c.problems, p) }

func (c *collector) kinds() map[Kind][]int64 {
	m := map[Kind][]int64{}
	for _, p := range c.problems {
		m[p.Kind] = append(m[p.Kind], p.Line)
	}
	return m
}

func summary(t testing.TB, db *store.DB, dataset string) store.Summary {
	t.Helper()
	var s store.Summary
	if err := db.View(func(v *store.View) (err error) { s, err = v.Summary(dataset); return err }); err != nil {
		t.Fatal(err)
	}
	return s
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

func TestIndexBrokenFile(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	path := filepath.Join(t.TempDir(), "bad", "raw_responses.jsonl")
	copyFile(t, "../testdata/broken/bad/raw_responses.jsonl", path)
	var c collector
	ix := &Indexer{DB: db, Report: c.report}
	src := Source{Path: path, Dataset: "bad", Stage: store.Raw}
	res, err := ix.IndexFile(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	k := c.kinds()
	if got := fmt.Sprint(k[Invalid], k[NoID], k[Duplicate], k[NoTokens]); got != "[3 8] [4] [6] [7]" {
		t.Errorf("problem lines (invalid, no id, duplicate, no tokens) = %s", got)
	}
	if res.Added != 4 || res.Skipped != 3 || res.Duplicates != 1 || res.Unknown != 1 {
		t.Errorf("result = %+v", res)
	}
	if res.Torn == 0 || res.NextLine != 10 {
		t.Errorf("torn = %d at line %d; want the unfinished line 10", res.Torn, res.NextLine)
	}
	s := summary(t, db, "bad")
	raw := s.Stage(store.Raw)
	if raw.Records != 4 || raw.CompletionTokens != 37 || raw.UnknownCompletion != 1 || raw.Duplicates != 1 {
		t.Errorf("raw stats = %+v", raw)
	}
	if raw.Finish["stop"] != 2 || raw.Finish["length"] != 1 {
		t.Errorf("finish = %v", raw.Finish)
	}
	for _, p := range c.problems {
		if !strings.HasPrefix(p.String(), path+":") {
			t.Errorf("problem %q does not start with file:line", p)
		}
	}
	// The first line's BOM and the second's CR are not part of the stored lines.
	if err := db.View(func(v *store.View) error {
		for id, want := range map[string]string{"r1": `{"id":"r1",`, "r2": `"length"}`} {
			r, ok, err := v.Get("bad", store.Raw, id)
			if err != nil || !ok {
				return fmt.Errorf("get %s: %v %v", id, ok, err)
			}
			b, _ := os.ReadFile(path)
			line := string(b[r.Offset : r.Offset+r.Length])
			if !strings.Contains(line, want) || strings.ContainsAny(line, "\r\ufeff") {
				t.Errorf("stored line of %s = %q", id, line)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	// Completing the torn line indexes it, once.
	appendFile(t, path, "}\n")
	c.problems = nil
	res, err = ix.IndexFile(context.Background(), src)
	if err != nil || res.Added != 1 || res.Torn != 0 || len(c.problems) != 0 {
		t.Fatalf("after completing the line: %+v, %v, problems %v", res, err, c.problems)
	}
	if got := summary(t, db, "bad").Stage(store.Raw); got.Records != 5 || got.CompletionTokens != 42 {
		t.Errorf("after completing: %+v", got)
	}
	if err := db.View(func(v *store.View) error {
		r, ok, _ := v.Get("bad", store.Raw, "r6")
		if !ok || r.Line != 10 {
			t.Errorf("r6 = %+v, %v; want line 10", r, ok)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func line(id string, tokens int) string {
	return fmt.Sprintf(`{"id":%q,"completion_tokens":%d,"finish_reason":"stop"}`+"\n", id, tokens)
}

func TestIncremental(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "raw_responses.jsonl")
	os.WriteFile(path, []byte(line("a", 1)+line("b", 2)+line("c", 3)), 0o644)
	var c collector
	ix := &Indexer{DB: db, Report: c.report}
	src := Source{Path: path, Dataset: "d", Stage: store.Raw}
	ctx := context.Background()
	check := func(step string, records, tokens uint64) {
		t.Helper()
		s := summary(t, db, "d").Stage(store.Raw)
		if s.Records != records || s.CompletionTokens != tokens || s.Files != 1 {
			t.Errorf("%s: records %d tokens %d files %d; want %d, %d, 1", step, s.Records, s.CompletionTokens, s.Files, records, tokens)
		}
	}

	if res, err := ix.IndexFile(ctx, src); err != nil || res.Added != 3 {
		t.Fatalf("first: %+v %v", res, err)
	}
	check("first", 3, 6)

	res, err := ix.IndexFile(ctx, src)
	if err != nil || !res.Unchanged || res.Bytes != 0 {
		t.Fatalf("unchanged: %+v %v", res, err)
	}

	extra := line("d", 4) + line("e", 5)
	appendFile(t, path, extra)
	res, err = ix.IndexFile(ctx, src)
	if err != nil || res.Added != 2 || res.Bytes != int64(len(extra)) || res.Reindexed != "" {
		t.Fatalf("append: %+v %v", res, err)
	}
	check("append", 5, 15)

	// Truncated: indexed again from the start, nothing counted twice.
	os.WriteFile(path, []byte(line("a", 1)+line("b", 2)), 0o644)
	res, err = ix.IndexFile(ctx, src)
	if err != nil || !strings.Contains(res.Reindexed, "truncated") || res.Added != 2 {
		t.Fatalf("truncate: %+v %v", res, err)
	}
	check("truncate", 2, 3)

	// Replaced by another file (new inode) of the same size.
	tmp := path + ".tmp"
	os.WriteFile(tmp, []byte(line("x", 7)+line("y", 8)), 0o644)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	res, err = ix.IndexFile(ctx, src)
	if err != nil || !strings.Contains(res.Reindexed, "replaced") || res.Added != 2 {
		t.Fatalf("replace: %+v %v", res, err)
	}
	check("replace", 2, 15)

	// Rewritten in place, same inode, longer, with other first bytes.
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.WriteAt([]byte(line("z", 9)+line("y", 8)+line("w", 1)), 0)
	f.Close()
	res, err = ix.IndexFile(ctx, src)
	if err != nil || !strings.Contains(res.Reindexed, "first bytes") || res.Added != 3 {
		t.Fatalf("rewrite: %+v %v", res, err)
	}
	check("rewrite", 3, 18)
	if err := db.View(func(v *store.View) error {
		if _, ok, _ := v.Get("d", store.Raw, "x"); ok {
			t.Error("record x of the replaced file is still indexed")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := len(c.kinds()[Reindexed]); n != 3 {
		t.Errorf("%d re-indexed warnings; want 3", n)
	}
}

// TestLongLine: a line eight times the read buffer (assembled from eight
// reads) is one record with its exact count, and the line after it keeps
// its number.
func TestLongLine(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("8 MiB line")
	}
	db := openDB(t)
	path := filepath.Join(t.TempDir(), "raw_responses.jsonl")
	var b strings.Builder
	b.WriteString(line("before", 1))
	b.WriteString(`{"id":"huge","output_ids":[`)
	n := 0
	for b.Len() < 8*readBuffer {
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString("163606")
		n++
	}
	b.WriteString("]}\n")
	b.WriteString(line("after", 2))
	os.WriteFile(path, []byte(b.String()), 0o644)
	ix := &Indexer{DB: db}
	res, err := ix.IndexFile(context.Background(), Source{Path: path, Dataset: "d", Stage: store.Raw})
	if err != nil || res.Added != 3 || res.Skipped != 0 {
		t.Fatalf("%+v %v", res, err)
	}
	if err := db.View(func(v *store.View) error {
		r, ok, _ := v.Get("d", store.Raw, "huge")
		if !ok || r.CompletionTokens != int64(n) || r.Line != 2 {
			t.Errorf("huge = %+v; want %d tokens at line 2", r, n)
		}
		r, ok, _ = v.Get("d", store.Raw, "after")
		if !ok || r.Line != 3 {
			t.Errorf("after = %+v", r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// TestExactCounts builds random datasets (several shards per stage,
// duplicates within and across shards, errors, unknown counts) and checks
// every counter against a brute-force count, after indexing in several
// batches and again after one shard is replaced.
func TestExactCounts(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 5; round++ {
		db := openDB(t)
		dir := filepath.Join(t.TempDir(), "ds")
		os.MkdirAll(dir, 0o755)
		files := map[string][]string{}
		id := func() string { return fmt.Sprintf("id-%03d", rng.IntN(300)) }
		for i := 0; i < 200; i++ {
			files["prompts.jsonl"] = append(files["prompts.jsonl"], fmt.Sprintf(`{"id":%q,"text":"p"}`, id()))
		}
		for _, shard := range []string{"raw_responses.jsonl", "raw_responses.2.jsonl"} {
			for i := 0; i < 150; i++ {
				switch rng.IntN(10) {
				case 0:
					files[shard] = append(files[shard], fmt.Sprintf(`{"custom_id":%q,"response":null,"error":{"code":"boom","message":"m"}}`, id()))
				case 1:
					files[shard] = append(files[shard], fmt.Sprintf(`{"id":%q,"text":"no count"}`, id()))
				default:
					// Copies of one id carry the same counts, so which copy
					// is counted does not change the sums.
					x := id()
					var n int
					fmt.Sscanf(x, "id-%d", &n)
					files[shard] = append(files[shard], fmt.Sprintf(`{"id":%q,"meta_info":{"completion_tokens":%d,"prompt_tokens":%d,"finish_reason":{"type":"stop"}}}`, x, n%50, n%9))
				}
			}
		}
		for i := 0; i < 100; i++ {
			files["errors.jsonl"] = append(files["errors.jsonl"], fmt.Sprintf(`{"id":%q,"status":400,"error":"x"}`, id()))
			files["tokenized.jsonl"] = append(files["tokenized.jsonl"], fmt.Sprintf(`{"id":%q,"input_ids":[1,2]}`, id()))
		}
		write := func() {
			for name, lines := range files {
				os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
			}
		}
		write()
		ix := &Indexer{DB: db, BatchRecords: 1 + rng.IntN(40)}
		index := func() {
			srcs, err := Discover(dir, "", nil)
			if err != nil || len(srcs) != 5 {
				t.Fatalf("discover: %v %v", srcs, err)
			}
			for _, src := range srcs {
				if _, err := ix.IndexFile(context.Background(), src); err != nil {
					t.Fatal(err)
				}
			}
		}
		index()
		verify(t, db, "ds", dir, files)
		// Replace one shard with different content: its old records go.
		files["raw_responses.2.jsonl"] = files["raw_responses.2.jsonl"][:40]
		files["raw_responses.2.jsonl"][0] = `{"id":"new-one","completion_tokens":5}`
		write()
		index()
		verify(t, db, "ds", dir, files)
	}
}

// verify compares the index with a brute-force reading of the files, in
// the order Discover lists them (sorted by name): the first line of an id
// in a stage counts.
func verify(t *testing.T, db *store.DB, dataset, dir string, files map[string][]string) {
	t.Helper()
	type rec struct {
		tokens int64
		prompt int64
	}
	stages := map[store.Stage]map[string]rec{}
	for st := store.Prompts; st <= store.Errors; st++ {
		stages[st] = map[string]rec{}
	}
	dups := map[store.Stage]uint64{}
	srcs, _ := Discover(dir, "", nil)
	for _, src := range srcs {
		for _, l := range files[filepath.Base(src.Path)] {
			var m map[string]any
			json.Unmarshal([]byte(l), &m)
			st := src.Stage
			id, _ := m["id"].(string)
			if cid, ok := m["custom_id"].(string); ok {
				id = cid
			}
			r := rec{tokens: -1, prompt: -1}
			if st == store.Raw && m["error"] != nil {
				st = store.Errors
			}
			if mi, ok := m["meta_info"].(map[string]any); ok {
				r.tokens = int64(mi["completion_tokens"].(float64))
				r.prompt = int64(mi["prompt_tokens"].(float64))
			} else if v, ok := m["completion_tokens"].(float64); ok {
				r.tokens = int64(v)
			}
			if _, seen := stages[st][id]; seen {
				if st == src.Stage {
					dups[st]++
				}
				continue
			}
			stages[st][id] = r
		}
	}
	s := summary(t, db, dataset)
	raw := s.Stage(store.Raw)
	var tokens, unknown uint64
	for _, r := range stages[store.Raw] {
		if r.tokens >= 0 {
			tokens += uint64(r.tokens)
		} else {
			unknown++
		}
	}
	var answered, errorsOpen, rawTok uint64
	for id := range stages[store.Prompts] {
		_, r := stages[store.Raw][id]
		_, e := stages[store.Errors][id]
		if r || e {
			answered++
		}
	}
	var failed uint64
	for id := range stages[store.Errors] {
		if _, r := stages[store.Raw][id]; !r {
			errorsOpen++
			if _, p := stages[store.Prompts][id]; p {
				failed++
			}
		}
	}
	var noPrompt uint64
	for id := range stages[store.Raw] {
		if _, tk := stages[store.Tokenized][id]; tk {
			rawTok++
		}
		if _, p := stages[store.Prompts][id]; !p {
			noPrompt++
		}
	}
	got := fmt.Sprint(s.Stage(store.Prompts).Records, raw.Records, s.Stage(store.Errors).Records, s.Stage(store.Tokenized).Records,
		raw.CompletionTokens, raw.UnknownCompletion, s.Overlap, raw.Duplicates, s.Stage(store.Prompts).Duplicates)
	want := fmt.Sprint(len(stages[store.Prompts]), len(stages[store.Raw]), len(stages[store.Errors]), len(stages[store.Tokenized]),
		tokens, unknown, store.Overlap{Answered: answered, ErrorsOpen: errorsOpen, Failed: failed, RawTokenized: rawTok, RawNoPrompt: noPrompt, NoPromptKnown: true}, dups[store.Raw], dups[store.Prompts])
	if got != want {
		t.Errorf("index says  %s\nfiles say   %s", got, want)
		db.View(func(v *store.View) error {
			for id := range stages[store.Raw] {
				if _, ok, _ := v.Get(dataset, store.Raw, id); !ok {
					t.Logf("raw %s not in index", id)
					for name, ls := range files {
						for i, l := range ls {
							if strings.Contains(l, id) {
								t.Logf("  %s:%d %s", name, i+1, l)
							}
						}
					}
				}
			}
			return nil
		})
	}
	// missing ids, exactly
	var missing []string
	db.View(func(v *store.View) error {
		return v.Missing(dataset, store.Prompts, func(id string) error { missing = append(missing, id); return nil }, store.Raw, store.Errors)
	})
	if uint64(len(missing)) != s.MissingRaw() {
		t.Errorf("missing lists %d ids, counter says %d", len(missing), s.MissingRaw())
	}
	for _, id := range missing {
		_, r := stages[store.Raw][id]
		_, e := stages[store.Errors][id]
		if r || e {
			t.Errorf("%s listed missing but answered", id)
		}
	}
}
