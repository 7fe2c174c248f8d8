package store

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

func newDB(t testing.TB) *DB {
	t.Helper()
	db, err := Open(filepath.Join(t.TempDir(), "gendex.db"), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gendex.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	_, err = Open(path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v; want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "running") {
		t.Errorf("error %q should name the file and say what may hold it", err)
	}
	// Without the timeout, bbolt waits for the lock for ever.
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %v: the 100ms timeout was not applied", d)
	}
}

func TestReadOnlyMissing(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "nope.db"), Options{ReadOnly: true})
	if err == nil || !strings.Contains(err.Error(), "gendex ingest") {
		t.Fatalf("got %v; want an error that says how to create the index", err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []Record{
		{Shape: ShapeFlat, PromptTokens: 812, CompletionTokens: 10, CachedTokens: 256, ReasoningTokens: 0, Finish: "stop", Time: 1796064752115, OwnTime: true, File: 3, Offset: 1 << 40, Length: 50 << 20, Line: 123456789, Sum: 0xdeadbeef},
		{Shape: ShapeUnknown, PromptTokens: Unknown, CompletionTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown},
		{Shape: ShapeError, PromptTokens: Unknown, CompletionTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown, Finish: "http 400", Message: "too long"},
		{Shape: ShapeSGLang, PromptTokens: 3, CompletionTokens: 90, CachedTokens: 0, ReasoningTokens: Unknown, Finish: "stop", SpecVerify: 40, SpecAccepted: 49, SpecProposed: 120},
		{Shape: ShapeFlat, PromptTokens: Unknown, CompletionTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown, Message: "m", SpecVerify: 1 << 32},
		{Shape: ShapeFlat, PromptTokens: Unknown, CompletionTokens: 5, CachedTokens: Unknown, ReasoningTokens: Unknown, SpecAccepted: 0, SpecProposed: 6},
		{Shape: ShapeOpenAI, PromptTokens: 9, CompletionTokens: 5, CachedTokens: Unknown, ReasoningTokens: Unknown, Finish: "tool_calls", ToolStop: "other_tool"},
		{Shape: ShapeFlat, PromptTokens: Unknown, CompletionTokens: 5, CachedTokens: Unknown, ReasoningTokens: Unknown, Message: "m", SpecVerify: 3, SpecAccepted: 1, SpecProposed: 2, ToolStop: "no_call"},
		{Shape: ShapeFlat, PromptTokens: 1, CompletionTokens: 5, CachedTokens: Unknown, ReasoningTokens: Unknown, Maker: 3},
		{Shape: ShapeFlat, PromptTokens: 1, CompletionTokens: 5, CachedTokens: Unknown, ReasoningTokens: Unknown, ToolStop: "no_call", Maker: 1 << 20},
	} {
		var got Record
		if err := decodeRecord(r.appendBinary(nil), &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
	if err := decodeRecord([]byte{0, 1, 2}, new(Record)); err == nil {
		t.Error("decoding garbage succeeded")
	}
	// A record written before the spec counts (no bits 6 and 7) has none;
	// a decoder that predates them reads a new record's other fields
	// (they come last).
	old := Record{Shape: ShapeFlat, PromptTokens: 1, CompletionTokens: 2, CachedTokens: Unknown, ReasoningTokens: Unknown, Finish: "stop", Time: 5}
	b := old.appendBinary(nil)
	withSpec := old
	withSpec.SpecVerify, withSpec.SpecAccepted, withSpec.SpecProposed = 1, 1, 3
	nb := withSpec.appendBinary(nil)
	if !bytes.Equal(nb[1:len(b)], b[1:]) || nb[0]&^(fSpec|fDrafts) != b[0] {
		t.Errorf("a record with spec counts is not the old encoding plus flag bits and a tail:\n%x\n%x", nb, b)
	}
	var got Record
	if err := decodeRecord(nb[:len(b)], &got); err == nil {
		t.Errorf("a record cut before its spec counts decoded as %+v", got)
	}
	// A tool stop is the extension after everything: the record without
	// it is the one written before it existed, which decodes as no stop.
	stopped := withSpec
	stopped.ToolStop = "more_calls"
	sb := stopped.appendBinary(nil)
	if !bytes.Equal(sb[:len(nb)], nb) {
		t.Errorf("a record with a tool stop is not the encoding without it plus a tail:\n%x\n%x", sb, nb)
	}
	got = Record{ToolStop: "left over"}
	if err := decodeRecord(nb, &got); err != nil || got.ToolStop != "" {
		t.Errorf("a record without the extension decoded as %+v, %v", got, err)
	}
	if err := decodeRecord(sb[:len(sb)-2], &got); err == nil {
		t.Errorf("a record cut in its tool stop decoded as %+v", got)
	}
	// Its maker comes after the tool stop, its own bit in the extension's
	// flags: a decoder before it reads the tool stop and leaves the rest.
	made := stopped
	made.Maker = 2
	if mb := made.appendBinary(nil); !bytes.Equal(mb[len(nb)+1:len(sb)], sb[len(nb)+1:]) || mb[len(nb)] != xToolStop|xMaker {
		t.Errorf("a record with a maker is not the encoding without it plus a flag bit and a tail:\n%x\n%x", mb, sb)
	}
}

func FuzzDecodeRecord(f *testing.F) {
	f.Add((&Record{Finish: "stop", CompletionTokens: 5, PromptTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown}).appendBinary(nil))
	// An exclusion (reason in Finish, detail in Message) and a turn.
	f.Add((&Record{Shape: ShapeExcluded, Finish: "length", Message: "raw_responses.jsonl:12: finish_reason length", PromptTokens: Unknown, CompletionTokens: Unknown, CachedTokens: Unknown, ReasoningTokens: Unknown, File: 4, Offset: 99, Length: 80, Line: 2}).appendBinary(nil))
	f.Add((&Record{Shape: ShapeFlat, Finish: "stop", PromptTokens: 30, CompletionTokens: 7, CachedTokens: 0, ReasoningTokens: Unknown, Time: 1796064752115, OwnTime: true, File: 5}).appendBinary(nil))
	// A string length past MaxInt64 turned negative and sliced out of range.
	f.Add([]byte("00000000000\xbc\xad\x9a\x9a\x9a\x9a\x9a\x9a\x9a\x01"))
	// Speculative decoding counts: verify only, drafts only, both.
	f.Add((&Record{Shape: ShapeSGLang, Finish: "stop", PromptTokens: 3, CompletionTokens: 90, CachedTokens: 0, ReasoningTokens: Unknown, SpecVerify: 40}).appendBinary(nil))
	f.Add((&Record{Shape: ShapeFlat, PromptTokens: Unknown, CompletionTokens: 9, CachedTokens: Unknown, ReasoningTokens: Unknown, SpecAccepted: 0, SpecProposed: 6}).appendBinary(nil))
	f.Add((&Record{Shape: ShapeFlat, Message: "m", PromptTokens: Unknown, CompletionTokens: 9, CachedTokens: Unknown, ReasoningTokens: Unknown, SpecVerify: 4, SpecAccepted: 4, SpecProposed: 12}).appendBinary(nil))
	f.Add((&Record{Shape: ShapeOpenAI, Finish: "tool_calls", PromptTokens: Unknown, CompletionTokens: 9, CachedTokens: Unknown, ReasoningTokens: Unknown, ToolStop: "other_tool"}).appendBinary(nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r Record
		if decodeRecord(b, &r) != nil {
			return
		}
		var again Record
		if err := decodeRecord(r.appendBinary(nil), &again); err != nil || !reflect.DeepEqual(again, r) {
			t.Fatalf("re-encoding %+v: %v %+v", r, err, again)
		}
	})
}

type rec struct {
	stage Stage
	id    string
	file  uint32
	tok   int64
	sec   int64
}

// state captures everything a dataset's counters say.
func state(t *testing.T, db *DB, ds string) string {
	t.Helper()
	var out string
	db.View(func(v *View) error {
		s, err := v.Summary(ds)
		if err != nil {
			t.Fatal(err)
		}
		for i := range s.Stages {
			s.Stages[i].Files = 0
		}
		h := map[int64]int64{}
		v.Histogram(ds, func(base int64, counts []int64) {
			for i, n := range counts {
				if n != 0 {
					h[base+int64(i)] = n
				}
			}
		})
		r, tk, u := v.Window(ds, 0, 1<<40)
		sh := map[int64]int64{}
		v.SpecHistogram(ds, func(base int64, counts []int64) {
			for i, n := range counts {
				if n != 0 {
					sh[base+int64(i)] = n
				}
			}
		})
		var secs []string
		for sec := int64(0); sec < 2000; sec++ {
			if r, tk, vf := v.SpecWindow(ds, sec, sec+1); r != 0 || tk != 0 || vf != 0 {
				secs = append(secs, fmt.Sprintf("%d:%d/%d/%d", sec, r, tk, vf))
			}
		}
		out = fmt.Sprintf("%+v hist=%v window=%d/%d/%d spechist=%v specsecs=%v", s, h, r, tk, u, sh, secs)
		return nil
	})
	return out
}

// specOf gives a test record speculative decoding counts that follow from
// its id and tokens, so that every test adding records through addAll
// checks the spec counters too: most answers with tokens have a verify
// count, some a draft pair, some both, some neither.
func specOf(r rec) (verify, accepted, proposed int64) {
	h := int64(0)
	for _, c := range r.id {
		h = h*31 + int64(c)
	}
	h &= 1<<20 - 1
	if h%4 != 0 && r.tok != 0 {
		verify = 1 + h%7
	}
	if h%3 != 0 {
		proposed = 3 * (1 + h%5)
		accepted = h % (proposed + 1)
	}
	return
}

func addAll(t *testing.T, db *DB, recs []rec) {
	t.Helper()
	err := db.Update(func(tx *Tx) error {
		for _, r := range recs {
			x := Record{ID: r.id, File: r.file, CompletionTokens: r.tok, PromptTokens: 1, CachedTokens: Unknown, ReasoningTokens: Unknown, Time: r.sec * 1000, Finish: "stop"}
			x.SpecVerify, x.SpecAccepted, x.SpecProposed = specOf(r)
			if r.stage == Raw && len(r.id)%3 == 0 { // some answers are stopped tool conversations
				x.ToolStop = []string{"other_tool", "no_call"}[r.sec%2]
			}
			if _, err := tx.Add("ds", r.stage, &x); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestRemoveFileIsExactInverse: adding A then B and removing B leaves the
// same counters as adding A alone, for random A and B over every stage
// (turns and exclusions among them), and the overlap counters agree with
// the records after every removal batch.
func TestRemoveFileIsExactInverse(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	var excluded uint64
	for round := 0; round < 20; round++ {
		var a, b []rec
		used := map[string]bool{}
		for i := 0; i < 200; i++ {
			r := rec{stage: Stage(rng.IntN(int(numStages))), id: fmt.Sprintf("id%d", rng.IntN(60)), tok: int64(rng.IntN(20)) - 3, sec: 1000 + int64(rng.IntN(50))}
			if r.tok < 0 {
				r.tok = Unknown
			}
			key := fmt.Sprint(r.stage, r.id)
			if used[key] { // duplicates are the indexer's business
				continue
			}
			used[key] = true
			if rng.IntN(2) == 0 {
				r.file = 1
				a = append(a, r)
			} else {
				r.file = 2
				b = append(b, r)
			}
		}
		only := newDB(t)
		addAll(t, only, a)
		both := newDB(t)
		addAll(t, both, a)
		addAll(t, both, b)
		excluded += checkOverlap(t, both, "ds", "A and B added").RawExcluded
		checkOverlap(t, only, "ds", "A added")
		// Remove file 2 in small batches, one transaction each: through
		// the per-file key index, or (odd rounds) by scanning the stages,
		// as for a file indexed before the key index existed.
		limit := 1 + rng.IntN(20)
		if round%2 == 0 {
			var pos ChunkPos
			for done := false; !done; {
				err := both.Update(func(tx *Tx) (err error) {
					_, done, err = tx.removeKeyed("ds", 2, &pos, limit)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				checkOverlap(t, both, "ds", "a batch of B removed")
			}
		} else {
			for st := Stage(0); st < numStages; st++ {
				var after []byte
				for done := false; !done; {
					err := both.Update(func(tx *Tx) error {
						_, next, err := tx.removeScan("ds", st, 2, after, limit)
						after, done = next, next == nil
						return err
					})
					if err != nil {
						t.Fatal(err)
					}
					checkOverlap(t, both, "ds", "a batch of B removed")
				}
			}
		}
		if err := both.View(func(v *View) error {
			// The key index lists exactly file 1's records (and, after a
			// scan, file 2's stale chunks, which a removal skips).
			n := 0
			err := v.btx.Bucket(bucketDatasets).Bucket([]byte("ds")).Bucket(bucketByFile).ForEach(func(k, val []byte) error {
				file := binary.BigEndian.Uint32(k)
				if file == 2 && round%2 == 0 {
					t.Errorf("key index still has chunk %x", k)
				}
				for len(val) > 0 {
					_, _, rest, ok := nextChunkEntry(val)
					if !ok {
						t.Fatalf("corrupt chunk %x", k)
					}
					val = rest
					if file == 1 {
						n++
					}
				}
				return nil
			})
			if n != len(a) {
				t.Errorf("key index lists %d records of file 1; want %d", n, len(a))
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if got, want := state(t, both, "ds"), state(t, only, "ds"); got != want {
			t.Fatalf("round %d: after removing file 2:\n got %s\nwant %s", round, got, want)
		}
	}
	if excluded == 0 {
		t.Fatal("no answer was ever excluded: the test is vacuous")
	}
}

func TestWindowAndMissing(t *testing.T) {
	db := newDB(t)
	addAll(t, db, []rec{
		{Prompts, "a", 1, 0, 1}, {Prompts, "b", 1, 0, 1}, {Prompts, "c", 1, 0, 1}, {Prompts, "d", 1, 0, 1},
		{Raw, "a", 2, 10, 100}, {Raw, "c", 2, 20, 101}, {Raw, "z", 2, Unknown, 102},
		{Errors, "b", 3, Unknown, 100}, {Tokenized, "a", 4, 5, 200},
	})
	db.View(func(v *View) error {
		if r, tk, u := v.Window("ds", 100, 102); r != 2 || tk != 30 || u != 0 {
			t.Errorf("window [100,102) = %d %d %d", r, tk, u)
		}
		if r, tk, u := v.Window("ds", 101, 103); r != 2 || tk != 20 || u != 1 {
			t.Errorf("window [101,103) = %d %d %d", r, tk, u)
		}
		var miss []string
		v.Missing("ds", Prompts, func(id string) error { miss = append(miss, id); return nil }, Raw, Errors)
		if fmt.Sprint(miss) != "[d]" {
			t.Errorf("missing raw = %v", miss)
		}
		miss = nil
		v.Missing("ds", Raw, func(id string) error { miss = append(miss, id); return nil }, Tokenized)
		if fmt.Sprint(miss) != "[c z]" {
			t.Errorf("missing tokenized = %v", miss)
		}
		s, _ := v.Summary("ds")
		if s.MissingRaw() != 1 || s.MissingTokenized() != 2 || s.Overlap.ErrorsOpen != 1 {
			t.Errorf("summary = %+v", s)
		}
		return nil
	})
}

// TestForgetV1File: a file indexed by schema version 1 (no per-file key
// index, Keyed false) is forgotten by scanning its stages in bounded
// batches; failing any commit and finishing after a reopen leaves the
// counters of the other file alone, exactly.
func TestForgetV1File(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var a, b []rec
	for i := 0; i < 120; i++ {
		r := rec{stage: []Stage{Raw, Errors}[rng.IntN(2)], id: fmt.Sprintf("id%03d", i), tok: int64(rng.IntN(20)), sec: 1000 + int64(rng.IntN(50))}
		if i%3 == 0 {
			r.file = 2
			b = append(b, r)
		} else {
			r.file = 1
			a = append(a, r)
		}
	}
	only := newDB(t)
	addAll(t, only, b)
	want := state(t, only, "ds")
	for k := 1; ; k++ {
		path := filepath.Join(t.TempDir(), "v1.db")
		db, err := Open(path, Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Update(func(tx *Tx) error {
			for _, p := range []string{"/a", "/b"} {
				if err := tx.PutFile(&FileState{Path: p, Dataset: "ds", Stage: Raw}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		addAll(t, db, a)
		addAll(t, db, b)
		// Make it what version 1 wrote.
		err = db.bolt.Update(func(btx *bolt.Tx) error {
			if err := btx.Bucket(bucketDatasets).Bucket([]byte("ds")).DeleteBucket(bucketByFile); err != nil {
				return err
			}
			if err := btx.DeleteBucket(bucketForgetting); err != nil {
				return err
			}
			for _, p := range []string{"/a", "/b"} {
				fs, _, err := getFile(btx, p)
				if err != nil {
					return err
				}
				fs.Keyed = false
				v, _ := json.Marshal(fs)
				if err := btx.Bucket(bucketFiles).Put([]byte(p), v); err != nil {
					return err
				}
			}
			return btx.Bucket(bucketMeta).Put(keyVersion, []byte{1})
		})
		if err != nil {
			t.Fatal(err)
		}
		db.Close()

		db, failed := openFailingAt(t, path, k)
		err = forgetPath(db, "/a")
		if err == nil {
			err = db.FinishForgets(context.Background(), 7, nil)
		}
		if *failed != (err != nil) {
			t.Fatalf("commit %d: injected %v, got %v", k, *failed, err)
		}
		db.Close()
		if db, err = Open(path, Options{NoSync: true}); err != nil {
			t.Fatal(err)
		}
		// The restarted run forgets /a unless the forget had begun.
		if err := forgetPath(db, "/a"); err != nil {
			t.Fatal(err)
		}
		if err := db.FinishForgets(context.Background(), 7, nil); err != nil {
			t.Fatal(err)
		}
		got := state(t, db, "ds")
		var fs FileState
		var version []byte
		db.View(func(v *View) (err error) {
			fs, _, err = v.File("/a")
			version = bytes.Clone(v.btx.Bucket(bucketMeta).Get(keyVersion))
			return err
		})
		db.Close()
		if got != want {
			t.Fatalf("commit %d failed; after finishing:\n got %s\nwant %s", k, got, want)
		}
		if fs.ID != 0 || fs.Phase != PhaseReady || fs.Offset != 0 || !bytes.Equal(version, []byte{SchemaVersion}) {
			t.Fatalf("commit %d failed; /a is %+v, schema version %v", k, fs, version)
		}
		if !*failed {
			t.Logf("%d commits, each failed once", k-1)
			if k < 10 {
				t.Fatalf("only %d commits: the scan did not run in batches", k-1)
			}
			return
		}
	}
}

// TestUpgradeFromVersion3: a version 3 file (no turns or excluded stages)
// is read as it is, and a read-write Open raises its version to the
// current one (5) without changing a counter; the new stages then take
// records.
func TestUpgradeFromVersion3(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gendex.db")
	db, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	addAll(t, db, []rec{{Prompts, "a", 1, 1, 1}, {Raw, "a", 1, 1, 1}})
	before := state(t, db, "ds")
	if err := db.bolt.Update(func(btx *bolt.Tx) error { return btx.Bucket(bucketMeta).Put(keyVersion, []byte{3}) }); err != nil {
		t.Fatal(err)
	}
	db.Close()

	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only open of a version 3 file: %v", err)
	}
	if got := state(t, ro, "ds"); got != before {
		t.Errorf("read-only, version 3:\n%s\nwant\n%s", got, before)
	}
	ro.Close()

	if db, err = Open(path, Options{NoSync: true}); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.bolt.View(func(btx *bolt.Tx) error {
		if v := btx.Bucket(bucketMeta).Get(keyVersion); !bytes.Equal(v, []byte{SchemaVersion}) || SchemaVersion != 5 {
			t.Errorf("version %v after a read-write open; want [5]", v)
		}
		return nil
	})
	if got := state(t, db, "ds"); got != before {
		t.Errorf("after the upgrade:\n%s\nwant\n%s", got, before)
	}
	addAll(t, db, []rec{{Excluded, "a", 1, 1, 1}, {Turns, "b#1", 1, 1, 1}})
	db.View(func(v *View) error {
		s, err := v.Summary("ds")
		if err != nil {
			t.Fatal(err)
		}
		if s.Stage(Excluded).Records != 1 || s.Stage(Turns).Records != 1 {
			t.Errorf("new stages after the upgrade: excluded %d, turns %d records; want 1 and 1", s.Stage(Excluded).Records, s.Stage(Turns).Records)
		}
		return nil
	})
	// The answer indexed by version 3, excluded now, is counted as such.
	if o := checkOverlap(t, db, "ds", "after the upgrade"); o.RawExcluded != 1 {
		t.Errorf("overlap after excluding a version 3 answer: %+v; want RawExcluded 1", o)
	}
}

// openFailingAt opens the index at path with its k-th commit made to fail;
// *failed reports whether that commit came.
func openFailingAt(t *testing.T, path string, k int) (*DB, *bool) {
	t.Helper()
	failed := new(bool)
	db, err := Open(path, Options{NoSync: true, FailCommit: func(n int) error {
		if n == k {
			*failed = true
			return errors.New("injected")
		}
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return db, failed
}

// forgetPath begins forgetting the file at path, unless it is already reset
// (a forget begun by an earlier run).
func forgetPath(db *DB, path string) error {
	return db.Update(func(tx *Tx) error {
		fs, _, err := tx.File(path)
		if err != nil || fs.ID == 0 {
			return err
		}
		_, err = tx.ForgetFile(&fs)
		return err
	})
}
