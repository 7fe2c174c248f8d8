package export

import (
	"bytes"
	"testing"

	"gendex/ingest"
	"gendex/store"
)

// TestKnownLinesAsNormalize: what knownLines reads back from the records
// export writes (both formats, every record of the fixture, with and
// without a tokenizer) is what the index's normalizer reads from them: the
// id and the length of input_ids. Lines not of export's layout, or with an
// escape in the id, are refused (they are parsed instead).
func TestKnownLinesAsNormalize(t *testing.T) {
	for _, cfg := range []Config{{Format: IDs, Tokenizer: &fakeTokenizer{}}, {Format: Conversations, KeepReasoning: true}} {
		d, db := fixture(t, fixturePrompts, fixtureRaw)
		_, tok, _ := runExport(t, db, d, cfg)
		known, ok := knownLines([]byte(tok), nil)
		if !ok || len(known) == 0 {
			t.Fatalf("format %s: knownLines refused export's records:\n%s", cfg.Format, tok)
		}
		lines := bytes.SplitAfter([]byte(tok), []byte("\n"))
		for i, k := range known {
			var rec store.Record
			if _, err := ingest.Normalize(bytes.TrimSuffix(lines[i], []byte("\n")), store.Tokenized, &rec); err != nil {
				t.Fatal(err)
			}
			if k.ID != rec.ID || k.PromptTokens != rec.PromptTokens {
				t.Errorf("format %s, line %d: knownLines says %+v; the normalizer %q, %d", cfg.Format, i+1, k, rec.ID, rec.PromptTokens)
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
