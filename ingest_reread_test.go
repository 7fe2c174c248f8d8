package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestIngestReread: gendex ingest --reread FILE forgets the file and
// reads it again whole, exactly once, as the dataset and stage the index
// holds it under, on a multi-turn ShareGPT run (turns all): an unchanged
// answer file comes back with the same counts (nothing twice); a turns
// file cut to its first line is forgotten once and read once; a gone
// file is only forgotten. A path the index holds no file at is "not
// there" (3), a folder or --dataset with it a usage error (2).
func TestIngestReread(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	ds := filepath.Join(p.dir, "data", "sg")
	writeMultiTurnShareGPT(t, ds, 0, 12)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "4096", "--turns", "all", "--export", "conversations", ds)
	db := filepath.Join(p.dir, "gendex.db")
	files := func() map[string][2]float64 { // path -> lines, records
		t.Helper()
		r := mustGendex(t, testEnv(nil), "--db", db, "query", "files", "--format", "json")
		var rows []map[string]any
		decodeJSON(t, r.stdout, &rows)
		out := map[string][2]float64{}
		for _, row := range rows {
			out[row["path"].(string)] = [2]float64{row["lines"].(float64), row["records"].(float64)}
		}
		return out
	}
	before := files()
	raw, turns := filepath.Join(ds, "raw_responses.jsonl"), filepath.Join(ds, "turns.jsonl")
	if before[raw] != [2]float64{12, 12} || before[turns][1] == 0 {
		t.Fatalf("the run's files: %v", before)
	}

	r := mustGendex(t, testEnv(nil), "--db", db, "ingest", "--reread", raw)
	if n := strings.Count(r.stderr, "read "+raw+" again from its start (dataset sg, stage raw): records: 12\n"); n != 1 {
		t.Errorf("ingest --reread of the unchanged answers said it read them %d times, want once\n%s", n, r.stderr)
	}
	if after := files(); after[raw] != before[raw] || after[turns] != before[turns] {
		t.Errorf("after ingest --reread: %v, want %v", after, before)
	}
	code, reasons, out := p.checkVerdict(ds)
	for _, bad := range []string{"files_changed", "index_behind", "stale_record", "no_record"} {
		if _, ok := reasons[bad]; ok {
			t.Errorf("check after a re-read of an unchanged file: exit %d, %s\n%s", code, bad, out)
		}
	}

	data, _ := os.ReadFile(turns)
	if err := os.Truncate(turns, int64(strings.IndexByte(string(data), '\n')+1)); err != nil {
		t.Fatal(err)
	}
	r = mustGendex(t, testEnv(nil), "--db", db, "ingest", "--reread", turns)
	if strings.Count(r.stderr, "records are forgotten") != 1 || strings.Count(r.stderr, "again from its start (dataset sg, stage turns): records: 1\n") != 1 {
		t.Errorf("ingest --reread of a cut turns file: want it forgotten once and read once, 1 record\n%s", r.stderr)
	}
	if got := files()[turns]; got != [2]float64{1, 1} {
		t.Errorf("the cut turns file after the re-read: lines, records %v, want 1, 1", got)
	}

	os.Remove(turns)
	r = mustGendex(t, testEnv(nil), "--db", db, "ingest", "--reread", turns)
	if !strings.Contains(r.stderr, turns+" is gone: the index counts nothing of it now") {
		t.Errorf("ingest --reread of a gone file:\n%s", r.stderr)
	}
	if _, ok := files()[turns]; ok {
		t.Errorf("query files still lists the gone file")
	}

	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{filepath.Join(ds, "nothing.jsonl")}, 3, "the index holds no file at"},
		{[]string{ds}, 2, "is a folder"},
		{[]string{"--dataset", "sg", raw}, 2, "--reread reads files as the index holds them"},
	} {
		r := gendex(t, testEnv(nil), append([]string{"--db", db, "ingest", "--reread"}, c.args...)...)
		if r.code != c.code || !strings.Contains(r.stderr, c.says) {
			t.Errorf("ingest --reread %q: %s, want exit %d saying %q", c.args, r, c.code, c.says)
		}
	}
}
