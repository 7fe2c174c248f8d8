package query_test

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gendex/query"
	"gendex/query/format"
	"gendex/store"
)

// specAnswer is one test answer: completion tokens (or store.Unknown),
// spec counts (0: none) and its second.
type specAnswer struct {
	completion, verify, accepted, proposed, sec int64
}

// specDB indexes answers per dataset, straight into the store.
func specDB(t *testing.T, sets map[string][]specAnswer) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "gendex.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	err = db.Update(func(tx *store.Tx) error {
		for ds, answers := range sets {
			for i, a := range answers {
				r := store.Record{ID: fmt.Sprint(i), PromptTokens: 1, CompletionTokens: a.completion, CachedTokens: store.Unknown, ReasoningTokens: store.Unknown,
					Time: a.sec * 1000, OwnTime: true, SpecVerify: a.verify, SpecAccepted: a.accepted, SpecProposed: a.proposed, Finish: "stop"}
				if _, err := tx.Add(ds, store.Raw, &r); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func randomSpecAnswers(rng *rand.Rand, n int) []specAnswer {
	out := make([]specAnswer, n)
	for i := range out {
		a := specAnswer{completion: int64(1 + rng.IntN(3000)), sec: 1000 + int64(rng.IntN(100))}
		switch rng.IntN(10) {
		case 0: // no spec fields (a server without a drafter, a 1-token answer)
		case 1: // spec fields but no completion count
			a.completion, a.verify = store.Unknown, 1+int64(rng.IntN(50))
		default:
			a.verify = 1 + int64(rng.IntN(int(a.completion)))
		}
		if a.verify > 0 && rng.IntN(5) != 0 {
			a.proposed = 3 * a.verify
			a.accepted = int64(rng.IntN(int(a.proposed) + 1))
		}
		out[i] = a
	}
	return out
}

// wantSpec computes a spec row from the answers themselves: sums, and the
// percentiles by sorting the per-answer accept lengths (rounded to 0.01
// half up, in floating point) and taking the nearest rank.
func wantSpec(name string, answers []specAnswer) []any {
	var tokens, verify, acc, prop, withSpec int64
	var bins []int64
	for _, a := range answers {
		if a.verify > 0 {
			withSpec++
			if a.completion >= 0 {
				tokens += a.completion
				verify += a.verify
				bins = append(bins, int64(math.Floor(float64(a.completion)*100/float64(a.verify)+0.5)))
			}
		}
		if a.proposed > 0 {
			acc += a.accepted
			prop += a.proposed
		}
	}
	slices.Sort(bins)
	row := []any{name, int64(len(answers)), nil, nil, nil}
	if verify > 0 {
		row[2], row[3] = verify, fixed(float64(tokens)/float64(verify), 2)
	}
	if prop > 0 {
		row[4] = fixed(float64(acc)/float64(prop), 3)
	}
	for _, p := range []int{10, 50, 90} {
		if b := nearestRank(bins, p); b != nil {
			row = append(row, fixed(float64(b.(int64))/100, 2))
		} else {
			row = append(row, nil)
		}
	}
	return append(row, int64(len(answers))-withSpec)
}

var specCols = []string{"dataset", "records", "verify_steps", "accept_length", "accept_rate",
	"p10_accept_length", "p50_accept_length", "p90_accept_length", "unknown_spec"}

// TestSpec: query spec's sums, accept length (Σ completion / Σ verify),
// accept rate and exact percentiles equal what the answers themselves
// give (percentiles checked against a sort, for many sizes, so the nearest
// rank is right at every n); a dataset without spec fields has every
// figure unknown (null in JSON, "unknown" in a table, empty in TSV), never
// 0; the TOTAL row covers every dataset.
func TestSpec(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 2, 3, 7, 10, 11, 19, 20, 99, 100, 101, 1000} {
		answers := randomSpecAnswers(rng, n)
		db := specDB(t, map[string][]specAnswer{"drafted": answers})
		checkRows(t, fmt.Sprintf("spec of %d", n), answer(t, db, time.Now(), "spec"), specCols, [][]any{wantSpec("drafted", answers)})
	}

	drafted := randomSpecAnswers(rng, 500)
	plain := []specAnswer{{completion: 10, sec: 1000}, {completion: 20, sec: 1001}}
	db := specDB(t, map[string][]specAnswer{"drafted": drafted, "plain": plain})
	r := answer(t, db, time.Now(), "spec")
	wantPlain := []any{"plain", int64(2), nil, nil, nil, nil, nil, nil, int64(2)}
	checkRows(t, "spec", r, specCols, [][]any{wantSpec("drafted", drafted), wantPlain})
	total := wantSpec("TOTAL", append(append([]specAnswer(nil), drafted...), plain...))
	if got := normRow(r.Total); !slices.Equal(got, total) {
		t.Errorf("TOTAL\n got %v\nwant %v", got, total)
	}

	var js, table, tsv bytes.Buffer
	for _, w := range []struct {
		b *bytes.Buffer
		f query.Format
	}{{&js, query.JSON}, {&table, query.Table}, {&tsv, query.TSV}} {
		if err := format.Write(w.b, r, format.Options{Format: w.f}); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(js.String(), `{"dataset": "plain", "records": 2, "verify_steps": null, "accept_length": null, "accept_rate": null, "p10_accept_length": null, "p50_accept_length": null, "p90_accept_length": null, "unknown_spec": 2}`) {
		t.Errorf("JSON:\n%s", js.String())
	}
	if !strings.Contains(tsv.String(), "plain\t2\t\t\t\t\t\t\t2\n") {
		t.Errorf("TSV:\n%s", tsv.String())
	}
	if line := lineOf(table.String(), "plain"); strings.Count(line, "unknown") != 6 || !strings.Contains(table.String(), "TOTAL") {
		t.Errorf("table:\n%s", table.String())
	}
}

func lineOf(text, prefix string) string {
	for l := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return l
		}
	}
	return ""
}

// TestThroughputAcceptLength: throughput's accept_length is Σ completion /
// Σ verify of the answers that finished in the window and carry both
// counts; unknown for a window (or a dataset) without any; TOTAL sums the
// datasets' windows.
func TestThroughputAcceptLength(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 24))
	a, b := randomSpecAnswers(rng, 400), randomSpecAnswers(rng, 300)
	plain := []specAnswer{{completion: 10, sec: 1090}}
	db := specDB(t, map[string][]specAnswer{"a": a, "b": b, "plain": plain})
	now := time.Unix(1095, 500_000_000)
	sums := func(answers ...[]specAnswer) any {
		var tok, ver int64
		for _, as := range answers {
			for _, x := range as {
				if x.sec >= 1095-30 && x.sec <= 1095 && x.verify > 0 && x.completion >= 0 {
					tok += x.completion
					ver += x.verify
				}
			}
		}
		if ver == 0 {
			return nil
		}
		return fixed(float64(tok)/float64(ver), 2)
	}
	r := answer(t, db, now, "throughput", "--window", "30s")
	col := slices.Index(r.Columns, "accept_length")
	if col < 0 {
		t.Fatalf("throughput has no accept_length: %v", r.Columns)
	}
	for i, want := range []any{sums(a), sums(b), nil} {
		if got := norm(r.Rows[i][col]); got != want {
			t.Errorf("%v: accept_length %v, want %v", r.Rows[i][0], got, want)
		}
	}
	if got, want := norm(r.Total[col]), sums(a, b); got != want {
		t.Errorf("TOTAL accept_length %v, want %v", got, want)
	}
	// A window before every answer: unknown, not 0.
	r = answer(t, db, time.Unix(900, 0), "throughput", "--window", "30s")
	if got := r.Rows[0][col]; got != nil {
		t.Errorf("an empty window's accept_length is %v, want unknown", got)
	}
}
