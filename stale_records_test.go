package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// staleRecords returns check's stale_record count of each dataset under
// args, against the index at db (a missing reason counts 0).
func (p *placeRun) staleRecords(db string, args ...string) (map[string]float64, string) {
	p.t.Helper()
	_, out, _ := runGendex(p.t, p.bin, p.dir, append([]string{"--db", db, "check", "--format", "json"}, args...)...) // exit 1 when not ready
	var v struct {
		Datasets []struct {
			Dataset string
			Reasons []struct {
				Reason string
				Count  *float64
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		p.t.Fatalf("gendex --db %s check --format json: %v\n%s", db, err, out)
	}
	n := map[string]float64{}
	for _, d := range v.Datasets {
		for _, r := range d.Reasons {
			if r.Reason == "stale_record" && r.Count != nil {
				n[d.Dataset] = *r.Count
			}
		}
	}
	return n, out
}

// TestFreshIndexFindsStaleRecords: gen, export, then gen --redo truncated
// without --export leaves records and exclusions built from the answers
// the redo replaced. A fresh index of the folder (a lost index, another
// machine, drop then ingest) finds them from the files alone, whichever
// file it reads first: query progress's missing_tokenized and stale, and
// check's stale_record, are those of gen's own index; after the fresh
// index's export, 0 in every index. Before, a fresh index said 0 (a
// record line did not say which answer it was built from), and one that
// read the records before the answers said stale the records export made
// again.
func TestFreshIndexFindsStaleRecords(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	sets := []string{"B1_ids", "B2_text", "B3_chat", "B4_sharegpt"}
	demo := filepath.Join(p.dir, "demo")
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "16", "demo")
	p.mustRun("export", "--include-truncated", "demo") // B1_ids's: excluded (ids prompts)
	p.mustRun("gen", "--server", "sim", "--max-new-tokens", "128", "--redo", "truncated", "demo")
	redone := redoneIDs(t, demo, sets...)
	if len(redone["B1_ids"]) == 0 || len(redone["B2_text"]) == 0 {
		t.Fatalf("the redo asked nothing again in B1_ids or B2_text: %v", redone)
	}
	db := filepath.Join(p.dir, "gendex.db")

	// The records first, then the answers that replace theirs.
	ingestRecordsFirst := func(db string) {
		for _, ds := range sets {
			for _, f := range []string{"tokenized.jsonl", "excluded.jsonl"} {
				if path := filepath.Join(demo, ds, f); fileExists(path) {
					p.mustRun("--db", db, "ingest", path)
				}
			}
		}
		p.mustRun("--db", db, "ingest", "demo")
	}
	recordsFirst := filepath.Join(t.TempDir(), "records-first.db")
	ingestRecordsFirst(recordsFirst)

	same := func(when string, want map[string][]string, dbs ...string) {
		t.Helper()
		for _, at := range dbs {
			prog := p.progress(at)
			staleN, out := p.staleRecords(at, "demo")
			for _, ds := range sets {
				n := float64(len(want[ds]))
				got := prog[ds]
				if got["stale"] == nil { // omitted when 0
					got["stale"] = float64(0)
				}
				if got["missing_tokenized"] != n || got["stale"] != n || got["raw"] != float64(50) {
					t.Errorf("%s: %s: query progress %s: missing_tokenized %v, stale %v; want %v (the records of replaced answers)",
						when, filepath.Base(at), ds, got["missing_tokenized"], got["stale"], n)
				}
				if got := staleN[ds]; got != n {
					t.Errorf("%s: %s: check %s: stale_record %v, want %v", when, filepath.Base(at), ds, got, n)
					t.Log(out)
				}
			}
		}
	}
	fresh := filepath.Join(t.TempDir(), "fresh.db")
	p.mustRun("--db", fresh, "ingest", "demo")
	same("after the redo", redone, db, fresh, recordsFirst)

	// An export by the fresh index (on the other machine) takes them out
	// and makes them again: every index that reads the files then (gen's,
	// recordsFirst) finds nothing stale, as does a new one, whichever file
	// it reads first.
	p.mustRun("--db", fresh, "export", "--include-truncated", "demo")
	again := filepath.Join(t.TempDir(), "again.db")
	p.mustRun("--db", again, "ingest", "demo")
	againFirst := filepath.Join(t.TempDir(), "again-records-first.db")
	ingestRecordsFirst(againFirst)
	p.mustRun("ingest", "demo")
	p.mustRun("--db", recordsFirst, "ingest", "demo")
	same("after export", nil, db, fresh, recordsFirst, again, againFirst)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
