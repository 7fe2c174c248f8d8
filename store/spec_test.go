package store

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestSpecCounters: the spec counters, histogram and seconds of the raw
// stage equal sums and bins computed from the records themselves, for
// random records with and without verify counts, draft pairs and
// completion counts; turns count in their stage's counters only; and
// removing every record leaves the counters 0 and the buckets empty.
func TestSpecCounters(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	db := newDB(t)
	var want Stats
	wantHist := map[int64]int64{}
	wantSecs := map[int64][3]int64{}
	err := db.Update(func(tx *Tx) error {
		for i := range 500 {
			r := Record{ID: fmt.Sprint("id", i), File: 1, PromptTokens: 1, CompletionTokens: int64(rng.IntN(400)), CachedTokens: Unknown, ReasoningTokens: Unknown,
				Time: (1000 + int64(rng.IntN(30))) * 1000}
			if rng.IntN(10) == 0 {
				r.CompletionTokens = Unknown
			}
			if rng.IntN(4) != 0 {
				r.SpecVerify = 1 + int64(rng.IntN(200))
			}
			if rng.IntN(3) != 0 {
				r.SpecProposed = 1 + int64(rng.IntN(600))
				r.SpecAccepted = int64(rng.IntN(int(r.SpecProposed) + 1))
			}
			stage := Raw
			if rng.IntN(8) == 0 {
				stage = Turns
				r.ID += "#1"
			}
			if _, err := tx.Add("ds", stage, &r); err != nil {
				return err
			}
			if stage != Raw {
				continue
			}
			want.Records++
			if r.SpecVerify > 0 {
				want.SpecRecords++
				if r.CompletionTokens >= 0 {
					want.SpecTokens += uint64(r.CompletionTokens)
					want.SpecVerify += uint64(r.SpecVerify)
					// The bin, computed in floating point: round half up.
					bin := int64(float64(r.CompletionTokens)*100/float64(r.SpecVerify) + 0.5)
					wantHist[bin]++
					s := wantSecs[r.Time/1000]
					wantSecs[r.Time/1000] = [3]int64{s[0] + 1, s[1] + r.CompletionTokens, s[2] + r.SpecVerify}
				}
			}
			if r.SpecProposed > 0 {
				want.SpecAccepted += uint64(r.SpecAccepted)
				want.SpecProposed += uint64(r.SpecProposed)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, want Stats, wantHist map[int64]int64, wantSecs map[int64][3]int64) {
		t.Helper()
		db.View(func(v *View) error {
			s, err := v.Summary("ds")
			if err != nil {
				t.Fatal(err)
			}
			r := s.Stage(Raw)
			got := Stats{Records: r.Records, SpecRecords: r.SpecRecords, SpecTokens: r.SpecTokens, SpecVerify: r.SpecVerify, SpecAccepted: r.SpecAccepted, SpecProposed: r.SpecProposed}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s: raw spec counters\n got %+v\nwant %+v", what, got, want)
			}
			if r.UnknownSpec() != want.Records-want.SpecRecords {
				t.Errorf("%s: unknown spec %d", what, r.UnknownSpec())
			}
			h := map[int64]int64{}
			v.SpecHistogram("ds", func(base int64, counts []int64) {
				for i, n := range counts {
					if n != 0 {
						h[base+int64(i)] = n
					}
				}
			})
			if !reflect.DeepEqual(h, wantHist) {
				t.Errorf("%s: spec histogram\n got %v\nwant %v", what, h, wantHist)
			}
			for sec := int64(990); sec < 1040; sec++ {
				n, tok, vf := v.SpecWindow("ds", sec, sec+1)
				if w := wantSecs[sec]; [3]int64{n, tok, vf} != w {
					t.Errorf("%s: second %d: %d/%d/%d, want %v", what, sec, n, tok, vf, w)
				}
			}
			return nil
		})
	}
	check("added", want, wantHist, wantSecs)

	// Every record removed through the per-file key index: all back to 0.
	var pos ChunkPos
	for done := false; !done; {
		if err := db.Update(func(tx *Tx) (err error) {
			_, done, err = tx.removeKeyed("ds", 1, &pos, 37)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	check("all removed", Stats{}, map[int64]int64{}, map[int64][3]int64{})
}

// TestSpecBinRounding: an answer's bin is its accept length in hundredths
// rounded half up, computed exactly.
func TestSpecBinRounding(t *testing.T) {
	for _, c := range []struct{ completion, verify, bin int64 }{
		{9, 4, 225}, {1, 8, 13} /* 12.5 */, {2, 3, 67}, {1, 3, 33}, {200, 200, 100}, {1 << 32, 1, 100 << 32},
	} {
		r := Record{CompletionTokens: c.completion, SpecVerify: c.verify}
		if bin, ok := r.SpecBin(); !ok || bin != c.bin {
			t.Errorf("%d/%d: bin %d %v, want %d", c.completion, c.verify, bin, ok, c.bin)
		}
	}
	for _, r := range []Record{{CompletionTokens: Unknown, SpecVerify: 3}, {CompletionTokens: 4}} {
		if _, ok := r.SpecBin(); ok {
			t.Errorf("%+v has a bin", r)
		}
	}
}

// TestSpecCountersAbsentInOldSummary: the counters of a file written
// before them (no spec keys in its Summary JSON) read as no spec data:
// every answer unknown.
func TestSpecCountersAbsentInOldSummary(t *testing.T) {
	var s Summary
	if err := json.Unmarshal([]byte(`{"stages":[{"records":3},{"records":7,"completion_tokens":70,"finish":{"stop":7}}],"overlap":{"answered":3}}`), &s); err != nil {
		t.Fatal(err)
	}
	r := s.Stage(Raw)
	if r.SpecRecords != 0 || r.SpecVerify != 0 || r.SpecProposed != 0 || r.UnknownSpec() != 7 {
		t.Errorf("old summary: %+v, unknown spec %d", r, r.UnknownSpec())
	}
	b, _ := json.Marshal(Stats{Records: 1})
	if string(b) != `{"records":1,"files":0,"prompt_tokens":0,"completion_tokens":0,"cached_tokens":0,"reasoning_tokens":0,"unknown_prompt":0,"unknown_completion":0,"duplicates":0}` {
		t.Errorf("a stage without spec data gained keys: %s", b)
	}
}
