package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"gendex/store"
)

func TestExitCodes(t *testing.T) {
	t.Parallel()
	db := ingested(t)
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string // must be in stderr
	}{
		{"no command", nil, 2, "no command"},
		{"unknown command", []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{"unknown command after --db", []string{"--db", db, "status"}, 2, `unknown command "status"`},
		{"unknown global flag", []string{"--verbose", "query", "progress"}, 2, "verbose"},
		{"global --db without a value", []string{"--db"}, 2, "db"},
		{"unknown ingest flag", []string{"--db", db, "ingest", "--bogus", root}, 2, "bogus"},
		{"ingest without a path", []string{"--db", db, "ingest"}, 2, "PATH"},
		{"ingest bad --stage", []string{"--db", db, "ingest", "--stage", "cooked", brokenRaw}, 2, "cooked"},
		{"query without a question", []string{"--db", db, "query"}, 2, "question"},
		{"unknown question", []string{"--db", db, "query", "progres"}, 2, "progres"},
		{"unknown query flag", []string{"--db", db, "query", "progress", "--bogus"}, 2, "bogus"},
		{"bad format", []string{"--db", db, "query", "progress", "--format", "xml"}, 2, "xml"},
		{"bad window", []string{"--db", db, "query", "throughput", "--window", "100ms"}, 2, "100ms"},
		{"missing without dataset", []string{"--db", db, "query", "missing"}, 2, "missing DATASET"},
		{"query --db without a file", []string{"query", "progress", "--db"}, 2, "--db"},
		{"help", []string{"help"}, 0, ""},
		{"--help", []string{"--help"}, 0, ""},
		{"query ok", []string{"--db", db, "query", "progress"}, 0, ""},
		{"unknown dataset", []string{"--db", db, "query", "progress", "gamma"}, 3, "alpha, beta, clock"},
		{"missing of a dataset without prompts", []string{"--db", db, "query", "missing", "beta"}, 1, "prompts"},
		{"show unknown id", []string{"--db", db, "query", "show", "alpha", "nope"}, 3, `"nope"`},
		{"ingest a path that does not exist", []string{"--db", db, "ingest", filepath.Join(t.TempDir(), "nothing")}, 1, "nothing"},
		{"ingest a folder without stage files", []string{"--db", db, "ingest", t.TempDir()}, 1, "no prompts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := gendex(t, testEnv(nil), tc.args...)
			if r.code != tc.code {
				t.Errorf("gendex %q: exit %d, want %d\n%s", tc.args, r.code, tc.code, r)
			}
			if !strings.Contains(r.stderr, tc.stderr) {
				t.Errorf("gendex %q: stderr does not hold %q\n%s", tc.args, tc.stderr, r)
			}
			if tc.code != 0 && !strings.HasPrefix(r.stderr, "gendex: ") && !strings.Contains(r.stderr, "\ngendex: ") {
				t.Errorf("gendex %q: stderr has no 'gendex: ' message\n%s", tc.args, r)
			}
			if tc.code == 2 && r.stdout != "" {
				t.Errorf("gendex %q: a usage error wrote to stdout\n%s", tc.args, r)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	r := mustGendex(t, testEnv(nil), "help")
	for _, s := range []string{"ingest", "query", "progress", "throughput", "missing DATASET", "show DATASET ID", "--db", "GENDEX_DB"} {
		if !strings.Contains(r.stdout, s) {
			t.Errorf("help does not mention %q:\n%s", s, r.stdout)
		}
	}
	// Without a command the usage goes to stderr, not into piped data.
	if r := gendex(t, testEnv(nil)); r.stdout != "" || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("no command: usage should go to stderr\n%s", r)
	}
}

// TestCommandHelp: for every command in the table, 'gendex help NAME',
// 'gendex NAME --help' and 'gendex NAME -h' print the same help to stdout
// (its usage lines and summary from the table; 'gendex help NAME' then
// README's section, when NAME is a help topic too) and exit 0; a usage
// error of that command points at 'gendex help NAME'.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, cmd := range commands {
		t.Run(cmd.Name, func(t *testing.T) {
			r := mustGendex(t, testEnv(nil), "help", cmd.Name)
			// Help wraps its lines within 80 columns (TestHelpFitsEighty).
			words := strings.Join(strings.Fields(r.stdout), " ")
			if want := "usage: gendex " + cmd.Usage[0] + " "; !strings.HasPrefix(words, want) || !strings.Contains(words, " "+cmd.Summary+" ") || r.stderr != "" {
				t.Errorf("help %s: want stdout starting with %q and holding the summary\n%s", cmd.Name, want, r)
			}
			for _, h := range []string{"--help", "-h"} {
				if r2 := mustGendex(t, testEnv(nil), cmd.Name, h); r2.stdout != commandHelp(t, cmd.Name, r.stdout) {
					t.Errorf("%s %s differs from help %s\n%s", cmd.Name, h, cmd.Name, r2)
				}
			}
			if cmd.Name == "help" {
				return
			}
			u := gendex(t, testEnv(nil), cmd.Name, "--bogus")
			if u.code != 2 || !strings.Contains(u.stderr, "Run 'gendex help "+cmd.Name+"' for usage.") {
				t.Errorf("%s --bogus: want exit 2 pointing at 'gendex help %s'\n%s", cmd.Name, cmd.Name, u)
			}
		})
	}
	if r := gendex(t, testEnv(nil), "help", "frobnicate"); r.code != 2 || !strings.Contains(r.stderr, "Run 'gendex help' for usage.") {
		t.Errorf("help of an unknown command: want exit 2 pointing at 'gendex help'\n%s", r)
	}
}

func TestIngestInvalidLines(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "g.db")
	r := gendex(t, testEnv(nil), "--db", db, "ingest", brokenRaw)
	if r.code != 1 || !errors.Is(r.err, errSkipped) {
		t.Fatalf("ingest of a file with invalid lines: exit %d (%v), want 1\n%s", r.code, r.err, r)
	}
	abs, _ := filepath.Abs(brokenRaw)
	for _, line := range []string{":2: ", ":3: ", ":4: "} { // torn JSON, not JSON, no id
		if !strings.Contains(r.stderr, abs+line) {
			t.Errorf("stderr does not point at %s%s\n%s", abs, line, r)
		}
	}
	for _, line := range []string{":1: ", ":5: "} {
		if strings.Contains(r.stderr, abs+line) {
			t.Errorf("stderr blames the good line %s%s\n%s", abs, line, r)
		}
	}
	if !strings.Contains(r.stderr, "3 lines were skipped") {
		t.Errorf("stderr does not count the skipped lines\n%s", r)
	}
	// The rest is indexed: r1 and r3 (dataset "bad", from the folder name).
	q := mustGendex(t, testEnv(nil), "--db", db, "query", "datasets", "--format", "csv", "--no-header")
	if q.stdout != "bad,1,0,2,0,0,0,0\n" {
		t.Errorf("datasets after a partial ingest = %q, want bad with 2 responses", q.stdout)
	}
	// progress and tokens say that 3 lines were left out, in every format.
	tty := testEnv(nil)
	tty.StdoutTTY = true
	golden(t, "tokens-skipped.table.golden", mustGendex(t, tty, "--db", db, "query", "tokens").stdout)
	if q := mustGendex(t, testEnv(nil), "--db", db, "query", "progress", "--no-header"); q.stdout != "bad\t\t2\t0\t0\t\t0\t2\t\t1\t0\t0\t0\t\t\t3\t\n" { // answered, failed and no_prompt unknown: no prompts
		t.Errorf("progress TSV after a partial ingest = %q, want 3 skipped", q.stdout)
	}
	q = mustGendex(t, testEnv(nil), "--db", db, "query", "tokens", "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(q.stdout), &rows); err != nil || len(rows) != 1 || rows[0]["completion_tokens"] != 40.0 {
		t.Errorf("tokens after a partial ingest = %s (%v), want 40 completion tokens (10 + 30)", q.stdout, err)
	}
}

func TestIngestSingleFileWithDatasetAndStage(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "g.db")
	file := filepath.Join(t.TempDir(), "some_output.jsonl")
	if err := os.WriteFile(file, []byte(`{"id":"x1","completion_tokens":3}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The name says no stage: it must be given.
	if r := gendex(t, testEnv(nil), "--db", db, "ingest", file); r.code != 1 || !strings.Contains(r.stderr, "--stage") {
		t.Errorf("ingest of an unnamed file without --stage: want exit 1 and a hint about --stage\n%s", r)
	}
	mustGendex(t, testEnv(nil), "--db", db, "ingest", file, "--dataset", "mine", "--stage", "raw")
	q := mustGendex(t, testEnv(nil), "--db", db, "query", "datasets", "--no-header")
	if q.stdout != "mine\t1\t0\t1\t0\t0\t0\t0\n" {
		t.Errorf("datasets = %q, want mine with one response", q.stdout)
	}
}

func TestIngestTwiceIsUnchanged(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "g.db")
	files := 0
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			files++
		}
		return nil
	})
	first := mustGendex(t, testEnv(nil), "--db", db, "ingest", root)
	if strings.Contains(first.stderr, " 0 new records") || !strings.Contains(first.stderr, "from 7 files (0 unchanged") || files != 7 {
		t.Errorf("first ingest (%d files):\n%s", files, first)
	}
	before := mustGendex(t, testEnv(nil), "--db", db, "query", "progress").stdout
	second := mustGendex(t, testEnv(nil), "--db", db, "ingest", root)
	if !strings.Contains(second.stderr, "indexed 0 new records from 7 files (7 unchanged, 0 B read)") {
		t.Errorf("second ingest of unchanged files:\n%s", second)
	}
	if after := mustGendex(t, testEnv(nil), "--db", db, "query", "progress").stdout; after != before {
		t.Errorf("a second ingest changed the answers:\n%s\n%s", before, after)
	}
}

func TestDBFlagPlacesAndEnvironment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name           string
		vars           map[string]string
		ingest, query  []string
		wantFile       string
		otherFilesNone []string
	}{
		{"global --db", nil,
			[]string{"--db", filepath.Join(dir, "a.db"), "ingest", root},
			[]string{"--db", filepath.Join(dir, "a.db"), "query", "datasets"}, "a.db", nil},
		{"--db after the command", nil,
			[]string{"ingest", root, "--db", filepath.Join(dir, "b.db")},
			[]string{"query", "datasets", "--db", filepath.Join(dir, "b.db")}, "b.db", nil},
		{"--db= between command and arguments", nil,
			[]string{"ingest", "--db=" + filepath.Join(dir, "c.db"), root},
			[]string{"query", "--db=" + filepath.Join(dir, "c.db"), "datasets"}, "c.db", nil},
		{"$GENDEX_DB", map[string]string{"GENDEX_DB": filepath.Join(dir, "d.db")},
			[]string{"ingest", root},
			[]string{"query", "datasets"}, "d.db", nil},
		{"--db wins over $GENDEX_DB", map[string]string{"GENDEX_DB": filepath.Join(dir, "not.db")},
			[]string{"--db", filepath.Join(dir, "e.db"), "ingest", root},
			[]string{"query", "datasets", "--db", filepath.Join(dir, "e.db")}, "e.db", []string{"not.db"}},
		{"command --db wins over global --db", nil,
			[]string{"--db", filepath.Join(dir, "nor.db"), "ingest", "--db", filepath.Join(dir, "f.db"), root},
			[]string{"--db", filepath.Join(dir, "nor.db"), "query", "datasets", "--db", filepath.Join(dir, "f.db")}, "f.db", []string{"nor.db"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := testEnv(tc.vars)
			mustGendex(t, env, tc.ingest...)
			if _, err := os.Stat(filepath.Join(dir, tc.wantFile)); err != nil {
				t.Fatalf("the index is not at %s: %v", tc.wantFile, err)
			}
			for _, f := range tc.otherFilesNone {
				if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
					t.Errorf("%s was created", f)
				}
			}
			q := mustGendex(t, env, tc.query...)
			if !strings.HasPrefix(q.stdout, "dataset\tfiles\t") || strings.Count(q.stdout, "\n") != 4 {
				t.Errorf("query datasets:\n%s", q)
			}
		})
	}
}

// TestTakeDB: every spelling of --db, before or after the command's name,
// goes through the one parser: the command's wins over the global one,
// both over $GENDEX_DB, and a --db after "--" is an argument.
func TestTakeDB(t *testing.T) {
	t.Parallel()
	env := testEnv(map[string]string{"GENDEX_DB": "env.db"})
	for _, tc := range []struct {
		args    []string
		db      string
		cmdArgs []string
	}{
		{[]string{"query", "progress"}, "env.db", []string{"progress"}},
		{[]string{"--db", "a.db", "query", "progress"}, "a.db", []string{"progress"}},
		{[]string{"-db=a.db", "query", "progress"}, "a.db", []string{"progress"}},
		{[]string{"query", "progress", "-db", "b.db"}, "b.db", []string{"progress"}},
		{[]string{"query", "--db=b.db", "progress"}, "b.db", []string{"progress"}},
		{[]string{"--db", "a.db", "query", "--db", "b.db", "progress"}, "b.db", []string{"progress"}},
		{[]string{"query", "--db", "a.db", "progress", "--db", "b.db"}, "b.db", []string{"progress"}},
		{[]string{"query", "show", "d", "--", "--db", "x"}, "env.db", []string{"show", "d", "--", "--db", "x"}},
	} {
		global, name, rest := splitCommand(tc.args)
		globalDB, _, err1 := takeDB(global)
		cmdDB, rest, err2 := takeDB(rest)
		if err1 != nil || err2 != nil || name != "query" {
			t.Errorf("%q: command %q, errors %v, %v", tc.args, name, err1, err2)
			continue
		}
		if got := dbPath(env, cmdDB, globalDB); got != tc.db || !reflect.DeepEqual(rest, tc.cmdArgs) {
			t.Errorf("%q: --db %q, arguments %q; want %q, %q", tc.args, got, rest, tc.db, tc.cmdArgs)
		}
	}
}

func TestDefaultDBIsInTheWorkingDirectory(t *testing.T) {
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	mustGendex(t, testEnv(nil), "ingest", abs)
	if _, err := os.Stat(filepath.Join(dir, "gendex.db")); err != nil {
		t.Fatalf("no ./gendex.db after ingest without --db: %v", err)
	}
	mustGendex(t, testEnv(nil), "query", "progress")
}

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

func TestQueryMissingIDs(t *testing.T) {
	t.Parallel()
	db := ingested(t)
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "missing", "alpha", "--format", "tsv", "--no-header")
	var ids []string
	for _, l := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		f := strings.Split(l, "\t")
		ids = append(ids, f[len(f)-1])
	}
	if want := []string{"B5_text-0000001", "B6_chat-0000001", "B7_sharegpt-0000001"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("missing alpha ids %q, want %q\n%s", ids, want, r)
	}
	// show prints the stored line as it is, whatever the format.
	r = mustGendex(t, testEnv(nil), "--db", db, "query", "show", "alpha", "B5_text-0000001", "--format", "json")
	if r.stdout != `{"id":"B5_text-0000001","text":"Write a haiku about queues.","sampling_params":{"temperature":0.6,"top_p":0.95}}`+"\n" {
		t.Errorf("show = %q", r.stdout)
	}
}

// The story: 10,000 prompts, 9,998 tokenized records, and nobody could say
// which two. `gendex query missing DS --no-header` must be pipeable as ids.
func TestQueryMissingPrintsBareIDs(t *testing.T) {
	db := ingested(t)
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "missing", "alpha", "--format", "tsv", "--no-header")
	if want := "B5_text-0000001\nB6_chat-0000001\nB7_sharegpt-0000001\n"; r.stdout != want {
		t.Errorf("missing --no-header:\n got %q\nwant %q", r.stdout, want)
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

// A one-shot ingest of a file whose last line has no newline (a writer may
// still be writing it): README, ingest, "Bad input": the complete line is
// indexed, the torn one is not (half a line is never indexed), and the exit
// status is 1 because a line was left out.
func TestIngestLastLineWithoutNewline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "ds", "raw_responses.jsonl")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte(`{"id":"a","completion_tokens":1}`+"\n"+`{"id":"b","completion_tokens":2}`), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "g.db")
	r := gendex(t, testEnv(nil), "--db", db, "ingest", dir)
	if r.code != 1 || !strings.Contains(r.stderr, file+":2:") {
		t.Errorf("ingest of a file with a torn last line: want exit 1 and a warning at line 2\n%s", r)
	}
	// dataset, files, prompts, raw, tokenized, errors, turns, excluded: one raw record.
	if q := mustGendex(t, testEnv(nil), "--db", db, "query", "datasets", "--no-header"); q.stdout != "ds\t1\t0\t1\t0\t0\t0\t0\n" {
		t.Errorf("the index holds %q; want exactly one raw record", q.stdout)
	}
	if q := gendex(t, testEnv(nil), "--db", db, "query", "show", "ds", "a"); q.code != 0 || !strings.Contains(q.stdout, `"completion_tokens":1`) {
		t.Errorf("the complete line is not indexed:\n%s", q)
	}
	if q := gendex(t, testEnv(nil), "--db", db, "query", "show", "ds", "b"); q.code != exitNotFound || !strings.Contains(q.stderr, `no record with id "b"`) {
		t.Errorf("the torn line is indexed:\n%s", q)
	}
}

func TestIngestInterrupted(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "g.db")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var stderr bytes.Buffer
	env := testEnv(nil)
	env.Stderr = &stderr
	err := run(ctx, env, []string{"--db", db, "ingest", root})
	if code := exitCode(&stderr, err); code != 130 || !strings.Contains(stderr.String(), "interrupted") {
		t.Errorf("interrupted ingest: exit %d (%v), want 130\n%s", code, err, stderr.String())
	}
	// What was read before the interrupt is committed, and a new ingest finishes the job.
	mustGendex(t, testEnv(nil), "--db", db, "ingest", root)
	if got := mustGendex(t, testEnv(nil), "--db", db, "query", "datasets", "--no-header").stdout; strings.Count(got, "\n") != 3 {
		t.Errorf("datasets after resuming: %q", got)
	}
}

// ingest --follow picks up appended lines, completed lines and new
// datasets until it is interrupted.
func TestIngestFollow(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the follow loop; skipped with -short")
	}
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "g.db")
	data := filepath.Join(dir, "data")
	one := filepath.Join(data, "one", "raw_responses.jsonl")
	two := filepath.Join(data, "two", "raw_responses.jsonl")
	os.MkdirAll(filepath.Dir(one), 0o755)
	os.WriteFile(one, []byte(`{"id":"x1","completion_tokens":1}`+"\n"), 0o644)
	appendTo := func(path, s string) {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Error(err)
			return
		}
		f.WriteString(s)
		f.Close()
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	env := testEnv(nil)
	env.Stderr = &stderr
	done := make(chan error, 1)
	go func() { done <- run(ctx, env, []string{"--db", db, "ingest", "--follow", data}) }()

	// Each step waits until the running ingest, asked through its socket,
	// has indexed what the step before wrote.
	tokens := func() string {
		r := gendex(t, testEnv(nil), "--db", db, "query", "tokens", "--format", "csv", "--no-header")
		return r.stdout
	}
	waitFor(t, 10*time.Second, "x1 indexed", func() bool { return strings.HasPrefix(tokens(), "one,1,") })
	appendTo(one, `{"id":"x2","completion_tokens":2}`+"\n"+`{"id":"x3","compl`) // x3 is still being written
	os.MkdirAll(filepath.Dir(two), 0o755)
	appendTo(two, `{"id":"y1","completion_tokens":7}`+"\n")
	waitFor(t, 10*time.Second, "x2 and the new dataset indexed", func() bool {
		got := tokens()
		return strings.HasPrefix(got, "one,2,,3,") && strings.Contains(got, "\ntwo,1,,7,")
	})
	appendTo(one, `etion_tokens":3}`+"\n")
	waitFor(t, 10*time.Second, "x3 indexed once completed", func() bool { return strings.HasPrefix(tokens(), "one,3,,6,") })
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("ingest --follow did not stop after the interrupt")
	}
	if code := exitCode(&stderr, err); code != 0 {
		t.Fatalf("ingest --follow ended with exit %d: %v\n%s", code, err, stderr.String())
	}
	got := mustGendex(t, testEnv(nil), "--db", db, "query", "tokens", "--format", "csv", "--no-header").stdout
	if !strings.HasPrefix(got, "one,3,,6,,2.0,") || !strings.Contains(got, "\ntwo,1,,7,,7.0,") { // reasoning unknown
		t.Errorf("after --follow, tokens:\n%s\nstderr:\n%s", got, stderr.String())
	}
}

func TestInterrupted(t *testing.T) {
	t.Parallel()
	if code := exitCode(&bytes.Buffer{}, context.Canceled); code != 130 {
		t.Errorf("exitCode(context.Canceled) = %d, want 130", code)
	}
	var stderr bytes.Buffer
	if code := exitCode(&stderr, nil); code != 0 || stderr.Len() != 0 {
		t.Errorf("exitCode(nil) = %d with %q", code, stderr.String())
	}
}

// TestBinary builds the real binary and runs it as a user would.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := gendexBinary(t) // before t.Parallel: see gendexBinary
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "g.db")

	code, out, errOut := runGendex(t, bin, "", "--db", db, "ingest", root)
	if code != 0 || out != "" || !strings.Contains(errOut, "indexed ") {
		t.Fatalf("gendex ingest: exit %d\nstdout %q\nstderr %s", code, out, errOut)
	}
	code, out, errOut = runGendex(t, bin, "", "--db", db, "query", "progress", "--format", "json")
	if code != 0 {
		t.Fatalf("gendex query progress: exit %d\n%s", code, errOut)
	}
	var rows []struct {
		Dataset  string   `json:"dataset"`
		Prompts  *int     `json:"prompts"`
		Raw      int      `json:"raw"`
		DonePct  *float64 `json:"done_pct"`
		Missing  *int     `json:"missing_raw"`
		Errors   int      `json:"errors"`
		TokMiss  int      `json:"missing_tokenized"`
		TokCount int      `json:"tokenized"`
	}
	decodeJSON(t, out, &rows)
	if len(rows) != 3 || rows[0].Dataset != "alpha" || rows[0].Prompts == nil || *rows[0].Prompts != 12 ||
		rows[0].Raw != 7 || rows[0].DonePct == nil || *rows[0].DonePct != 75 || rows[1].Prompts != nil || rows[2].Raw != 9 {
		t.Errorf("progress json:\n%s", out)
	}
	// Piped stdout (not a terminal): TSV with a header.
	code, out, _ = runGendex(t, bin, "", "--db", db, "query", "datasets")
	if code != 0 || !strings.HasPrefix(out, "dataset\tfiles\tprompts\traw\ttokenized\terrors\tturns\texcluded\n") {
		t.Errorf("piped query is not TSV with a header: exit %d\n%s", code, out)
	}
	// Exit statuses of the real process.
	if code, _, errOut = runGendex(t, bin, "", "frobnicate"); code != 2 {
		t.Errorf("unknown command: exit %d, want 2\n%s", code, errOut)
	}
	if code, _, errOut = runGendex(t, bin, "", "--db", filepath.Join(dir, "none.db"), "query", "progress"); code != 4 {
		t.Errorf("query without an index: exit %d, want 4\n%s", code, errOut)
	}
	if code, _, errOut = runGendex(t, bin, "", "--db", db, "ingest", brokenRaw); code != 1 || !strings.Contains(errOut, "raw_responses.jsonl:3:") {
		t.Errorf("ingest of invalid lines: exit %d, want 1 with file:line\n%s", code, errOut)
	}
}
