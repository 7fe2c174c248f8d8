package query_test

// An independent model of the fixture datasets, read with encoding/json
// from the files themselves, so that the expected numbers in query_test.go
// are computed here and not copied from what gendex prints. It follows the
// shape table of README.md ("Formats it reads"), not the ingest code.

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"gendex/query"
)

// fixtureRoot is the dataset root every store test indexes.
var fixtureRoot = filepath.Join("..", "testdata", "query", "root")

type mRec struct {
	id         string
	completion int64 // -1: unknown
	prompt     int64 // -1: unknown
	reasoning  int64 // -1: unknown
	finish     string
	message    string    // error records
	own        time.Time // zero: no time of its own
	path       string    // absolute
	line       int       // 1-based
	text       []byte    // the line, without its newline
}

type mDataset struct {
	name       string
	files      int
	hasPrompts bool
	prompts    map[string]mRec
	raw        map[string]mRec
	errs       map[string]mRec
	tok        map[string]mRec
}

// model reads every dataset under root.
func model(t *testing.T, root string) map[string]*mDataset {
	t.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*mDataset{}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		ds := &mDataset{name: d.Name(), prompts: map[string]mRec{}, raw: map[string]mRec{}, errs: map[string]mRec{}, tok: map[string]mRec{}}
		for _, file := range []string{"prompts.jsonl", "raw_responses.jsonl", "tokenized.jsonl", "errors.jsonl"} {
			path := filepath.Join(root, d.Name(), file)
			data, err := os.ReadFile(path)
			if os.IsNotExist(err) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			ds.files++
			if file == "prompts.jsonl" {
				ds.hasPrompts = true
			}
			for i, line := range bytes.Split(data, []byte("\n")) {
				if len(bytes.TrimSpace(line)) == 0 {
					continue
				}
				dec := json.NewDecoder(bytes.NewReader(line))
				dec.UseNumber()
				var m map[string]any
				if err := dec.Decode(&m); err != nil {
					t.Fatalf("%s:%d: fixture line is not JSON: %v", path, i+1, err)
				}
				r := mRec{id: idOf(m), completion: -1, prompt: -1, reasoning: -1, path: path, line: i + 1, text: line}
				into := map[string]map[string]mRec{"prompts.jsonl": ds.prompts, "tokenized.jsonl": ds.tok, "errors.jsonl": ds.errs}[file]
				switch file {
				case "raw_responses.jsonl":
					if isFailure(m) {
						r.finish, r.message = failure(m)
						into = ds.errs
					} else {
						response(m, &r)
						into = ds.raw
					}
				case "errors.jsonl":
					r.finish, r.message = failure(m)
				}
				if _, dup := into[r.id]; !dup { // the first line of an id counts
					into[r.id] = r
				}
			}
		}
		out[ds.name] = ds
	}
	return out
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }

func num(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func idOf(m map[string]any) string {
	for _, k := range []string{"custom_id", "id"} {
		switch v := m[k].(type) {
		case string:
			if v != "" {
				return v
			}
		case json.Number:
			return v.String()
		}
	}
	return ""
}

// isFailure: a Batch line whose request failed (error set, no response),
// or whose response has an HTTP error status.
func isFailure(m map[string]any) bool {
	if resp := obj(m["response"]); resp != nil {
		code, _ := num(resp["status_code"])
		return code >= 400
	}
	return m["error"] != nil && m["completion_tokens"] == nil && m["usage"] == nil && m["meta_info"] == nil
}

func failure(m map[string]any) (reason, message string) {
	if code, ok := num(m["status"]); ok {
		reason = "http " + strconv.FormatInt(code, 10)
	}
	switch e := m["error"].(type) {
	case string:
		message = e
	case map[string]any:
		message, _ = e["message"].(string)
		if reason == "" {
			reason, _ = e["code"].(string)
		}
	}
	return reason, message
}

// response fills counts, finish reason and time from a response line: the
// first place that has each, in the order of README.md's shape table.
func response(m map[string]any, r *mRec) {
	meta, usage := obj(m["meta_info"]), obj(m["usage"])
	body := obj(obj(m["response"])["body"])
	places := []map[string]any{m, meta, usage, obj(body["usage"])}
	for _, p := range places {
		if n, ok := num(p["completion_tokens"]); ok && r.completion < 0 {
			r.completion = n
		}
		if n, ok := num(p["prompt_tokens"]); ok && r.prompt < 0 {
			r.prompt = n
		}
		for _, q := range []map[string]any{p, obj(p["completion_tokens_details"])} {
			if n, ok := num(q["reasoning_tokens"]); ok && r.reasoning < 0 {
				r.reasoning = n
			}
		}
	}
	if ids, ok := m["output_ids"].([]any); ok && r.completion < 0 {
		r.completion = int64(len(ids))
	}
	firstChoice := func(v any) string {
		cs, _ := v.([]any)
		if len(cs) == 0 {
			return ""
		}
		s, _ := obj(cs[0])["finish_reason"].(string)
		return s
	}
	switch {
	case m["finish_reason"] != nil:
		r.finish, _ = m["finish_reason"].(string)
	case meta != nil && meta["finish_reason"] != nil:
		r.finish, _ = obj(meta["finish_reason"])["type"].(string)
	case firstChoice(m["choices"]) != "":
		r.finish = firstChoice(m["choices"])
	default:
		r.finish = firstChoice(body["choices"])
	}
	seconds := func(v any) (time.Time, bool) {
		n, ok := v.(json.Number)
		if !ok {
			return time.Time{}, false
		}
		f, err := n.Float64()
		if err != nil {
			return time.Time{}, false
		}
		return time.UnixMilli(int64(f*1000 + 0.5)), true
	}
	if s, ok := m["finished_at"].(string); ok {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err == nil {
			r.own = tm
			return
		}
	}
	if tm, ok := seconds(meta["response_sent_to_client_ts"]); ok {
		r.own = tm
	} else if tm, ok := seconds(m["created"]); ok {
		r.own = tm
	}
}

func sortedIDs[V any](m map[string]V) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func names(m map[string]*mDataset) []string { return sortedIDs(m) }

// nearestRank is the p-th percentile (p in percent) of sorted values: the
// smallest value with at least p% of the values at or below it.
func nearestRank(sorted []int64, p int) any {
	if len(sorted) == 0 {
		return nil
	}
	rank := (p*len(sorted) + 99) / 100 // ceil(p*n/100), in integers
	return sorted[rank-1]
}

// norm turns a cell into a comparable value: integers as int64, Fixed as
// its text, strings and nil as they are.
func norm(v any) any {
	switch x := v.(type) {
	case uint64:
		return int64(x)
	case int:
		return int64(x)
	case query.Fixed:
		return x.String()
	}
	return v
}

func normRow(row []any) []any {
	out := make([]any, len(row))
	for i, v := range row {
		out[i] = norm(v)
	}
	return out
}

func fixed(v float64, prec int) string { return query.Fixed{V: v, Prec: prec}.String() }

// copyTree copies the fixture root into a temporary directory, for tests
// that change files.
func copyTree(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

func answer(t *testing.T, db query.Source, now time.Time, args ...string) *query.Result {
	t.Helper()
	q, err := query.Parse(args)
	if err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	r, err := query.Answer(db, q, now)
	if err != nil {
		t.Fatalf("Answer(%q): %v", args, err)
	}
	return r
}

func answerErr(t *testing.T, db query.Source, args ...string) error {
	t.Helper()
	q, err := query.Parse(args)
	if err != nil {
		t.Fatalf("Parse(%q): %v", args, err)
	}
	r, err := query.Answer(db, q, time.Now())
	if err == nil {
		t.Fatalf("Answer(%q) = %+v, want an error", args, r)
	}
	return err
}

func checkRows(t *testing.T, what string, got *query.Result, cols []string, want [][]any) {
	t.Helper()
	if strings.Join(got.Columns, ",") != strings.Join(cols, ",") {
		t.Errorf("%s columns %q, want %q", what, got.Columns, cols)
	}
	if len(got.Rows) != len(want) {
		t.Errorf("%s: %d rows, want %d:\n got %v\nwant %v", what, len(got.Rows), len(want), got.Rows, want)
		return
	}
	for i := range want {
		if g := normRow(got.Rows[i]); !reflect.DeepEqual(g, want[i]) {
			t.Errorf("%s row %d:\n got %v\nwant %v", what, i, g, want[i])
		}
	}
}
