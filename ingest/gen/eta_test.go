package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gendex/ingest/ingesttest"
	"gendex/store"
)

// TestETAOfADatasetNotStarted: gen's live lines give a dataset's ETA by
// watch's rule (store.DatasetETA): the one being answered counts its
// prompts left over the run's rate, and one not started yet (no answer of
// this run) is unknown, not a time that counts its prompts as if they were
// being answered; nor does it add to the ETA of those after it.
func TestETAOfADatasetNotStarted(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	root := t.TempDir()
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := &progress{db: db, cfg: &Config{}, pool: newPool(nil), ctl: &control{started: t0}, iso: &isolation{}}
	// A is answered 2 a second from t0 on (60 of 100); B waits its turn
	// (50 prompts, none answered); C too.
	for _, name := range []string{"A", "B", "C"} {
		ds := &dsRun{Dataset: Dataset{Name: name}}
		var p, raw strings.Builder
		n := map[string]int{"A": 100, "B": 50, "C": 30}[name]
		for i := range n {
			fmt.Fprintf(&p, `{"id":"%s-%d","text":"q"}`+"\n", name, i)
		}
		if name == "A" {
			for i := range 60 {
				at := t0.Add(time.Duration(i) * 500 * time.Millisecond)
				fmt.Fprintf(&raw, `{"id":"A-%d","text":"a","completion_tokens":5,"finished_at":%q}`+"\n", i, at.Format(time.RFC3339Nano))
				ds.rate.add(at, 1, 5, 0)
				ds.ok.Add(1)
			}
		}
		dir := filepath.Join(root, name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(p.String()), 0o644)
		os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), []byte(raw.String()), 0o644)
		r.sets = append(r.sets, ds)
	}
	ingesttest.IndexInto(t, db, root)

	now := t0.Add(30 * time.Second)
	lines := r.statusLines(now)
	etaRE := regexp.MustCompile(`, (done|ETA \S+)$`)
	rateRE := regexp.MustCompile(`, ([0-9.]+) answers/s`)
	etas := map[string]string{}
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) > 0 {
			if m := etaRE.FindStringSubmatch(l); m != nil {
				etas[f[0]] = m[1]
			}
		}
	}
	m := rateRE.FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("no run rate in %q", lines[0])
	}
	var rate float64
	fmt.Sscan(m[1], &rate)
	wantA := "ETA " + store.ETA(40, rate)
	if etas["A"] != wantA {
		t.Errorf("A (being answered, 40 left): %q; want %q\n%s", etas["A"], wantA, strings.Join(lines, "\n"))
	}
	for _, name := range []string{"B", "C"} {
		if etas[name] != "ETA unknown" {
			t.Errorf("%s (not started): %q; want ETA unknown, as watch says\n%s", name, etas[name], strings.Join(lines, "\n"))
		}
	}
	// watch's rule for the same state gives the same ETAs.
	var ahead int64
	for _, c := range []struct {
		name      string
		left      int64
		answering bool
	}{{"A", 40, true}, {"B", 50, false}, {"C", 30, false}} {
		if got := "ETA " + store.DatasetETA(c.left, c.answering, &ahead, rate); got != etas[c.name] {
			t.Errorf("%s: gen says %q, the rule %q", c.name, etas[c.name], got)
		}
	}
}
