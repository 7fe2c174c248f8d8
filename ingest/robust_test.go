package ingest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gendex/store"
)

// goodLines are a file's lines of a stage, around which a bad one is put.
func goodLines(stage store.Stage, n int) []string {
	var out []string
	for i := range n {
		switch stage {
		case store.Prompts:
			out = append(out, fmt.Sprintf(`{"id":"p%d","input_ids":[1,2,%d]}`, i, i))
		case store.Raw:
			switch i % 3 {
			case 0:
				out = append(out, fmt.Sprintf(`{"id":"p%d","completion_tokens":%d,"prompt_tokens":3,"finish_reason":"stop","finished_at":"2026-01-01T00:00:%02dZ"}`, i, i+1, i%60))
			case 1:
				out = append(out, fmt.Sprintf(`{"id":"p%d","meta_info":{"completion_tokens":%d,"finish_reason":{"type":"length"},"response_sent_to_client_ts":1767225600.5}}`, i, i))
			default:
				out = append(out, fmt.Sprintf(`{"custom_id":"p%d","response":null,"error":{"code":"boom","message":"m"}}`, i))
			}
		case store.Tokenized:
			out = append(out, fmt.Sprintf(`{"id":"p%d","input_ids":[1,2],"loss_mask":[0,1]}`, i))
		case store.Errors:
			out = append(out, fmt.Sprintf(`{"id":"p%d","status":400,"error":"too long"}`, i))
		}
	}
	return out
}

type indexed struct {
	db       *store.DB
	path     string
	res      FileResult
	problems []Problem
}

// indexLines indexes lines as one file of stage, dataset "ds", in one
// commit unless batch says otherwise.
func indexLines(t *testing.T, stage store.Stage, lines []string, batch int) indexed {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ds")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, stage.String()+".jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var c collector
	db := openDB(t)
	ix := &Indexer{DB: db, Report: c.report, BatchRecords: batch}
	res, err := ix.IndexFile(context.Background(), Source{Path: path, Dataset: "ds", Stage: stage})
	if err != nil {
		t.Fatalf("IndexFile: %v", err)
	}
	return indexed{db, path, res, c.problems}
}

// contents is what the index holds of dataset ds: the counters (Skipped
// apart) and every stage's ids.
func contents(t *testing.T, db *store.DB) (store.Summary, map[store.Stage][]string) {
	t.Helper()
	s := summary(t, db, "ds")
	for st := range s.Stages {
		s.Stages[st].Skipped = 0
	}
	ids := map[store.Stage][]string{}
	err := db.View(func(v *store.View) error {
		for st := store.Prompts; st <= store.Errors; st++ {
			if err := v.Each("ds", st, func(r *store.Record) error { ids[st] = append(ids[st], r.ID); return nil }); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, ids
}

// TestOneBadLine: a file with one line that cannot be indexed as it is
// indexes every other line exactly as the same file with that line
// replaced by equiv (left out when equiv is ""), in the same commit, and
// names the line by file:line with the kind given.
func TestOneBadLine(t *testing.T) {
	t.Parallel()
	longID := strings.Repeat("x", store.MaxIDLen+1)
	maxID := strings.Repeat("y", store.MaxIDLen)
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	hugeFinish := strings.Repeat("f", 1<<20)
	cases := []struct {
		name  string
		stage store.Stage
		bad   string
		equiv string // "" : the line is left out
		kind  Kind   // the problem reported at its line; -1: none
	}{
		{"long-id-prompts", store.Prompts, `{"id":"` + longID + `","input_ids":[1]}`, "", Unstorable},
		{"long-numeric-id-prompts", store.Prompts, `{"id":1` + strings.Repeat("0", store.MaxIDLen) + `,"text":"t"}`, "", Unstorable},
		{"long-id-raw", store.Raw, `{"id":"` + longID + `","completion_tokens":5,"finish_reason":"stop"}`, "", Unstorable},
		{"long-custom-id-raw-error", store.Raw, `{"custom_id":"` + longID + `","response":null,"error":{"code":"boom","message":"m"}}`, "", Unstorable},
		{"long-id-tokenized", store.Tokenized, `{"id":"` + longID + `","input_ids":[1],"loss_mask":[1]}`, "", Unstorable},
		{"long-id-errors", store.Errors, `{"id":"` + longID + `","status":500,"error":"x"}`, "", Unstorable},
		{"id-at-the-limit-raw", store.Raw, `{"id":"` + maxID + `","completion_tokens":5}`, `{"id":"` + maxID + `","completion_tokens":5}`, -1},
		{"deep-nesting-raw", store.Raw, `{"id":"deep","x":` + deep + `,"completion_tokens":1}`, "", Invalid},
		{"deep-nesting-prompts", store.Prompts, `{"id":"deep","input_ids":` + deep + `}`, "", Invalid},
		{"count-2^53-raw", store.Raw, `{"id":"big","completion_tokens":9007199254740992,"prompt_tokens":2}`, `{"id":"big","prompt_tokens":2}`, NoTokens},
		{"prompt-count-too-big-raw", store.Raw, `{"id":"big","completion_tokens":4,"prompt_tokens":5e15}`, `{"id":"big","completion_tokens":4}`, BadCount},
		{"count-1e30-raw", store.Raw, `{"id":"big","completion_tokens":1e30}`, `{"id":"big"}`, NoTokens},
		{"time-past-int64-ms-raw", store.Raw, `{"id":"late","completion_tokens":2,"created":1e300}`, `{"id":"late","completion_tokens":2}`, -1},
		{"huge-finish-raw", store.Raw, `{"id":"fin","completion_tokens":2,"finish_reason":"` + hugeFinish + `"}`,
			`{"id":"fin","completion_tokens":2,"finish_reason":"` + hugeFinish[:store.MaxFinish] + `"}`, -1},
		{"huge-error-reason-errors", store.Errors, `{"id":"e","error":{"code":"` + hugeFinish + `","message":"` + hugeFinish + `"}}`,
			`{"id":"e","error":{"code":"` + hugeFinish[:store.MaxFinish] + `","message":"m"}}`, -1},
		// NUL parts a unit's id from its sample (store.UnitID): no id holds it.
		{"nul-id-raw", store.Raw, `{"id":"a\u0000b","completion_tokens":1}`, "", Unstorable},
		{"nul-id-prompts", store.Prompts, `{"id":"a\u00001","text":"t"}`, "", Unstorable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			good := goodLines(tc.stage, 9)
			const at = 5 // the bad line's number
			with := slices.Insert(slices.Clone(good), at-1, tc.bad)
			want := slices.Clone(good)
			if tc.equiv != "" {
				want = slices.Insert(want, at-1, tc.equiv)
			}
			for _, batch := range []int{0, 3} { // one commit; the bad line mid-batch
				got := indexLines(t, tc.stage, with, batch)
				ref := indexLines(t, tc.stage, want, batch)
				gs, gids := contents(t, got.db)
				rs, rids := contents(t, ref.db)
				if !reflect.DeepEqual(gs, rs) {
					t.Errorf("batch %d: counters\n got %+v\nwant %+v", batch, gs, rs)
				}
				if !reflect.DeepEqual(gids, rids) {
					t.Errorf("batch %d: ids differ from the file without the bad line", batch)
				}
				var skipped uint64
				if tc.kind >= 0 && tc.kind.Skips() {
					skipped = 1
				}
				if n := summary(t, got.db, "ds").Skipped(); n != skipped {
					t.Errorf("batch %d: dataset skipped = %d, want %d", batch, n, skipped)
				}
				if got.res.Skipped != int(skipped) {
					t.Errorf("batch %d: FileResult.Skipped = %d, want %d", batch, got.res.Skipped, skipped)
				}
				var at5 []Problem
				for _, p := range got.problems {
					if p.Line == at {
						at5 = append(at5, p)
					} else if p.Kind != NoTokens || tc.stage != store.Raw {
						t.Errorf("batch %d: unexpected problem %s", batch, p)
					}
				}
				switch {
				case tc.kind < 0 && len(at5) > 0:
					t.Errorf("batch %d: line %d reported: %v", batch, at, at5)
				case tc.kind >= 0 && (len(at5) != 1 || at5[0].Kind != tc.kind):
					t.Errorf("batch %d: line %d reported as %v, want one %s", batch, at, at5, tc.kind)
				case tc.kind >= 0 && !strings.HasPrefix(at5[0].String(), fmt.Sprintf("%s:%d: ", got.path, at)):
					t.Errorf("batch %d: problem %q does not begin with file:line", batch, at5[0])
				case tc.kind >= 0 && len(at5[0].String()) > 400:
					t.Errorf("batch %d: problem is %d bytes long; it quotes the line", batch, len(at5[0].String()))
				}
			}
		})
	}
}

// TestUnstorableMessage: a huge error message is stored shortened, never
// refused.
func TestUnstorableMessage(t *testing.T) {
	t.Parallel()
	msg := strings.Repeat("é", 4<<20)
	got := indexLines(t, store.Errors, append(goodLines(store.Errors, 3), `{"id":"big","status":500,"error":"`+msg+`"}`), 0)
	err := got.db.View(func(v *store.View) error {
		r, ok, err := v.Get("ds", store.Errors, "big")
		if err != nil || !ok {
			return fmt.Errorf("record not found (%v)", err)
		}
		if len(r.Message) > 512 || !strings.HasPrefix(msg, r.Message) || len(r.Message) < 500 {
			return fmt.Errorf("message stored as %d bytes", len(r.Message))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestSkippedCounter: the dataset's skipped counter is the sum of its
// files' skipped lines, through appends and a file forgotten and read
// again.
func TestSkippedCounter(t *testing.T) {
	t.Parallel()
	longID := strings.Repeat("z", store.MaxIDLen+1)
	lines := goodLines(store.Raw, 6)
	lines = append(lines, `not json`, `{"id":"`+longID+`","completion_tokens":1}`, `{"completion_tokens":1}`)
	got := indexLines(t, store.Raw, lines, 2)
	ix := &Indexer{DB: got.db}
	prompts := filepath.Join(filepath.Dir(got.path), "prompts.jsonl")
	if err := os.WriteFile(prompts, []byte(`{"id":"p1","text":"a"}`+"\n{\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(when string, want [4]uint64) {
		t.Helper()
		s := summary(t, got.db, "ds")
		for st := range want {
			if s.Stages[st].Skipped != want[st] {
				t.Errorf("%s: %s skipped = %d, want %d", when, store.Stage(st), s.Stages[st].Skipped, want[st])
			}
		}
	}
	index := func(path string, stage store.Stage) {
		t.Helper()
		if _, err := ix.IndexFile(context.Background(), Source{Path: path, Dataset: "ds", Stage: stage}); err != nil {
			t.Fatal(err)
		}
	}
	check("first read", [4]uint64{0, 3, 0, 0})
	index(prompts, store.Prompts)
	check("prompts read", [4]uint64{1, 3, 0, 0})
	appendFile(t, got.path, "{bad\n")
	index(got.path, store.Raw)
	check("appended", [4]uint64{1, 4, 0, 0})
	// Replaced: forgotten, then read again from the start.
	if err := os.WriteFile(got.path+".new", []byte(strings.Join(goodLines(store.Raw, 3), "\n")+"\n[1]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(got.path+".new", got.path); err != nil {
		t.Fatal(err)
	}
	index(got.path, store.Raw)
	check("replaced", [4]uint64{1, 1, 0, 0})
}
