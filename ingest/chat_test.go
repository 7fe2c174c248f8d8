package ingest

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestParseTurns: OpenAI and ShareGPT turns read the same; an error names
// the turn.
func TestParseTurns(t *testing.T) {
	t.Parallel()
	var raw []json.RawMessage
	if err := json.Unmarshal([]byte(`[{"from":"system","value":"s"},{"from":"human","value":"q"},{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"user","content":null}]`), &raw); err != nil {
		t.Fatal(err)
	}
	got, err := ParseTurns(raw)
	want := []Turn{{Role: "system", Content: "s"}, {Role: "user", Content: "q"}, {Role: "assistant", Content: "ab"}, {Role: "user", Content: ""}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseTurns = %v, %v; want %v", got, err, want)
	}
	for _, tc := range []struct{ in, want string }{
		{`[{"role":"user","content":"x"},{"from":"bot","value":"y"}]`, `turn 2: unknown speaker "bot"`},
		{`[{"content":"x"}]`, "turn 1 has no role"},
		{`[{"role":"user","content":[{"type":"image_url"}]}]`, `turn 1: content part of type "image_url"`},
		{`[{"role":"user","content":5}]`, "turn 1: content is neither"},
	} {
		var raw []json.RawMessage
		if err := json.Unmarshal([]byte(tc.in), &raw); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseTurns(raw); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseTurns(%s) = %v; want an error with %q", tc.in, err, tc.want)
		}
	}
}
