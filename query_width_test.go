package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gendex/query"
	"gendex/query/format"
	"gendex/store"
	"gendex/store/terminal"
)

// widths are the terminal widths every table is checked at: a narrow split
// pane, the default terminal, a wide one and a very wide one.
var widths = []int{60, 80, 120, 200}

// serversAndEvents returns an index holding two servers' /metrics samples
// (one with a long last error) and a run's events with long details: what
// query server and query events show.
func serversAndEvents(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "s.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	run := clockNow.Add(-time.Minute).UnixMilli()
	err = db.Update(func(tx *store.Tx) error {
		for i := range 3 {
			at := clockNow.Add(time.Duration(i-3) * 10 * time.Second).UnixMilli()
			s := &store.ServerSample{Time: at, Up: true, Scraped: true, Run: run, LastSeen: at,
				ClientTokens: int64(i) * 9900, ClientAnswers: int64(i) * 99, Retries: int64(i) * 6}
			if i > 0 {
				s.LastError, s.LastErrorAt = "HTTP 500 'Failed to parse input at pos 0: unexpected token'", at-500
			}
			s.Set(store.MetricRunning, 121)
			s.Set(store.MetricQueued, 3)
			s.Set(store.MetricTokenUsage, 0.7)
			s.Set(store.MetricGenTokens, float64(5000+i*10000))
			if err := tx.PutServerSample("http://gpu-node-17.cluster.local:30000", s); err != nil {
				return err
			}
			n := &store.ServerSample{Time: at, Up: true, NoMetrics: true, Run: run, ClientTokens: int64(i) * 5000}
			if err := tx.PutServerSample("http://b:30000", n); err != nil {
				return err
			}
		}
		for _, e := range []store.Event{
			{Time: run, Name: "start", Detail: "2 datasets, 20000 prompts to answer, servers http://gpu-node-17.cluster.local:30000, http://b:30000; api generate, concurrency 128"},
			{Time: run + 5, Server: "http://b:30000", Name: "up", Detail: "ready"},
			{Time: run + 30000, Server: "http://gpu-node-17.cluster.local:30000", Name: "retries", Detail: "12 attempts retried in 10s: 12 HTTP 500 'Failed to parse input at pos 0'"},
		} {
			if err := tx.AddEvent(&e); err != nil {
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

// serversOnOneHost returns an index holding the samples of three servers
// on one host in the last run, and of a dry run's simulator two days
// before (another run, not seen since): the servers of one 8-GPU node.
func serversOnOneHost(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "h.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	run := clockNow.Add(-time.Minute).UnixMilli()
	old := clockNow.Add(-48 * time.Hour).UnixMilli()
	err = db.Update(func(tx *store.Tx) error {
		for i := range 3 {
			at := clockNow.Add(time.Duration(i-3) * 10 * time.Second).UnixMilli()
			for k, port := range []string{"30000", "30001", "30002"} {
				s := &store.ServerSample{Time: at, Up: true, Scraped: true, Run: run, LastSeen: at, ClientTokens: int64(i*(k+1)) * 1000, ClientAnswers: int64(i) * 10}
				s.Set(store.MetricRunning, float64(60+k))
				s.Set(store.MetricQueued, 0)
				s.Set(store.MetricTokenUsage, 0.5)
				s.Set(store.MetricGenTokens, float64(i*(k+1)*1000))
				if err := tx.PutServerSample("http://127.0.0.1:"+port, s); err != nil {
					return err
				}
			}
		}
		return tx.PutServerSample("http://127.0.0.1:40123", &store.ServerSample{Time: old, Up: true, Scraped: true, Run: old, LastSeen: old})
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestTablesFitTheWidth: every question's table, at each of widths, is
// its golden file (testdata/cli/width/QUESTION.WIDTH.golden; -update
// rewrites them) and has no line wider than the width: columns a person
// decides on stay, others are shortened or hidden, free text is cut with
// …. Paths are shown under /data/root, wherever the fixture is.
func TestTablesFitTheWidth(t *testing.T) {
	t.Parallel()
	db, err := store.Open(ingested(t), store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	live, oneHost := serversAndEvents(t), serversOnOneHost(t)
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		os.MkdirAll(filepath.Join("testdata", "cli", "width"), 0o755)
	}
	for _, tc := range []struct {
		name string
		src  query.Source
		args []string
	}{
		{"progress", db, []string{"progress"}},
		{"tokens", db, []string{"tokens"}},
		{"throughput", db, []string{"throughput", "clock"}},
		{"spec", db, []string{"spec"}},
		{"missing", db, []string{"missing", "alpha"}},
		{"missing-tokenized", db, []string{"missing", "alpha", "--stage", "tokenized"}},
		{"finish", db, []string{"finish"}},
		{"errors", db, []string{"errors"}},
		{"datasets", db, []string{"datasets"}},
		{"files", db, []string{"files"}},
		{"server", live, []string{"server"}},
		{"server-one-host", oneHost, []string{"server"}}, // by port; the old dry run's simulator left out
		{"server-one-host-all", oneHost, []string{"server", "--all-servers"}},
		{"events", live, []string{"events"}},
	} {
		q, err := query.Parse(tc.args)
		if err != nil {
			t.Fatal(err)
		}
		res, err := query.Answer(tc.src, q, clockNow)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, row := range res.Rows {
			for j, v := range row {
				if s, ok := v.(string); ok {
					row[j] = strings.ReplaceAll(s, abs, "/data/root")
				}
			}
		}
		for _, w := range widths {
			var b bytes.Buffer
			if err := format.Write(&b, res, format.Options{Format: query.Table, Width: w, Layout: q.Question}); err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
				if n := terminal.Width(l); n > w {
					t.Errorf("%s at %d columns: a line of %d:\n%s", tc.name, w, n, l)
				}
			}
			golden(t, filepath.Join("width", tc.name+"."+strconv.Itoa(w)+".golden"), b.String())
		}
	}
}

// TestQueryFitsColumns: gendex query on a terminal fits the table to its
// width ($COLUMNS here, where stdout is no terminal); TSV and JSON keep
// every column, whatever the width.
func TestQueryFitsColumns(t *testing.T) {
	t.Parallel()
	db := ingested(t)
	wide := testEnv(nil)
	wide.StdoutTTY = true
	narrow := testEnv(map[string]string{"COLUMNS": "60"})
	narrow.StdoutTTY = true
	full := mustGendex(t, wide, "--db", db, "query", "tokens").stdout
	fitted := mustGendex(t, narrow, "--db", db, "query", "tokens").stdout
	if fitted == full {
		t.Fatalf("COLUMNS=60 changed nothing:\n%s", fitted)
	}
	for _, l := range strings.Split(strings.TrimSuffix(fitted, "\n"), "\n") {
		if terminal.Width(l) > 60 {
			t.Errorf("a line of %d columns at 60:\n%s", terminal.Width(l), fitted)
		}
	}
	for _, f := range []string{"tsv", "json", "csv"} {
		a := mustGendex(t, wide, "--db", db, "query", "tokens", "--format", f).stdout
		b := mustGendex(t, narrow, "--db", db, "query", "tokens", "--format", f).stdout
		if a != b || !strings.Contains(b, "unknown_prompt_tokens") {
			t.Errorf("--format %s at 60 columns differs from the full width or lost a column:\n%s", f, b)
		}
	}
}
