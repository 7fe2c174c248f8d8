package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gendex/store"
)

// realworld is the shared folder of lines other tools really wrote, each
// file with a hand-checked .truth.json (see its SOURCES.md). It lives
// beside the repository, not in it: ../shared/realworld from the module
// root.
const realworld = "../../shared/realworld"

// realworldFiles says how each sample is read. A file with read false is
// a shape README.md ("Formats it reads") says gendex does not read as
// responses; the test checks that every one of its lines is reported and
// none is counted. A file read whose truth names no id field has answers
// known by their file and line; a truth record whose id is null is a line
// with no answer, skipped and reported as having no id.
var realworldFiles = map[string]struct {
	stage  store.Stage
	idPath string // --id
	read   bool
	merge  bool // stream chunks: the lines of one id are one record
}{
	"batch_input_groq.jsonl":                   {stage: store.Prompts, read: true},
	"batch_input_litellm_trailing_blank.jsonl": {stage: store.Prompts, read: true},
	"batch_input_vllm_example.jsonl":           {stage: store.Prompts, read: true},
	"batch_output.jsonl":                       {stage: store.Raw, read: true},
	"batch_output_vllm_legacy.jsonl":           {stage: store.Raw, read: true},
	"dashscope_native.jsonl":                   {stage: store.Raw, read: true},
	"distilabel_records.jsonl":                 {stage: store.Raw, read: true},
	"edge_doc_edited.jsonl":                    {stage: store.Raw, read: true},
	"fastchat_mtbench_answers.jsonl":           {stage: store.Raw, idPath: "question_id", read: true},
	"openai_chat_completions.jsonl":            {stage: store.Raw, read: true},
	"openai_chat_stream_chunks.jsonl":          {stage: store.Raw, read: true, merge: true},
	"openai_completions.jsonl":                 {stage: store.Raw, read: true},
	"prompts_mtbench_questions.jsonl":          {stage: store.Prompts, idPath: "question_id", read: true},
	"prompts_sharegpt_fastchat.jsonl":          {stage: store.Prompts, read: true},
	"sglang_generate.jsonl":                    {stage: store.Raw, read: true},
	"sglang_generate_wrapped_log.jsonl":        {stage: store.Raw, read: true},
	"specforge_bench_results.jsonl":            {stage: store.Raw},
	"specforge_conversations.jsonl":            {stage: store.Prompts, read: true},
}

// truth is a .truth.json: the facts of one sample file, by line.
type truth struct {
	File          string           `json:"file"`
	PhysicalLines int64            `json:"physical_lines"`
	IDField       *string          `json:"id_field"`
	PromptField   *string          `json:"prompt_tokens_field"`
	CompleteField *string          `json:"completion_tokens_field"`
	FinishField   *string          `json:"finish_reason_field"`
	CachedField   *string          `json:"cached_tokens_field"`
	Records       []map[string]any `json:"records"`
}

// TestRealWorld indexes every sample file as realworldFiles says and checks
// the index against its .truth.json: the records (one per id; a repeated id
// is a duplicate named at its line, or, for stream chunks, part of the one
// record), their ids, token counts (null: unknown, never 0), cached tokens
// and finish reasons, the counters, the file's lines, and the problems
// reported. The truth's reasoning/reasoning_content notes describe message
// text, which gendex does not index.
func TestRealWorld(t *testing.T) {
	t.Parallel()
	names, _ := filepath.Glob(filepath.Join(realworld, "*.truth.json"))
	if len(names) == 0 {
		t.Skipf("no samples at %s", realworld)
	}
	for _, name := range names {
		var tr truth
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&tr); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		how, ok := realworldFiles[tr.File]
		if !ok {
			t.Errorf("%s: a sample with no decision in realworldFiles: say how gendex reads it (and README's \"Formats it reads\")", tr.File)
			continue
		}
		t.Run(strings.TrimSuffix(tr.File, ".jsonl"), func(t *testing.T) {
			path, err := filepath.Abs(filepath.Join(realworld, tr.File))
			if err != nil {
				t.Fatal(err)
			}
			db := openDB(t)
			var c collector
			res := index(t, &Indexer{DB: db, Report: c.report}, Source{Path: path, Dataset: "rw", Stage: how.stage, IDPath: how.idPath})
			fs := fileState(t, db, path)
			if fs.Lines != tr.PhysicalLines {
				t.Errorf("lines read %d; truth says %d", fs.Lines, tr.PhysicalLines)
			}
			if !how.read {
				checkNotRead(t, db, &tr, res, &c)
				return
			}
			checkRead(t, db, &tr, path, how.stage, how.merge, res, &c)
		})
	}
}

// checkNotRead: a shape gendex does not read is reported line by line,
// never counted.
func checkNotRead(t *testing.T, db *store.DB, tr *truth, res FileResult, c *collector) {
	var lines []int64
	for _, r := range tr.Records {
		lines = append(lines, num(t, r["line"]))
	}
	if got := c.kinds()[NoID]; !slices.Equal(got, lines) {
		t.Errorf("lines reported as having no id: %v; want every line, %v", got, lines)
	}
	s := summary(t, db, "rw")
	for st := store.Prompts; st <= store.Errors; st++ {
		if n := s.Stage(st).Records; n != 0 {
			t.Errorf("%d %s records counted from a file gendex does not read", n, st)
		}
	}
	if res.Added != 0 || res.Skipped != len(lines) {
		t.Errorf("added %d, skipped %d; want 0, %d", res.Added, res.Skipped, len(lines))
	}
}

// want is one expected record.
type want struct {
	id                         string
	line                       int64
	prompt, completion, cached int64
	finish                     string
	checkCached                bool
}

func checkRead(t *testing.T, db *store.DB, tr *truth, path string, stage store.Stage, merge bool, res FileResult, c *collector) {
	var order []string
	byID := map[string]*want{}
	var dupLines, noIDLines []int64
	for _, r := range tr.Records {
		id := LineID(path, num(t, r["line"])) // no id field: the answers are known by their line
		if tr.IDField != nil {
			v, ok := r[*tr.IDField]
			if !ok {
				t.Fatalf("truth record %v has no %s", r, *tr.IDField)
			}
			if v == nil { // a line with no answer
				noIDLines = append(noIDLines, num(t, r["line"]))
				continue
			}
			id = fmt.Sprint(v) // json.Number: the number as written
		}
		w := want{id: id, line: num(t, r["line"]), prompt: count(t, r, "prompt_tokens", tr.PromptField),
			completion: count(t, r, "completion_tokens", tr.CompleteField), cached: count(t, r, "cached_tokens", tr.CachedField),
			finish: finish(t, r["finish_reason"])}
		_, w.checkCached = r["cached_tokens"]
		w.checkCached = w.checkCached || tr.CachedField == nil
		first := byID[id]
		switch {
		case first == nil:
			byID[id] = &w
			order = append(order, id)
		case merge: // what a later chunk carries, it gives the record
			for _, m := range [...]struct{ dst, src *int64 }{{&first.prompt, &w.prompt}, {&first.completion, &w.completion}, {&first.cached, &w.cached}} {
				if *m.src >= 0 {
					*m.dst = *m.src
				}
			}
			if w.finish != "" {
				first.finish = w.finish
			}
		default:
			dupLines = append(dupLines, w.line)
		}
	}

	var tokens, prompt, unknown uint64
	finishes := map[string]uint64{}
	for _, w := range byID {
		if w.completion >= 0 {
			tokens += uint64(w.completion)
		} else {
			unknown++
		}
		if w.prompt >= 0 {
			prompt += uint64(w.prompt)
		}
		if w.finish != "" {
			finishes[w.finish]++
		}
	}
	err := db.View(func(v *store.View) error {
		for _, id := range order {
			w := byID[id]
			r, ok, err := v.Get("rw", stage, id)
			if err != nil {
				return err
			}
			if !ok {
				t.Errorf("id %q (line %d) not indexed", id, w.line)
				continue
			}
			got := fmt.Sprintf("line %d, prompt %d, completion %d, finish %q", r.Line, r.PromptTokens, r.CompletionTokens, r.Finish)
			exp := fmt.Sprintf("line %d, prompt %d, completion %d, finish %q", w.line, w.prompt, w.completion, w.finish)
			if w.checkCached {
				got += fmt.Sprintf(", cached %d", r.CachedTokens)
				exp += fmt.Sprintf(", cached %d", w.cached)
			}
			if got != exp {
				t.Errorf("id %q: %s; truth says %s", id, got, exp)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s := summary(t, db, "rw").Stage(stage)
	got := fmt.Sprint(s.Records, s.Duplicates, s.PromptTokens, s.CompletionTokens, s.UnknownCompletion, len(s.Finish), s.Finish)
	exp := fmt.Sprint(len(order), len(dupLines), prompt, tokens, unknown, len(finishes), finishes)
	if stage != store.Raw { // only responses have completion counts and finish reasons
		got = fmt.Sprint(s.Records, s.Duplicates)
		exp = fmt.Sprint(len(order), len(dupLines))
	}
	if got != exp {
		t.Errorf("counters %s; truth says %s", got, exp)
	}
	k := c.kinds()
	if len(k[Invalid]) > 0 || !slices.Equal(k[NoID], noIDLines) || res.Skipped != len(noIDLines) {
		t.Errorf("%d lines skipped, lines %v reported as having no id; want only the lines with no answer, %v: %v", res.Skipped, k[NoID], noIDLines, c.problems)
	}
	if !slices.Equal(k[Duplicate], dupLines) {
		t.Errorf("duplicates reported at lines %v; truth has the ids repeat at %v", k[Duplicate], dupLines)
	}
	if stage == store.Raw && int(unknown) != len(k[NoTokens]) {
		t.Errorf("%d records without a count reported; truth has %d", len(k[NoTokens]), unknown)
	}
	server := tr.IDField == nil || strings.HasSuffix(*tr.IDField, "meta_info.id") || *tr.IDField == "request_id"
	if got := k[ServerID]; server != (len(got) == 1) || len(got) > 1 {
		t.Errorf("warnings of ids no prompt carries at lines %v; want one when the id is the server's or the line's (truth's id field %v)", got, tr.IDField)
	}
}

// count reads a truth count: null is unknown, and so is every record's
// when the truth says the file has no such field.
func count(t *testing.T, r map[string]any, key string, field *string) int64 {
	t.Helper()
	v, ok := r[key]
	if !ok || v == nil || field == nil {
		return store.Unknown
	}
	return num(t, v)
}

func num(t *testing.T, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("%v is not a number", v)
	}
	i, err := n.Int64()
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// finish reads a truth finish reason: a string, SGLang's {"type": ...}, or
// null.
func finish(t *testing.T, v any) string {
	t.Helper()
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case map[string]any:
		s, _ := v["type"].(string)
		return s
	}
	t.Fatalf("finish reason %v", v)
	return ""
}
