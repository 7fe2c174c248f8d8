package export

import (
	"bytes"
	"os"
	"testing"

	"gendex/ingest"
	"gendex/store"
)

// TestKnownLinesAsNormalize: what knownLines reads back from the records
// export writes (both formats, every record of the fixture, with and
// without a tokenizer) is what the index's normalizer reads from them: the
// id, the length of input_ids and the answer it names (answer_sum). Lines not of export's layout, or with an
// escape in the id, are refused (they are parsed instead).
func TestKnownLinesAsNormalize(t *testing.T) {
	for _, cfg := range []Config{{Format: IDs, Tokenizer: &fakeTokenizer{}}, {Format: Conversations, KeepReasoning: true}} {
		d, db := fixture(t, fixturePrompts, fixtureRaw)
		runExport(t, db, d, cfg)
		tok, _ := os.ReadFile(d.Tokenized()) // with their answer_sum
		known, ok := knownLines(tok, nil)
		if !ok || len(known) == 0 {
			t.Fatalf("format %s: knownLines refused export's records:\n%s", cfg.Format, tok)
		}
		lines := bytes.SplitAfter(tok, []byte("\n"))
		for i, k := range known {
			var rec store.Record
			if _, err := ingest.Normalize(bytes.TrimSuffix(lines[i], []byte("\n")), store.Tokenized, &rec); err != nil {
				t.Fatal(err)
			}
			if k.ID != rec.ID || k.PromptTokens != rec.PromptTokens || !k.HasFrom || k.From != rec.From || k.HasFrom != rec.HasFrom {
				t.Errorf("format %s, line %d: knownLines says %+v; the normalizer %q, %d, from %x (%v)", cfg.Format, i+1, k, rec.ID, rec.PromptTokens, rec.From, rec.HasFrom)
			}
		}
	}
	for _, bad := range []string{
		`{"id":"a\"b","input_ids":[1],"loss_mask":[1]}`,
		`{"id":"a","loss_mask":[1],"input_ids":[1]}`,
		`{"custom_id":"a","input_ids":[1]}`,
		`{"id":"a","input_ids":[1`,
	} {
		if _, ok := knownLines([]byte(bad+"\n"), nil); ok {
			t.Errorf("knownLines took %s", bad)
		}
	}
	if k, ok := knownLines([]byte(`{"id":"e","input_ids":[],"loss_mask":[]}`+"\n"), nil); !ok || k[0].PromptTokens != 0 {
		t.Errorf("an empty input_ids: %+v %v", k, ok)
	}
}
