package export

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest"
)

// TestFindTakesRecordsOnlyFromTheOutputFolder: with --out, the records and
// exclusions beside the answers are no sources of the export (they would
// be indexed as its records, and the output folder left empty); the
// output folder's own are. Without --out, the ones beside the answers are.
func TestFindTakesRecordsOnlyFromTheOutputFolder(t *testing.T) {
	root, out := t.TempDir(), t.TempDir()
	dir := filepath.Join(root, "U")
	os.MkdirAll(dir, 0o755)
	for _, name := range []string{"prompts.jsonl", "raw_responses.jsonl", "tokenized.jsonl", "excluded.jsonl", "tokenized-1.jsonl"} {
		os.WriteFile(filepath.Join(dir, name), nil, 0o644)
	}
	os.MkdirAll(filepath.Join(out, "U"), 0o755)
	for _, name := range []string{"tokenized.jsonl", "excluded.jsonl", "raw_responses.jsonl"} {
		os.WriteFile(filepath.Join(out, "U", name), nil, 0o644)
	}
	names := func(d Dataset) string {
		var s []string
		for _, src := range d.Sources {
			rel, _ := filepath.Rel(filepath.Dir(filepath.Dir(src.Path)), src.Path)
			s = append(s, filepath.Base(filepath.Dir(filepath.Dir(src.Path)))+"/"+rel)
		}
		return strings.Join(s, " ")
	}
	beside, err := Find([]string{root}, "")
	if err != nil || len(beside) != 1 {
		t.Fatal(beside, err)
	}
	b := filepath.Base(root)
	if got, want := names(beside[0]), b+"/U/excluded.jsonl "+b+"/U/prompts.jsonl "+b+"/U/raw_responses.jsonl "+b+"/U/tokenized-1.jsonl "+b+"/U/tokenized.jsonl"; got != want || beside[0].Out != dir {
		t.Errorf("without --out: sources %s, out %s\nwant %s, out %s", got, beside[0].Out, want, dir)
	}
	sets, err := Find([]string{root}, out)
	if err != nil || len(sets) != 1 {
		t.Fatal(sets, err)
	}
	o := filepath.Base(out)
	if got, want := names(sets[0]), b+"/U/prompts.jsonl "+b+"/U/raw_responses.jsonl "+o+"/U/excluded.jsonl "+o+"/U/tokenized.jsonl"; got != want || sets[0].Out != filepath.Join(out, "U") {
		t.Errorf("with --out: sources %s, out %s\nwant %s", got, sets[0].Out, want)
	}
	// An output folder that does not exist yet has no sources.
	sets, err = Find([]string{dir}, filepath.Join(out, "new"))
	if err != nil || len(sets) != 1 || names(sets[0]) != b+"/U/prompts.jsonl "+b+"/U/raw_responses.jsonl" {
		t.Errorf("a new --out: %v %v", sets, err)
	}
}

// TestExportRefusesRecordsElsewhere: once the index holds a dataset's
// records from one folder, an export of it into another folder is refused
// before anything is written there (an index holds one record per answer:
// the records elsewhere would stand in for the new folder's), naming
// where they are and how many; into their own folder it goes on, and
// Where counts them there.
func TestExportRefusesRecordsElsewhere(t *testing.T) {
	d, db := fixture(t, fixturePrompts, fixtureRaw)
	res, _, _ := runExport(t, db, d, Config{Format: IDs})
	if res.Records == 0 || sum(res.Excluded) == 0 {
		t.Fatalf("the fixture's export: %+v", res)
	}
	other := d
	other.Out = filepath.Join(t.TempDir(), "U")
	x := &Exporter{Ix: &ingest.Indexer{DB: db}, Config: Config{Format: IDs}}
	_, err := x.Export(t.Context(), other)
	var e *ElsewhereError
	if !errors.As(err, &e) || len(e.Elsewhere) != 1 || e.Elsewhere[0].Dir != d.Out || e.Out != other.Out {
		t.Fatalf("export into another folder: %v", err)
	}
	p := e.Elsewhere[0]
	if p.Records != uint64(res.Records) || p.Exclusions != uint64(sum(res.Excluded)) || p.Gone {
		t.Errorf("the records elsewhere: %+v; want %d records, %d exclusions", p, res.Records, sum(res.Excluded))
	}
	if msg := err.Error(); !strings.Contains(msg, d.Out) || !strings.Contains(msg, other.Out) {
		t.Errorf("the refusal names neither folder: %s", msg)
	}
	if _, err := os.Stat(other.Out); !os.IsNotExist(err) {
		t.Errorf("the refused export made its folder: %v", err)
	}
	again, err := x.Export(t.Context(), d)
	if left := res.Left[0] + res.Left[1] + res.Left[2]; err != nil || again.Todo != left {
		t.Errorf("export into the records' own folder: %+v %v", again, err)
	}
	own, elsewhere, err := Where(db, d)
	if err != nil || len(elsewhere) != 0 || own != p {
		t.Errorf("Where: %+v %+v %v; want %+v", own, elsewhere, err, p)
	}
	// Records whose files are gone still stand in: said so.
	os.Remove(d.Tokenized())
	os.Remove(d.Excluded())
	if _, elsewhere, _ := Where(db, other); len(elsewhere) != 1 || !elsewhere[0].Gone || !strings.Contains(elsewhere[0].String(), "no longer on disk") {
		t.Errorf("records whose files are gone: %+v", elsewhere)
	}
}

func TestFileFormat(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, text string
		f          Format
		ok         bool
	}{
		{"ids", `{"id":"a","input_ids":[1],"loss_mask":[1]}` + "\n", IDs, true},
		{"conv", `{"id":"a","conversations":[]}` + "\n", Conversations, true},
		{"empty", "", 0, false},
		{"other", `{"id":"a"}` + "\n", 0, false},
	} {
		path := filepath.Join(dir, c.name)
		os.WriteFile(path, []byte(c.text), 0o644)
		f, ok, err := FileFormat(path)
		if err != nil || ok != c.ok || (ok && f != c.f) {
			t.Errorf("%s: %v %v %v", c.name, f, ok, err)
		}
	}
	if _, ok, err := FileFormat(filepath.Join(dir, "missing")); ok || err != nil {
		t.Errorf("a missing file: %v %v", ok, err)
	}
}
