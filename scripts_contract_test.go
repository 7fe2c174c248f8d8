package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gendex/query"
	"gendex/store"
)

// The contract for scripts (README "For scripts"): finish's columns do not
// move with the data, a yes or no is a JSON boolean, the exit status tells
// the kinds of failure apart, and every question's JSON keys and types are
// pinned by a golden file.

// contractIndex returns an index of the query fixture, a dataset whose
// answers end in reasons beyond the fixed ones, two servers' samples (one
// in rotation, one waited for) and a run's events, around clockNow.
func contractIndex(t *testing.T) string {
	t.Helper()
	db := ingested(t)
	more := filepath.Join(t.TempDir(), "more")
	writeTestFile(t, filepath.Join(more, "gamma", "raw_responses.jsonl"), strings.Join([]string{
		`{"id":"g1","text":"a","completion_tokens":3,"finish_reason":"pause_turn","spec_verify_ct":2,"spec_accepted_drafts":1,"spec_proposed_drafts":2,"finished_at":"2026-11-28T09:59:50.000Z","provenance":{"mix":{"temperature":"0:0.5,1:0.5"},"drawn":{"temperature":"0"}}}`,
		`{"id":"g2","text":"b","completion_tokens":3,"finish_reason":"pause_turn","spec_verify_ct":1,"spec_accepted_drafts":0,"spec_proposed_drafts":1,"finished_at":"2026-11-28T09:59:51.000Z","provenance":{"mix":{"temperature":"0:0.5,1:0.5"},"drawn":{"temperature":"0"}}}`,
		`{"id":"g3","text":"c","completion_tokens":3,"finish_reason":"end_turn","finished_at":"2026-11-28T09:59:52.000Z","provenance":{"mix":{"temperature":"0:0.5,1:0.5"},"drawn":{"temperature":"1"}}}`,
		`{"id":"g4","text":"d","completion_tokens":3,"finish_reason":"refusal","finished_at":"2026-11-28T09:59:53.000Z"}`,
		`{"id":"g5","text":"e","completion_tokens":3,"finish_reason":"mystery","finished_at":"2026-11-28T09:59:54.000Z"}`,
		`{"id":"g6","text":"f","completion_tokens":3,"finished_at":"2026-11-28T09:59:55.000Z"}`,
		`{"id":"g7","text":"g","completion_tokens":3,"finish_reason":"unknown","finished_at":"2026-11-28T09:59:56.000Z"}`,
	}, "\n")+"\n")
	mustGendex(t, testEnv(nil), "--db", db, "ingest", more)
	s, err := store.Open(db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := clockNow.Add(-time.Minute).UnixMilli()
	err = s.Update(func(tx *store.Tx) error {
		for i, sec := range []int{-20, -10, -5} {
			at := clockNow.Add(time.Duration(sec) * time.Second).UnixMilli()
			up := &store.ServerSample{Time: at, Up: true, Scraped: true, Run: run, LastSeen: at,
				ClientTokens: int64(1000 * (i + 1)), ClientAnswers: int64(10 * (i + 1)), Retries: int64(i), InBackoff: 1,
				LastError: "HTTP 500 'Failed to parse input'", LastErrorAt: at - 100,
				ClientSpecTokens: int64(300 * (i + 1)), ClientSpecVerify: int64(100 * (i + 1)),
				Limit: 256, InFlight: int64(250 + i)}
			up.Set(store.MetricRunning, 4)
			up.Set(store.MetricPreemptions, float64(3*i))
			up.Set(store.MetricQueued, 2)
			up.Set(store.MetricTokenUsage, 0.5)
			up.Set(store.MetricCacheHitRate, 0.25)
			up.Set(store.MetricGenTokens, float64(1000*(i+1)))
			up.Set(store.MetricAcceptLength, 2.5)
			if err := tx.PutServerSample("http://127.0.0.1:30000", up); err != nil {
				return err
			}
			down := &store.ServerSample{Time: at, Run: run}
			if err := tx.PutServerSample("http://127.0.0.1:30001", down); err != nil {
				return err
			}
		}
		for _, e := range []store.Event{
			{Time: run, Name: "start", Detail: "1 dataset"},
			{Time: run + 1000, Server: "http://127.0.0.1:30001", Name: "down", Detail: "2 requests in flight"},
		} {
			if err := tx.AddEvent(&e); err != nil {
				return err
			}
		}
		// A run that ended (finished) and one that never said so (lost):
		// every key of runs both known and unknown.
		n := int64(4)
		for _, r := range []*store.Run{
			{Start: run - 60000, Pid: 11, Host: "h", Kind: "gen", Command: "gendex gen", State: store.RunFinished, Since: run - 1000,
				End: run - 1000, ToGo: &n, Answers: &n, Errors: &n, LastAnswer: run - 2000, Detail: "done"},
			{Start: run, Pid: 12, Host: "h", Kind: "follow", Command: "gendex ingest --follow", State: store.RunRunning},
		} {
			if err := tx.PutRun(r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestFinishColumnsAreFixed: finish has dataset, records, the five
// canonical reasons (0 when no answer ended so), any other reason seen
// (most common first), and unknown, whatever datasets are asked; a
// provider's word for a canonical reason counts there.
func TestFinishColumnsAreFixed(t *testing.T) {
	t.Parallel()
	db := contractIndex(t)
	fixed := "dataset\trecords\tstop\tlength\ttool_calls\tabort\tcontent_filter"
	for _, tc := range []struct {
		args []string
		head string
	}{
		{[]string{"alpha"}, fixed + "\tunknown"},
		{[]string{"beta"}, fixed + "\tunknown"},
		{[]string{"alpha", "clock"}, fixed + "\tunknown"},
		{nil, fixed + "\tpause_turn\tmystery\tunknown"},
		{[]string{"gamma"}, fixed + "\tpause_turn\tmystery\tunknown"},
	} {
		r := mustGendex(t, testEnv(nil), append([]string{"--db", db, "query", "finish", "--format", "tsv"}, tc.args...)...)
		if head, _, _ := strings.Cut(r.stdout, "\n"); head != tc.head {
			t.Errorf("finish %v: header\n %q\nwant\n %q", tc.args, head, tc.head)
		}
	}
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "finish", "alpha", "gamma", "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v\n%s", err, r)
	}
	alpha := map[string]any{"dataset": "alpha", "records": 7.0, "stop": 4.0, "length": 1.0, "tool_calls": 0.0, "abort": 0.0,
		"content_filter": 0.0, "pause_turn": 0.0, "mystery": 0.0, "unknown": 2.0}
	gamma := map[string]any{"dataset": "gamma", "records": 7.0, "stop": 1.0, "length": 0.0, "tool_calls": 0.0, "abort": 0.0,
		"content_filter": 1.0, "pause_turn": 2.0, "mystery": 1.0, "unknown": 2.0}
	for i, want := range []map[string]any{alpha, gamma} {
		if fmt.Sprint(rows[i]) != fmt.Sprint(want) {
			t.Errorf("finish row %d:\n %v\nwant\n %v", i, rows[i], want)
		}
	}
}

// TestServerUpIsBoolean: query server's up is true or false in JSON (and
// yes or no in TSV, for people).
func TestServerUpIsBoolean(t *testing.T) {
	t.Parallel()
	db := contractIndex(t)
	r := mustGendex(t, testEnv(nil), "--db", db, "query", "server", "--format", "json")
	var rows []map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("%v\n%s", err, r)
	}
	for i, want := range []bool{true, false} {
		if got, ok := rows[i]["up"].(bool); !ok || got != want {
			t.Errorf("server %v: up %#v, want the JSON boolean %v\n%s", rows[i]["server"], rows[i]["up"], want, r.stdout)
		}
	}
	r = mustGendex(t, testEnv(nil), "--db", db, "query", "server", "--format", "tsv", "--no-header")
	for i, want := range []string{"yes", "no"} {
		f := strings.Split(strings.Split(r.stdout, "\n")[i], "\t")
		if len(f) < 2 || f[1] != want {
			t.Errorf("TSV row %d: up %q, want %q\n%s", i, f, want, r.stdout)
		}
	}
}

// TestExitStatusesForScripts: a script tells a usage mistake (2), an
// unknown dataset, id or server (3), a missing or unreadable index (4) and
// a gen run refused before it sent anything (5) apart from other errors (1), by the status alone, from the query
// command, from the shell off a terminal, through a running writer's
// socket and from the real binary.
func TestExitStatusesForScripts(t *testing.T) {
	t.Parallel()
	db := contractIndex(t)
	dir := t.TempDir()
	damaged := filepath.Join(dir, "damaged.db")
	writeTestFile(t, damaged, strings.Repeat("not an index\n", 2000))
	empty := filepath.Join(dir, "empty.db")
	writeTestFile(t, empty, "")
	for _, tc := range []struct {
		name   string
		args   []string
		stdin  string
		code   int
		stderr string
	}{
		{"bad flag", []string{"--db", db, "query", "progress", "--bogus"}, "", 2, "bogus"},
		{"unknown question", []string{"--db", db, "query", "progres"}, "", 2, "progres"},
		{"unknown dataset", []string{"--db", db, "query", "progress", "gama"}, "", 3, `no dataset "gama"`},
		{"unknown dataset of missing", []string{"--db", db, "query", "missing", "gama"}, "", 3, `no dataset "gama"`},
		{"unknown id", []string{"--db", db, "query", "show", "alpha", "nope"}, "", 3, `"nope"`},
		{"unknown server", []string{"--db", db, "query", "server", "http://x:1"}, "", 3, `no server "http://x:1"`},
		{"unknown server of events", []string{"--db", db, "query", "events", "http://x:1"}, "", 3, `no server "http://x:1"`},
		{"drop an unknown dataset", []string{"--db", db, "drop", "gama"}, "", 3, `no dataset "gama"`},
		{"relocate a folder the index does not hold", []string{"--db", db, "relocate", dir, t.TempDir()}, "", 3, "holds no file under"},
		{"no index", []string{"--db", filepath.Join(dir, "none.db"), "query", "progress"}, "", 4, "no index at"},
		{"a folder for an index", []string{"--db", dir, "query", "progress"}, "", 4, "is a folder"},
		{"a damaged index", []string{"--db", damaged, "query", "progress"}, "", 4, "damaged"},
		{"an empty file", []string{"--db", empty, "query", "progress"}, "", 4, "empty"},
		{"the question cannot be answered", []string{"--db", db, "query", "missing", "beta"}, "", 1, "prompts"},
		{"shell: unknown dataset", []string{"--db", db, "shell"}, "progress\nprogress gama\n", 3, `no dataset "gama"`},
		{"shell: no index", []string{"--db", filepath.Join(dir, "none.db"), "shell"}, "progress\n", 4, "no index at"},
		{"shell: a bad line", []string{"--db", db, "shell"}, "progres\n", 1, "progres"},
		{"gen refused before sending", []string{"--db", filepath.Join(dir, "gen.db"), "gen", "--server", "sim", "--sim-tool-calls", toolDataset(t, toolMessagesLine)}, "", 5, "recorded as refused"},
	} {
		env := testEnv(nil)
		env.Stdin = strings.NewReader(tc.stdin)
		r := gendex(t, env, tc.args...)
		if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
			t.Errorf("%s: gendex %q: exit %d, want %d with %q\n%s", tc.name, tc.args, r.code, tc.code, tc.stderr, r)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "none.db")); err == nil {
		t.Error("a question created the index it did not find")
	}

	// Through the socket of a running writer (ingest --follow): the kind
	// crosses it.
	data := filepath.Join(t.TempDir(), "data")
	writeTestFile(t, filepath.Join(data, "one", "raw_responses.jsonl"), `{"id":"x1","completion_tokens":1}`+"\n")
	live := filepath.Join(t.TempDir(), "live.db")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, testEnv(nil), []string{"--db", live, "ingest", "--follow", data}) }()
	waitFor(t, 10*time.Second, "the writer answers", func() bool {
		r := gendex(t, testEnv(nil), "--db", live, "query", "datasets", "--format", "csv", "--no-header")
		return strings.HasPrefix(r.stdout, "one,")
	})
	for _, args := range [][]string{{"progress", "gama"}, {"show", "one", "nope"}} {
		if r := gendex(t, testEnv(nil), append([]string{"--db", live, "query"}, args...)...); r.code != 3 {
			t.Errorf("through the writer, query %q: exit %d, want 3\n%s", args, r.code, r)
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("ingest --follow: %v", err)
	}
}

// TestExitStatusesOfTheBinary: the same statuses from the real process.
func TestExitStatusesOfTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := gendexBinary(t)
	t.Parallel()
	db := ingested(t)
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"--db", db, "query", "progress"}, 0},
		{[]string{"--db", db, "query", "progress", "--format", "xml"}, 2},
		{[]string{"--db", db, "query", "progress", "gama"}, 3},
		{[]string{"--db", filepath.Join(t.TempDir(), "none.db"), "query", "progress"}, 4},
	} {
		if got, _, errOut := runGendex(t, bin, "", tc.args...); got != tc.code {
			t.Errorf("gendex %q: exit %d, want %d\n%s", tc.args, got, tc.code, errOut)
		}
	}
}

// jsonKeyCases ask every question, as --format json, of contractIndex.
// show prints a stored line as it is, so it has no keys of its own.
var jsonKeyCases = [][]string{
	{"progress"}, {"tokens"}, {"throughput"}, {"series"}, {"series", "--servers"}, {"spec"},
	{"missing", "alpha"}, {"missing", "alpha", "--stage", "tokenized"}, {"finish"}, {"stops"}, {"errors"},
	{"mix"}, {"datasets"}, {"files"}, {"shards"}, {"server", "--all-servers"}, {"events"}, {"runs"}, {"list", "alpha"},
	{"list", "alpha", "--stage", "errors"}, {"check", "--max-length", "4"},
}

// TestQueryJSONKeysAndTypes: the keys of every question's JSON, in their
// order (TSV's columns), and the JSON types each takes over the fixture's
// rows, are testdata/cli/json-keys.golden's. A change to them breaks
// scripts: it is made on purpose, with -update, and said in README.
func TestQueryJSONKeysAndTypes(t *testing.T) {
	t.Parallel()
	db := contractIndex(t)
	asked := map[string]bool{"show": true}
	var b strings.Builder
	for _, args := range jsonKeyCases {
		asked[args[0]] = true
		r := mustGendex(t, testEnv(nil), append([]string{"--db", db, "query", "--format", "json"}, args...)...)
		keys, types, err := jsonKeys(r.stdout)
		if err != nil || len(keys) == 0 {
			t.Errorf("query %q: %v (no rows: the fixture must give every question one)\n%s", args, err, r)
			continue
		}
		fmt.Fprintf(&b, "%s:\n", strings.Join(args, " "))
		for _, k := range keys {
			fmt.Fprintf(&b, "  %s: %s\n", k, strings.Join(types[k], "|"))
		}
	}
	for _, name := range query.Names() {
		if !asked[name] {
			t.Errorf("question %q is not in jsonKeyCases: add it (and run -update) so that its keys are pinned too", name)
		}
	}
	golden(t, "json-keys.golden", b.String())
}

// jsonKeys reads a JSON answer: its objects' keys in order (each object
// must have the same) and the JSON types each key takes.
func jsonKeys(answer string) ([]string, map[string][]string, error) {
	dec := json.NewDecoder(strings.NewReader(answer))
	dec.UseNumber()
	if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
		return nil, nil, fmt.Errorf("not an array: %v %v", tok, err)
	}
	var keys []string
	types := map[string][]string{}
	for row := 0; dec.More(); row++ {
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return nil, nil, fmt.Errorf("row %d is not an object: %v %v", row, tok, err)
		}
		var these []string
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, nil, err
			}
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, nil, err
			}
			key := k.(string)
			these = append(these, key)
			ty := "null"
			switch v.(type) {
			case string:
				ty = "string"
			case json.Number:
				ty = "number"
			case bool:
				ty = "boolean"
			case []any, map[string]any:
				ty = "composite"
			}
			if !slices.Contains(types[key], ty) {
				types[key] = append(types[key], ty)
				slices.Sort(types[key])
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, nil, err
		}
		if row == 0 {
			keys = these
		} else if strings.Join(these, ",") != strings.Join(keys, ",") {
			return nil, nil, fmt.Errorf("row %d has keys %v, row 0 %v", row, these, keys)
		}
	}
	return keys, types, nil
}
