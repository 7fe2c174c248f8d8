package gen

import (
	"reflect"
	"testing"
)

// idsPromptLines are lines the fast reading takes or leaves to
// encoding/json, at each of its edges.
var idsPromptLines = []string{
	`{"id":"a","input_ids":[1,2,3]}`,
	` { "input_ids" : [ 0 , 10 , 999999999999999999 ] , "id" : "b" } ` + "\n",
	`{"input_ids":[7]}`,
	`{"id":"ü\u00e9","input_ids":[1]}`,
	`{"id":"a","input_ids":[]}`,
	`{"id":"a","input_ids":[01]}`,
	`{"id":"a","input_ids":[-1]}`,
	`{"id":"a","input_ids":[1.0]}`,
	`{"id":"a","input_ids":[1e3]}`,
	`{"id":"a","input_ids":[1,]}`,
	`{"id":"a","input_ids":[9999999999999999999]}`,
	`{"id":"a","input_ids":null}`,
	`{"id":"a","input_ids":[1],"input_ids":[2]}`,
	`{"id":"a","id":"b","input_ids":[1]}`,
	`{"ID":"a","Input_IDs":[1]}`,
	`{"id":"a","input\u005fids":[1]}`,
	`{"id":5,"input_ids":[1]}`,
	`{"id":"a\"b","input_ids":[1]}`,
	`{"id":"a","input_ids":[1],"max_new_tokens":4}`,
	`{"id":"a","input_ids":[1]} x`,
	`{"id":"a","input_ids":[1]`,
	`{"id":"a","text":"hi"}`,
	`{"id":"a"}`,
	`{}`,
	`[1]`,
	``,
	"{\"id\":\"a\tb\",\"input_ids\":[1]}",
}

// TestIDsPromptAsJSON: whatever the fast reading takes, encoding/json
// reads the same way; what it leaves, ParsePrompt still reads (or
// refuses) as before.
func TestIDsPromptAsJSON(t *testing.T) {
	t.Parallel()
	for _, line := range idsPromptLines {
		checkIDsPrompt(t, []byte(line))
	}
	if _, ok := idsPrompt([]byte(idsPromptLines[0])); !ok {
		t.Errorf("%s: not read by the fast path", idsPromptLines[0])
	}
}

func FuzzIDsPrompt(f *testing.F) {
	for _, line := range idsPromptLines {
		f.Add([]byte(line))
	}
	f.Fuzz(func(t *testing.T, line []byte) { checkIDsPrompt(t, line) })
}

func checkIDsPrompt(t *testing.T, line []byte) {
	t.Helper()
	got, gerr := ParsePrompt(line, "x", 3)
	want, werr := parsePromptJSON(line, "x", 3)
	if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) || !reflect.DeepEqual(got, want) {
		t.Errorf("%q: ParsePrompt %+v, %v; encoding/json %+v, %v", line, got, gerr, want, werr)
	}
}
