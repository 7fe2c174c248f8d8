package ingest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gendex/store"
)

// TestIndexWrittenEqualsIndexFile: a writer appends whole lines to a file
// and indexes each write from its own bytes (IndexWritten), sometimes a
// write late, sometimes two writes ahead of the index, sometimes with
// IndexFile instead; the index then holds exactly what a fresh IndexFile
// of the whole file gives: every record, the file's state and every
// counter. The lines cover what the indexer treats specially: a BOM
// before the first, CRLF ends, blank and invalid lines, duplicates, errors
// in a response file, prompts without an id.
func TestIndexWrittenEqualsIndexFile(t *testing.T) {
	t.Parallel()
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { indexWrittenOnce(t, seed) })
	}
}

// writtenLine is the i-th line of a file of stage, with its newline.
func writtenLine(rng *rand.Rand, stage store.Stage, i int) string {
	id := fmt.Sprintf("w%05d", i)
	if rng.IntN(20) == 0 {
		id = fmt.Sprintf("w%05d", rng.IntN(i+1)) // a duplicate, often
	}
	nl := "\n"
	if rng.IntN(10) == 0 {
		nl = "\r\n"
	}
	switch rng.IntN(30) {
	case 0:
		return nl
	case 1:
		return `{"id":"` + id + `",` + nl // invalid
	case 2:
		return `[1,2]` + nl // not an object
	}
	ids := make([]string, 1+rng.IntN(40))
	for j := range ids {
		ids[j] = fmt.Sprint(rng.IntN(200000))
	}
	switch stage {
	case store.Tokenized:
		mask := strings.Repeat("0,", len(ids)-1) + "1"
		return fmt.Sprintf(`{"id":%q,"input_ids":[%s],"loss_mask":[%s]}`, id, strings.Join(ids, ","), mask) + nl
	case store.Excluded:
		return fmt.Sprintf(`{"id":%q,"reason":"length","detail":"cut at %d","excluded_at":"2026-12-01T12:00:00.000Z"}`, id, i) + nl
	case store.Prompts:
		if rng.IntN(8) == 0 {
			return fmt.Sprintf(`{"input_ids":[%s]}`, strings.Join(ids, ",")) + nl // no id
		}
		return fmt.Sprintf(`{"id":%q,"input_ids":[%s]}`, id, strings.Join(ids, ",")) + nl
	default: // raw
		if rng.IntN(10) == 0 {
			return fmt.Sprintf(`{"id":%q,"error":{"message":"overloaded","code":503}}`, id) + nl
		}
		return fmt.Sprintf(`{"id":%q,"output_ids":[%s],"completion_tokens":%d,"finish_reason":"stop","finished_at":"2026-12-01T10:00:%02d.000Z"}`,
			id, strings.Join(ids, ","), len(ids), i%60) + nl
	}
}

func indexWrittenOnce(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	dir := t.TempDir()
	open := func(name string) *store.DB {
		db, err := store.Open(filepath.Join(dir, name), store.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	stages := []store.Stage{store.Tokenized, store.Excluded, store.Raw, store.Prompts}
	stage := stages[seed%uint64(len(stages))]
	src := Source{Path: filepath.Join(dir, "out.jsonl"), Dataset: "D", Stage: stage}
	f, err := os.OpenFile(src.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	inc := &Indexer{DB: open("inc.db"), BatchRecords: 1 + rng.IntN(50)}
	if rng.IntN(2) == 0 {
		inc.ReleaseAbove = 1 // always over: the index's pages are released in and after every commit
	}
	var size int64
	var pending []written // written, not indexed yet
	line := 0
	for range 40 {
		var piece strings.Builder
		if size == 0 && rng.IntN(2) == 0 {
			piece.WriteString("\xef\xbb\xbf")
		}
		for range rng.IntN(30) {
			piece.WriteString(writtenLine(rng, stage, line))
			line++
		}
		if piece.Len() == 0 {
			continue
		}
		data := []byte(piece.String())
		if _, err := f.Write(data); err != nil {
			t.Fatal(err)
		}
		pending = append(pending, written{data: data, at: size})
		size += int64(len(data))
		switch rng.IntN(6) {
		case 0: // the writer goes on before the index
			continue
		case 1: // a write whose lines are never given: read from the file
			pending = pending[:0]
			if _, err := inc.IndexFile(t.Context(), src); err != nil {
				t.Fatal(err)
			}
			continue
		}
		for _, w := range pending {
			indexWritten(t, rng, inc, src, w)
		}
		pending = pending[:0]
	}
	for _, w := range pending {
		indexWritten(t, rng, inc, src, w)
	}
	if _, err := inc.IndexFile(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	fresh := &Indexer{DB: open("fresh.db")}
	if _, err := fresh.IndexFile(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	got, want := indexDump(t, inc.DB, src), indexDump(t, fresh.DB, src)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s stage, %d lines: the index built from the writes differs from a fresh one:\n got %+v\nwant %+v", stage, line, got, want)
	}
}

// indexWritten indexes w with IndexWritten: with its lines parsed ahead
// (in another goroutine), or parsed ahead at a wrong offset, or not.
func indexWritten(t *testing.T, rng *rand.Rand, ix *Indexer, src Source, w written) {
	t.Helper()
	var p *Parsed
	switch rng.IntN(4) {
	case 0, 1:
		done := make(chan *Parsed)
		go func() { done <- ix.ParseWritten(src, w.data, w.at) }()
		p = <-done
	case 2:
		p = ix.ParseWritten(src, w.data, w.at+1)
	}
	if _, err := ix.IndexWritten(t.Context(), src, w.data, w.at, p); err != nil {
		t.Fatal(err)
	}
}

type dump struct {
	File    store.FileState
	Summary store.Summary
	Records map[store.Stage][]store.Record
}

// indexDump is everything the index holds of dataset D and src's file, but
// the moment records without their own time were indexed.
func indexDump(t *testing.T, db *store.DB, src Source) dump {
	t.Helper()
	var d dump
	err := db.View(func(v *store.View) error {
		var err error
		if d.File, _, err = v.File(src.Path); err != nil {
			return err
		}
		if d.Summary, err = v.Summary("D"); err != nil {
			return err
		}
		d.Records = map[store.Stage][]store.Record{}
		for _, st := range store.Stages() {
			err := v.Each("D", st, func(r *store.Record) error {
				rec := *r
				if !rec.OwnTime {
					rec.Time = 0
				}
				d.Records[st] = append(d.Records[st], rec)
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestIndexWrittenUsesTheBytesGiven: the lines are indexed from the bytes
// given, not read back, when they start where the index stopped; and from
// the file when they do not.
func TestIndexWrittenUsesTheBytesGiven(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db, err := store.Open(filepath.Join(dir, "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ix := &Indexer{DB: db}
	src := Source{Path: filepath.Join(dir, "tokenized.jsonl"), Dataset: "D", Stage: store.Tokenized}
	first, second := `{"id":"a","input_ids":[1]}`+"\n", `{"id":"b","input_ids":[2]}`+"\n"
	os.WriteFile(src.Path, []byte(first+second), 0o644)
	// The index has not read the file: the bytes given at 0 are used.
	if _, err := ix.IndexWritten(t.Context(), src, []byte(`{"id":"x","input_ids":[1]}`+"\n"), 0, nil); err != nil {
		t.Fatal(err)
	}
	// Not where the index stopped: the file is read.
	if _, err := ix.IndexWritten(t.Context(), src, []byte(`{"id":"y","input_ids":[2]}`+"\n"), 5, nil); err != nil {
		t.Fatal(err)
	}
	var ids []string
	db.View(func(v *store.View) error {
		return v.Each("D", store.Tokenized, func(r *store.Record) error { ids = append(ids, r.ID); return nil })
	})
	if !reflect.DeepEqual(ids, []string{"b", "x"}) {
		t.Errorf("indexed %v; want x (from the bytes given) and b (from the file)", ids)
	}
}

// TestKnownWrittenEqualsIndexFile: tokenized lines indexed from what their
// writer knows of them (KnownWritten: ids and input_ids lengths, no parse),
// write after write, with small and large batches, give the index a fresh
// IndexFile of the file gives: every record, the file's state, every
// counter. KnownWritten refuses what it cannot stand for: another stage,
// a count of known lines that is not the file's, a record the store
// refuses.
func TestKnownWrittenEqualsIndexFile(t *testing.T) {
	t.Parallel()
	for seed := range uint64(6) {
		rng := rand.New(rand.NewPCG(seed, 3))
		dir := t.TempDir()
		src := Source{Path: filepath.Join(dir, "tokenized.jsonl"), Dataset: "D", Stage: store.Tokenized}
		f, err := os.OpenFile(src.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		inc, fresh := &Indexer{DB: openTemp(t), BatchRecords: 1 + rng.IntN(50)}, &Indexer{DB: openTemp(t)}
		var size int64
		line := 0
		for range 30 {
			var data []byte
			var known []KnownLine
			for range 1 + rng.IntN(40) {
				ids := make([]string, rng.IntN(30)) // input_ids may be empty
				for j := range ids {
					ids[j] = fmt.Sprint(rng.IntN(200000))
				}
				id := fmt.Sprintf("k%05d", line)
				line++
				if rng.IntN(3) == 0 {
					data = fmt.Appendf(data, `{"id":%q,"conversations":[{"role":"user","content":"x"}]}`+"\n", id)
					known = append(known, KnownLine{ID: id, PromptTokens: store.Unknown})
					continue
				}
				data = fmt.Appendf(data, `{"id":%q,"input_ids":[%s],"loss_mask":[%s]}`+"\n", id, strings.Join(ids, ","), strings.Repeat(",1", len(ids))[min(1, len(ids)):])
				known = append(known, KnownLine{ID: id, PromptTokens: int64(len(ids))})
			}
			if _, err := f.Write(data); err != nil {
				t.Fatal(err)
			}
			p := inc.KnownWritten(src, data, size, known)
			if p == nil {
				t.Fatalf("seed %d: KnownWritten refused %d lines it knows", seed, len(known))
			}
			if inc.KnownWritten(src, data, size, known[1:]) != nil || inc.KnownWritten(Source{Path: src.Path, Dataset: "D", Stage: store.Raw}, data, size, known) != nil {
				t.Fatal("KnownWritten took a wrong count of lines, or the raw stage")
			}
			if _, err := inc.IndexWritten(t.Context(), src, data, size, p); err != nil {
				t.Fatal(err)
			}
			size += int64(len(data))
		}
		f.Close()
		if _, err := fresh.IndexFile(t.Context(), src); err != nil {
			t.Fatal(err)
		}
		if got, want := indexDump(t, inc.DB, src), indexDump(t, fresh.DB, src); !reflect.DeepEqual(got, want) {
			t.Errorf("seed %d: the index built from known lines differs from a fresh one:\n got %+v %d\nwant %+v %d", seed, got.File, len(got.Records[store.Tokenized]), want.File, len(want.Records[store.Tokenized]))
		}
	}
	long := KnownLine{ID: strings.Repeat("x", 70000), PromptTokens: 1}
	data := []byte(`{"id":"` + long.ID + `","input_ids":[1],"loss_mask":[1]}` + "\n")
	ix := &Indexer{DB: openTemp(t)}
	if ix.KnownWritten(Source{Path: filepath.Join(t.TempDir(), "t.jsonl"), Dataset: "D", Stage: store.Tokenized}, data, 0, []KnownLine{long}) != nil {
		t.Error("KnownWritten took an id the store refuses")
	}
}

func openTemp(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
