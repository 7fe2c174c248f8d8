// Tests of the command line as a whole: exit codes, --db and $GENDEX_DB,
// an interrupt, and the built binary run as a user runs it.
package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
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
	bin := gendexBinary(t)
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
