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
	"gendex/query"
	"gendex/store"
)

// gen's progress lines and `query throughput` measure the same answers the
// same way: fed the same finish times, they show the same rates and
// windows, at whole seconds and in the middle of one.
func TestProgressRatesMatchThroughput(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	// P1 answers 3 a second from t0+2s to t0+40.9s (20 tokens each, every
	// fifth without a count); P2 answered 10 over two seconds a minute
	// before and has been idle since (it is done).
	finishes := map[string][]time.Time{}
	for i := range 117 {
		finishes["P1"] = append(finishes["P1"], t0.Add(2*time.Second+time.Duration(i)*time.Second/3))
	}
	for i := range 10 {
		finishes["P2"] = append(finishes["P2"], t0.Add(-time.Minute+time.Duration(i)*200*time.Millisecond))
	}
	prompts := map[string]int{"P1": 500, "P2": 10}

	root := t.TempDir()
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r := &progress{db: db, cfg: &Config{}, pool: newPool(nil), ctl: &control{started: t0}, iso: &isolation{}}
	for _, name := range []string{"P1", "P2"} {
		ds := &dsRun{Dataset: Dataset{Name: name}}
		var p, raw strings.Builder
		for i := range prompts[name] {
			fmt.Fprintf(&p, `{"id":"%s-%d","text":"q"}`+"\n", name, i)
		}
		for i, at := range finishes[name] {
			tokens, unknown := int64(20), int64(0)
			count := `,"completion_tokens":20`
			if i%5 == 4 {
				tokens, unknown, count = 0, 1, ""
			}
			fmt.Fprintf(&raw, `{"id":"%s-%d","text":"a"%s,"finished_at":%q}`+"\n", name, i, count, at.Format(time.RFC3339Nano))
			ds.rate.add(at, 1, tokens, unknown)
			ds.ok.Add(1)
		}
		dir := filepath.Join(root, name)
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(p.String()), 0o644)
		os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), []byte(raw.String()), 0o644)
		r.sets = append(r.sets, ds)
	}
	ingesttest.IndexInto(t, db, root)

	rateRE := regexp.MustCompile(`, ([0-9.]+) answers/s`)
	lastRE := regexp.MustCompile(`\(last ([0-9]+)s\)`)
	for _, now := range []time.Time{
		t0.Add(2*time.Second + 500*time.Millisecond), // the first answers are in the current second
		t0.Add(3*time.Second + 500*time.Millisecond),
		t0.Add(12 * time.Second),
		t0.Add(20*time.Second + 900*time.Millisecond),
		t0.Add(40*time.Second + 500*time.Millisecond),
		t0.Add(50 * time.Second),
	} {
		res, err := query.Answer(db, query.Query{Question: "throughput", Window: 30 * time.Second, Datasets: []string{"P1", "P2"}}, now)
		if err != nil {
			t.Fatal(err)
		}
		want := func(row []any) (rate string, window int64) {
			secs, ok := row[1].(query.Fixed) // a window that ends in the current second
			if !ok {
				return fmt.Sprintf("%.1f", row[4].(query.Fixed).V), row[1].(int64)
			}
			return fmt.Sprintf("%.1f", row[4].(query.Fixed).V), int64(secs.V)
		}
		lines := r.statusLines(now)
		at := now.Sub(t0)
		// The first line is the total over the datasets: throughput's TOTAL.
		rate, window := want(res.Total)
		if m, l := rateRE.FindStringSubmatch(lines[0]), lastRE.FindStringSubmatch(lines[0]); m == nil || l == nil || m[1] != rate || l[1] != fmt.Sprint(window) {
			t.Errorf("t0+%s: %q; want %s answers/s (last %ds), as throughput's TOTAL %v", at, lines[0], rate, window, res.Total)
		}
		// P1's line: throughput's P1 row (P2, done before, has none).
		rate, _ = want(res.Rows[0])
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "  P1 ") {
			t.Fatalf("t0+%s: lines %q", at, lines)
		}
		if m := rateRE.FindStringSubmatch(lines[1]); m == nil || m[1] != rate {
			t.Errorf("t0+%s: %q; want %s answers/s, as throughput's %v", at, lines[1], rate, res.Rows[0])
		}
	}
}
