// Tests of `gendex query` on the fixture index: formats (TTY, TSV, JSON),
// flag order, no index, an index a writer holds.
package main

import (
	"encoding/json"
	"errors"
	"gendex/store"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestQueryFormatFollowsTTY(t *testing.T) {
	t.Parallel()
	db := ingested(t)
	piped := testEnv(nil)
	tty := testEnv(nil)
	tty.StdoutTTY = true

	tsv := mustGendex(t, piped, "--db", db, "query", "progress").stdout
	golden(t, "progress.tsv.golden", tsv)
	ls := strings.Split(strings.TrimSuffix(tsv, "\n"), "\n")
	if ls[0] != "dataset\tprompts\traw\ttokenized\terrors\tmissing_raw\texcluded\tmissing_tokenized\tdone_pct\ttruncated\tredo\tstale\ttool_stops\tanswered\tfailed\tskipped\tno_prompt" || len(ls) != 4 {
		t.Errorf("piped output is not TSV with a header and one line per dataset:\n%s", tsv)
	}
	for _, l := range ls {
		if strings.Count(l, "\t") != 16 || strings.HasPrefix(l, "TOTAL") {
			t.Errorf("TSV line %q: want 17 fields and no TOTAL", l)
		}
	}
	// alpha: 12 prompts (the lines of its prompts file); beta: no prompts file, so empty cells.
	if want := "alpha\t" + strconv.Itoa(lines(t, filepath.Join(root, "alpha", "prompts.jsonl"))) + "\t"; !strings.HasPrefix(ls[1], want) {
		t.Errorf("alpha line %q does not start with %q", ls[1], want)
	}
	if !strings.HasPrefix(ls[2], "beta\t\t"+strconv.Itoa(lines(t, filepath.Join(root, "beta", "raw_responses.jsonl")))+"\t") {
		t.Errorf("beta line %q: want an empty prompts cell and 11 responses", ls[2])
	}

	table := mustGendex(t, tty, "--db", db, "query", "progress").stdout
	golden(t, "progress.table.golden", table)
	if !strings.Contains(table, "TOTAL") || strings.Contains(table, "\t") || !strings.Contains(table, "unknown") {
		t.Errorf("on a terminal the output is a table with TOTAL and unknowns:\n%s", table)
	}
	// --format overrides the terminal either way.
	if got := mustGendex(t, tty, "--db", db, "query", "progress", "--format", "tsv").stdout; got != tsv {
		t.Errorf("--format tsv on a terminal:\n%s", got)
	}
	if got := mustGendex(t, piped, "--db", db, "query", "progress", "--format=table").stdout; got != table {
		t.Errorf("--format table when piped:\n%s", got)
	}
	golden(t, "tokens.table.golden", mustGendex(t, tty, "--db", db, "query", "tokens").stdout)
	golden(t, "finish.csv.golden", mustGendex(t, piped, "--db", db, "query", "finish", "--format", "csv").stdout)
}

// `query --db FILE progress` works; the question's own flags should be
// accepted in the same place.
func TestQueryFlagsBeforeTheQuestion(t *testing.T) {
	t.Parallel()
	db := ingested(t)
	for _, args := range [][]string{
		{"--db", db, "query", "--format", "json", "progress"},
		{"query", "--format=json", "--db", db, "progress"},
		{"--db", db, "query", "--no-header", "--format", "json", "progress", "alpha"},
	} {
		r := gendex(t, testEnv(nil), args...)
		if r.code != 0 || !json.Valid([]byte(r.stdout)) {
			t.Errorf("gendex %q:\n%s", args, r)
		}
	}
}

func TestQueryJSON(t *testing.T) {
	t.Parallel()
	db := ingested(t)
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "progress", "--format", "json")
	var rows []map[string]any
	decodeJSON(t, r.stdout, &rows)
	if len(rows) != 3 {
		t.Fatalf("%d objects, want one per dataset (no TOTAL):\n%s", len(rows), r.stdout)
	}
	want := map[string]any{"dataset": "alpha", "prompts": 12.0, "raw": 7.0, "tokenized": 3.0, "errors": 2.0,
		"missing_raw": 3.0, "excluded": 0.0, "missing_tokenized": 5.0, "done_pct": 75.0, "truncated": 1.0, "redo": 0.0, "stale": 0.0, "tool_stops": 0.0, "answered": 7.0, "failed": 2.0, "skipped": 0.0, "no_prompt": 0.0}
	if !reflect.DeepEqual(rows[0], want) {
		t.Errorf("alpha = %v, want %v", rows[0], want)
	}
	if rows[1]["dataset"] != "beta" || rows[1]["prompts"] != nil || rows[1]["done_pct"] != nil {
		t.Errorf("beta = %v, want prompts and done_pct null", rows[1])
	}
	if v, ok := rows[1]["prompts"]; !ok || v != nil {
		t.Errorf("beta prompts must be present as null: %v", rows[1])
	}

	// errors: the message is neither HTML-escaped nor cut at the tab.
	r = mustGendex(t, testEnv(nil), "--db", db, "query", "errors", "alpha", "--format", "json")
	var errs []map[string]string
	decodeJSON(t, r.stdout, &errs)
	if len(errs) != 2 || errs[0]["message"] != "prompt is <too> long & \"bad\"\tsee docs" || strings.Contains(r.stdout, `\u003c`) {
		t.Errorf("errors json:\n%s", r.stdout)
	}
	abs, _ := filepath.Abs(filepath.Join(root, "alpha", "errors.jsonl"))
	if errs[0]["source"] != abs+":2" {
		t.Errorf("error source %q, want %s:2", errs[0]["source"], abs)
	}

	// Throughput uses the environment's clock (10:00:00.5: what finished
	// in that second so far counts, over 30.5 s).
	r = mustGendex(t, testEnv(nil), "--db", db, "query", "throughput", "clock", "--format", "json")
	golden(t, "throughput.json.golden", r.stdout)
	var tp []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &tp); err != nil || len(tp) != 1 || tp[0]["records"] != 7.0 || tp[0]["completion_tokens"] != 83.0 || tp[0]["window_s"] != 30.5 {
		t.Errorf("throughput clock at %v: %s (%v), want 7 records and 83 tokens over 30.5 s", clockNow, r.stdout, err)
	}
}

func TestQueryWithoutIndex(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "none.db")
	r := gendex(t, testEnv(nil), "--db", db, "query", "progress")
	if r.code != 4 {
		t.Errorf("query without an index: exit %d, want 4\n%s", r.code, r)
	}
	for _, s := range []string{db, "gendex ingest"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr does not hold %q\n%s", s, r)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("query created %s", db)
	}
}

func TestQueryWhileLocked(t *testing.T) {
	t.Parallel()
	db := ingested(t)
	// Another writer (gen, ingest --follow) holds the file read-write. A
	// second handle in the same process conflicts like another process does.
	w, err := store.Open(db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	// Without a timeout, bbolt waits for the lock for ever: each wait
	// below must end, with ErrLocked (30 s is a hang detector, far past
	// the timeouts, not a measure of speed).
	start := time.Now()
	_, err = store.Open(db, store.Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) || time.Since(start) > 30*time.Second {
		t.Errorf("store.Open read-only with Timeout 100ms after %v: %v, want ErrLocked", time.Since(start), err)
	}

	start = time.Now()
	r := gendex(t, testEnv(nil), "--db", db, "query", "progress")
	took := time.Since(start)
	if !errors.Is(r.err, store.ErrLocked) || r.code != 1 {
		t.Errorf("query on a locked index: exit %d, %v; want exit 1 with store.ErrLocked\n%s", r.code, r.err, r)
	}
	if took > store.DefaultTimeout+30*time.Second {
		t.Errorf("query on a locked index took %v: the lock timeout %v was not applied", took, store.DefaultTimeout)
	}
	if !strings.Contains(r.stderr, "in use") || !strings.Contains(r.stderr, db) || r.stdout != "" {
		t.Errorf("stderr should say the index is in use, and name it\n%s", r)
	}
	// A second writer is refused the same way.
	r = gendex(t, testEnv(nil), "--db", db, "ingest", root)
	if !errors.Is(r.err, store.ErrLocked) || r.code != 1 || !strings.Contains(r.stderr, "in use") {
		t.Errorf("ingest on a locked index: exit %d, %v; want exit 1 with store.ErrLocked\n%s", r.code, r.err, r)
	}
}

// TestListSortAccept: query list --sort accept lists the answers with the
// lowest accept length first (completion tokens per verify step, as each
// answer line's spec_verify_ct says), the --limit worst; another --sort
// is a usage error.
func TestListSortAccept(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	ds := filepath.Join("demo", "B2_text")
	p.mustRun("gen", "--server", "sim", "--sim-spec-draft-tokens", "4", "--max-new-tokens", "32", ds)
	type answer struct {
		id     string
		accept float64
	}
	var all []answer
	eachJSONLine(t, filepath.Join(p.dir, ds, "raw_responses.jsonl"), func(l []byte) {
		var a struct {
			ID               string  `json:"id"`
			CompletionTokens float64 `json:"completion_tokens"`
			Verify           float64 `json:"spec_verify_ct"`
		}
		if err := json.Unmarshal(l, &a); err != nil || a.Verify == 0 {
			t.Fatalf("an answer without spec_verify_ct: %s", l)
		}
		all = append(all, answer{a.ID, math.Round(100*a.CompletionTokens/a.Verify) / 100})
	})
	sort.Slice(all, func(i, j int) bool {
		if all[i].accept != all[j].accept {
			return all[i].accept < all[j].accept
		}
		return all[i].id < all[j].id
	})
	code, out, errOut := runGendex(t, p.bin, p.dir, "query", "list", "B2_text", "--sort", "accept", "--limit", "5", "--format", "json")
	if code != 0 {
		t.Fatalf("query list --sort accept: exit %d\n%s", code, errOut)
	}
	var rows []struct {
		ID     string  `json:"id"`
		Accept float64 `json:"accept_length"`
	}
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 5 {
		t.Fatalf("query list --sort accept --limit 5: %v, %d rows\n%s", err, len(rows), out)
	}
	for i, r := range rows {
		if r.ID != all[i].id || math.Abs(r.Accept-all[i].accept) > 0.011 {
			t.Errorf("row %d: %s at %.2f, want %s at %.2f (the answers by accept length: %v)", i, r.ID, r.Accept, all[i].id, all[i].accept, all[:5])
		}
	}
	if code, errOut := p.run("query", "list", "B2_text", "--sort", "best"); code != 2 || !strings.Contains(errOut, "--sort") {
		t.Errorf("query list --sort best: exit %d, want 2\n%s", code, errOut)
	}
}
