package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gendex/store"
)

// state is everything the index holds for a dataset, less what depends on
// the file's id or the moment of indexing: counters, histogram, throughput
// buckets and records. Two indexes of the same lines must give the same.
func state(t *testing.T, db *store.DB, dataset string) string {
	t.Helper()
	var b strings.Builder
	err := db.View(func(v *store.View) error {
		s, err := v.Summary(dataset)
		if err != nil {
			return err
		}
		js, _ := json.Marshal(s)
		fmt.Fprintf(&b, "summary %s\n", js)
		v.Histogram(dataset, func(base int64, counts []int64) {
			for i, n := range counts {
				if n != 0 {
					fmt.Fprintf(&b, "hist %d=%d\n", base+int64(i), n)
				}
			}
		})
		r, tok, unk := v.Window(dataset, 0, math.MaxInt64/2)
		fmt.Fprintf(&b, "window %d %d %d\n", r, tok, unk)
		for st := store.Prompts; st <= store.Errors; st++ {
			err := v.Each(dataset, st, func(r *store.Record) error {
				fmt.Fprintf(&b, "%s %q %v p=%d c=%d cached=%d r=%d finish=%q t=%d own=%v line=%d\n", st, r.ID, r.Shape,
					r.PromptTokens, r.CompletionTokens, r.CachedTokens, r.ReasoningTokens, r.Finish, r.Time, r.OwnTime, r.Line)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func fileState(t *testing.T, db *store.DB, path string) store.FileState {
	t.Helper()
	var fs store.FileState
	if err := db.View(func(v *store.View) (err error) { fs, _, err = v.File(path); return err }); err != nil {
		t.Fatal(err)
	}
	return fs
}

func index(t *testing.T, ix *Indexer, src Source) FileResult {
	t.Helper()
	res, err := ix.IndexFile(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// chunkLine is one line of a streamed chat completion, as the OpenAI SDK's
// model_dump_json writes it: usage null except on the last chunk.
func chunkLine(id, content, finish, usage string) string {
	fin := "null"
	if finish != "" {
		fin = `"` + finish + `"`
	}
	choices := `[{"delta":{"content":"` + content + `","role":null,"tool_calls":null},"finish_reason":` + fin + `,"index":0,"logprobs":null}]`
	if usage != "null" {
		choices = "[]"
	}
	return `{"id":"` + id + `","choices":` + choices + `,"created":1762504029,"model":"m","object":"chat.completion.chunk","service_tier":null,"system_fingerprint":null,"usage":` + usage + "}\n"
}

// TestStreamChunks: the chunks of one streamed response are one record,
// with the counts of the chunk that carries usage and the finish reason of
// the chunk that has one, wherever the transaction and read boundaries
// fall; the counters equal those of the same record written whole; a
// stream without a count when a read ends is warned of once, at its line.
func TestStreamChunks(t *testing.T) {
	t.Parallel()
	usage := func(p, c int) string {
		return fmt.Sprintf(`{"completion_tokens":%d,"prompt_tokens":%d,"total_tokens":%d,"completion_tokens_details":null,"prompt_tokens_details":null}`, c, p, p+c)
	}
	// Two responses interleaved, and one that never got a usage chunk.
	first := chunkLine("s-1", "", "", "null") + chunkLine("s-2", "", "", "null") +
		chunkLine("s-1", "I", "", "null") + chunkLine("s-2", "No", "", "null") +
		chunkLine("s-1", "", "stop", "null") + chunkLine("s-3", "x", "length", "null") +
		chunkLine("s-1", "", "stop", "null")
	rest := chunkLine("s-1", "", "", usage(56, 9)) + chunkLine("s-2", "", "length", "null") +
		chunkLine("s-2", "", "", usage(20, 300))
	whole := `{"id":"s-1","object":"chat.completion","created":1762504029,"choices":[{"index":0,"finish_reason":"stop"}],"usage":{"prompt_tokens":56,"completion_tokens":9}}` + "\n" +
		`{"id":"s-2","object":"chat.completion","created":1762504029,"choices":[{"index":0,"finish_reason":"length"}],"usage":{"prompt_tokens":20,"completion_tokens":300}}` + "\n" +
		`{"id":"s-3","object":"chat.completion","created":1762504029,"choices":[{"index":0,"finish_reason":"length"}]}` + "\n"

	dir := t.TempDir()
	wholePath := filepath.Join(dir, "whole.jsonl")
	os.WriteFile(wholePath, []byte(whole), 0o644)
	ref := openDB(t)
	index(t, &Indexer{DB: ref}, Source{Path: wholePath, Dataset: "d", Stage: store.Raw})

	for _, batch := range []int{1, 2, 3, 1000} {
		t.Run(fmt.Sprint("batch", batch), func(t *testing.T) {
			db := openDB(t)
			path := filepath.Join(t.TempDir(), "raw_responses.jsonl")
			os.WriteFile(path, []byte(first), 0o644)
			var c collector
			ix := &Indexer{DB: db, Report: c.report, BatchRecords: batch}
			src := Source{Path: path, Dataset: "d", Stage: store.Raw}
			res := index(t, ix, src)
			if res.Added != 3 || res.Duplicates != 0 || res.Unknown != 3 {
				t.Errorf("first read: added %d, duplicates %d, unknown %d; want 3, 0, 3", res.Added, res.Duplicates, res.Unknown)
			}
			appendFile(t, path, rest)
			res = index(t, ix, src)
			if res.Added != 0 || res.Duplicates != 0 || res.Unknown != -2 {
				t.Errorf("second read: added %d, duplicates %d, unknown %d; want 0, 0, -2", res.Added, res.Duplicates, res.Unknown)
			}
			s := summary(t, db, "d").Stage(store.Raw)
			got := fmt.Sprint(s.Records, s.PromptTokens, s.CompletionTokens, s.UnknownCompletion, s.Duplicates, s.Finish, s.Shapes)
			if w := fmt.Sprint(3, 76, 309, 1, 0, map[string]uint64{"stop": 1, "length": 2}, map[string]uint64{"openai": 2, "unknown": 1}); got != w {
				t.Errorf("counters %s; want %s", got, w)
			}
			db.View(func(v *store.View) error {
				r, _, _ := v.Get("d", store.Raw, "s-1")
				if r.PromptTokens != 56 || r.CompletionTokens != 9 || r.Finish != "stop" || r.Line != 1 || r.Time != 1762504029000 {
					t.Errorf("s-1 = %+v; want 56, 9, stop, line 1", r)
				}
				return nil
			})
			// The same counters as the whole responses, histogram and
			// throughput buckets included (lines aside).
			strip := func(s string) string {
				var out []string
				for l := range strings.Lines(s) {
					if i := strings.Index(l, " line="); i >= 0 {
						l = l[:i]
					}
					out = append(out, strings.TrimSuffix(l, "\n"))
				}
				return strings.Join(out, "\n")
			}
			if g, w := strip(state(t, db, "d")), strip(state(t, ref, "d")); g != w {
				t.Errorf("index of the chunks:\n%s\nof the whole responses:\n%s", g, w)
			}
			fs := fileState(t, db, path)
			if fs.Records != 3 || fs.Duplicates != 0 || fs.Unknown != 1 || fs.Lines != 10 {
				t.Errorf("file state: records %d, duplicates %d, unknown %d, lines %d; want 3, 0, 1, 10", fs.Records, fs.Duplicates, fs.Unknown, fs.Lines)
			}
			// Every stream without a count when a read ends is said, at
			// its first line: all three after the first read (s-1's and
			// s-2's usage came with the chunks appended later), none after
			// the second.
			if k := c.kinds(); len(k[Duplicate]) != 0 || !slices.Equal(k[NoTokens], []int64{1, 2, 6}) {
				t.Errorf("duplicates at lines %v, streams without a count at lines %v; want none, [1 2 6]: %v", k[Duplicate], k[NoTokens], c.problems)
			}

			// Chunks of s-1 in another file are duplicates, not merged.
			other := filepath.Join(filepath.Dir(path), "raw_responses_2.jsonl")
			os.WriteFile(other, []byte(chunkLine("s-1", "", "", usage(1, 1))), 0o644)
			if res := index(t, ix, Source{Path: other, Dataset: "d", Stage: store.Raw}); res.Duplicates != 1 || res.Added != 0 {
				t.Errorf("another file's chunk: %+v; want 1 duplicate", res)
			}
			if s := summary(t, db, "d").Stage(store.Raw); s.CompletionTokens != 309 || s.Duplicates != 1 {
				t.Errorf("after another file's chunk: tokens %d, duplicates %d; want 309, 1", s.CompletionTokens, s.Duplicates)
			}

			// Forgetting the file takes the merged records off exactly.
			os.WriteFile(path, []byte(rest), 0o644) // truncated: another first line
			index(t, ix, src)
			fresh := openDB(t)
			index(t, &Indexer{DB: fresh}, src)
			index(t, &Indexer{DB: fresh}, Source{Path: other, Dataset: "d", Stage: store.Raw})
			if g, w := state(t, db, "d"), state(t, fresh, "d"); g != w {
				t.Errorf("after forgetting and reading again:\n%s\nfresh index:\n%s", g, w)
			}
		})
	}
}

// TestIDPath: `ingest --id`: ids from a dotted path, numbers as their text;
// the path is remembered for later reads of the file; another path indexes
// the file again under its new ids; a line without the id is skipped and
// named by its line.
func TestIDPath(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	dir := filepath.Join(t.TempDir(), "mt")
	os.MkdirAll(dir, 0o755)
	path := filepath.Join(dir, "raw_responses.jsonl")
	answer := func(q int, uid string) string {
		return fmt.Sprintf(`{"question_id":%d,"answer_id":"a%d","model_id":"m","choices":[{"index":0,"turns":["t"]}],"meta":{"uid":"%s"},"usage":{"completion_tokens":%d}}`+"\n", q, q, uid, q)
	}
	os.WriteFile(path, []byte(answer(101, "u1")+answer(102, "u2")+`{"answer_id":"lost","usage":{"completion_tokens":1000}}`+"\n"), 0o644)
	var c collector
	ix := &Indexer{DB: db, Report: c.report}
	src := Source{Path: path, Dataset: "mt", Stage: store.Raw, IDPath: "question_id"}
	res := index(t, ix, src)
	if res.Added != 2 || res.Skipped != 1 {
		t.Fatalf("added %d, skipped %d; want 2, 1", res.Added, res.Skipped)
	}
	if got := c.kinds()[NoID]; !slices.Equal(got, []int64{3}) {
		t.Errorf("no-id lines %v; want [3]", got)
	}
	if !strings.Contains(c.problems[0].String(), path+":3: line has no id at question_id") {
		t.Errorf("problem %q does not name the file, line and path", c.problems[0])
	}
	if fs := fileState(t, db, path); fs.IDPath != "question_id" {
		t.Errorf("stored id path %q", fs.IDPath)
	}

	// Later reads, without the path, use the remembered one.
	appendFile(t, path, answer(103, "u3"))
	res = index(t, ix, Source{Path: path, Dataset: "mt", Stage: store.Raw})
	if res.Added != 1 {
		t.Errorf("appended line: added %d; want 1", res.Added)
	}
	ids := func() []string {
		var ids []string
		db.View(func(v *store.View) error {
			return v.Each("mt", store.Raw, func(r *store.Record) error { ids = append(ids, r.ID); return nil })
		})
		return ids
	}
	if got := ids(); !slices.Equal(got, []string{"101", "102", "103"}) {
		t.Errorf("ids %v", got)
	}
	// Unchanged, with the same path: nothing read.
	if res := index(t, ix, src); !res.Unchanged {
		t.Errorf("same path, unchanged file read again: %+v", res)
	}

	// Another path: the file is indexed again under it, counters exact.
	c.problems = nil
	res = index(t, ix, Source{Path: path, Dataset: "mt", Stage: store.Raw, IDPath: "meta.uid"})
	if res.Reindexed == "" || res.Added != 3 || res.Skipped != 1 {
		t.Errorf("new path: %+v; want re-indexed, 3 added, 1 skipped", res)
	}
	if got := ids(); !slices.Equal(got, []string{"u1", "u2", "u3"}) {
		t.Errorf("ids under meta.uid %v", got)
	}
	if s := summary(t, db, "mt").Stage(store.Raw); s.Records != 3 || s.CompletionTokens != 306 || s.Files != 1 {
		t.Errorf("records %d, tokens %d, files %d; want 3, 306, 1", s.Records, s.CompletionTokens, s.Files)
	}
	if got := c.kinds()[Reindexed]; len(got) != 1 {
		t.Errorf("re-index reported %d times; want once", len(got))
	}

	// A replaced file (cut and written again) is forgotten and read again
	// by the built-in rules: the path was given for the old file, and that
	// is said; given again, it is used.
	c.problems = nil
	os.WriteFile(path, []byte(answer(104, "u4")), 0o644)
	index(t, ix, Source{Path: path, Dataset: "mt", Stage: store.Raw})
	if got := ids(); !slices.Equal(got, []string{"raw_responses.jsonl:1"}) {
		t.Errorf("after truncation: ids %v; want [raw_responses.jsonl:1] (the old file's path forgotten; the line has no id at a known path, so its file:line)", got)
	}
	if got := c.kinds()[Reindexed]; len(got) != 1 || !strings.Contains(c.problems[0].String(), "--id path meta.uid given for the old file is forgotten") {
		t.Errorf("the forgotten path is not said: %v", c.problems)
	}
	if fs := fileState(t, db, path); fs.IDPath != "" {
		t.Errorf("stored id path %q after the file was replaced; want none", fs.IDPath)
	}
	index(t, ix, Source{Path: path, Dataset: "mt", Stage: store.Raw, IDPath: "meta.uid"})
	if got := ids(); !slices.Equal(got, []string{"u4"}) {
		t.Errorf("after --id again: ids %v; want [u4]", got)
	}

	if _, err := ix.IndexFile(context.Background(), Source{Path: path, Dataset: "mt", Stage: store.Raw, IDPath: "a..b"}); err == nil {
		t.Error("a bad id path was accepted")
	}
}

// TestServerID: SGLang /generate answers saved as they came carry only the
// server's meta_info.id; they are indexed under it, with one warning per
// file however many lines and reads; a line with no id at all is skipped.
func TestServerID(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	path := filepath.Join(t.TempDir(), "raw_responses.jsonl")
	gen := func(rid string, n int) string {
		return fmt.Sprintf(`{"text":"t","output_ids":[1],"meta_info":{"id":"%s","finish_reason":{"type":"length","length":%d},"prompt_tokens":6,"completion_tokens":%d,"cached_tokens":0}}`+"\n", rid, n, n)
	}
	os.WriteFile(path, []byte(gen("r1", 10)+gen("r2", 20)+`{"phase":"weights_swapped","num_model_state_leaves":398}`+"\n"), 0o644)
	var c collector
	ix := &Indexer{DB: db, Report: c.report, BatchRecords: 1}
	src := Source{Path: path, Dataset: "d", Stage: store.Raw}
	res := index(t, ix, src)
	appendFile(t, path, gen("r3", 30))
	res2 := index(t, ix, src)
	if res.Added+res2.Added != 3 || res.Skipped != 1 {
		t.Errorf("added %d, skipped %d; want 3, 1", res.Added+res2.Added, res.Skipped)
	}
	k := c.kinds()
	if !slices.Equal(k[ServerID], []int64{1}) || !slices.Equal(k[NoID], []int64{3}) {
		t.Errorf("server-id warnings at %v, no-id lines %v; want [1], [3]", k[ServerID], k[NoID])
	}
	for _, p := range c.problems {
		if p.Kind == ServerID && !strings.Contains(p.Msg, "cannot be matched to prompts") {
			t.Errorf("warning %q does not say the answers match no prompt", p.Msg)
		}
	}
	if s := summary(t, db, "d").Stage(store.Raw); s.Records != 3 || s.CompletionTokens != 60 {
		t.Errorf("records %d, tokens %d; want 3, 60", s.Records, s.CompletionTokens)
	}
}

// TestCountsWhereToolsPutThem indexes one line of each shape whose counts
// gendex once missed, and a stray summary line that must not count.
func TestCountsWhereToolsPutThem(t *testing.T) {
	t.Parallel()
	lines := []string{
		// old vLLM run-batch: response is the completion itself
		`{"id":"vllm-1","custom_id":"request-1","response":{"id":"cmpl-1","object":"chat.completion","created":1715633336,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":25,"total_tokens":56,"completion_tokens":31}},"error":null}`,
		// DashScope native
		`{"status_code":200,"request_id":"9b4e-1","code":"","message":"","output":{"text":null,"finish_reason":"stop","choices":[{"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],"model_name":"q"},"usage":{"input_tokens":53,"output_tokens":9,"total_tokens":62}}`,
		// Anthropic-style message
		`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"ok"}],"stop_reason":"max_tokens","usage":{"input_tokens":12,"output_tokens":100}}`,
		// a benchmark's summary line: an aggregate, no id
		`{"batch_size":8,"steps":7,"acc_length":4.14,"duration":40.99,"throughput":1321.79,"completion_tokens":54181,"benchmark":"mtbench"}`,
	}
	db := openDB(t)
	path := filepath.Join(t.TempDir(), "raw_responses.jsonl")
	os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
	var c collector
	res := index(t, &Indexer{DB: db, Report: c.report}, Source{Path: path, Dataset: "d", Stage: store.Raw})
	if res.Added != 3 || res.Unknown != 0 || res.Skipped != 1 || !slices.Equal(c.kinds()[NoID], []int64{4}) {
		t.Errorf("added %d, unknown %d, skipped %d, no-id lines %v; want 3, 0, 1, [4]", res.Added, res.Unknown, res.Skipped, c.kinds()[NoID])
	}
	s := summary(t, db, "d").Stage(store.Raw)
	got := fmt.Sprint(s.Records, s.PromptTokens, s.CompletionTokens, s.UnknownCompletion, s.UnknownPrompt, s.Finish)
	if w := fmt.Sprint(3, 25+53+12, 31+9+100, 0, 0, map[string]uint64{"stop": 2, "length": 1}); got != w {
		t.Errorf("counters %s; want %s", got, w)
	}
}
