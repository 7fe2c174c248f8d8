package ingest

import (
	"testing"

	"gendex/store"
)

// A line that names its "sample" is its unit's record in every stage but
// prompts (a turn's key is its unit's and "#i"), and keeps how many samples
// it names; a "sample" that is no whole number is another tool's field.
func TestNormalizeSample(t *testing.T) {
	for _, c := range []struct {
		stage   store.Stage
		line    string
		id      string
		samples uint32
	}{
		{store.Raw, `{"id":"q","sample":2,"samples":3,"completion_tokens":1}`, store.UnitID("q", 2), 3},
		{store.Raw, `{"id":"q","sample":0,"samples":3,"completion_tokens":1}`, "q", 3},
		{store.Raw, `{"id":"q","sample":4,"completion_tokens":1}`, store.UnitID("q", 4), 5},
		{store.Raw, `{"id":"q","sample":1,"samples":1,"completion_tokens":1}`, store.UnitID("q", 1), 2},
		{store.Raw, `{"id":"q","completion_tokens":1}`, "q", 0},
		{store.Raw, `{"id":"q","sample":"a text","completion_tokens":1}`, "q", 0},
		{store.Raw, `{"id":"q","sample":-1,"completion_tokens":1}`, "q", 0},
		{store.Raw, `{"id":"q","sample":1,"meta_info":{"completion_tokens":1}}`, store.UnitID("q", 1), 2},
		{store.Turns, `{"id":"q","sample":2,"samples":3,"turn":1,"completion_tokens":1}`, store.UnitID("q", 2) + "#1", 3},
		{store.Errors, `{"id":"q","sample":2,"samples":3,"status":500,"error":"x"}`, store.UnitID("q", 2), 3},
		{store.Tokenized, `{"id":"q","sample":2,"samples":3,"input_ids":[1]}`, store.UnitID("q", 2), 3},
		{store.Excluded, `{"id":"q","sample":1,"samples":3,"reason":"length"}`, store.UnitID("q", 1), 3},
		{store.Prompts, `{"id":"q","sample":2,"text":"t"}`, "q", 0},
	} {
		var rec store.Record
		if _, err := Normalize([]byte(c.line), c.stage, &rec); err != nil || rec.ID != c.id || rec.Samples != c.samples {
			t.Errorf("%s %s: id %q samples %d (%v); want %q and %d", c.stage, c.line, rec.ID, rec.Samples, err, c.id, c.samples)
		}
	}
}
