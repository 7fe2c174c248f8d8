package export

import (
	"testing"

	"gendex/ingest"
	"gendex/store"
)

// TestParseAnswerReadsEachShapeOnce: parseAnswer reads a flat line, a
// conversation line and a chat line by their one scan; a key given twice
// is its last value, as everywhere in ingest, and a conversation line
// whose file maps an id path it lacks is still read turn by turn.
func TestParseAnswerReadsEachShapeOnce(t *testing.T) {
	rec := &store.Record{Finish: "stop", PromptTokens: 3, CompletionTokens: 2}
	noPath, _ := ingest.ParseIDPath("")
	byPath, err := ingest.ParseIDPath("meta.rid")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, line string
		m          ingest.IDPath
		texts      []string
		conv       bool
		outputIDs  string
	}{
		{"flat", `{"id":"a","text":"first","output_ids":[1,2],"text":"second","completion_tokens":2}`, noPath, []string{"second"}, false, "[1,2]"},
		{"chat", `{"id":"a","choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":2}}`, noPath, []string{"hi"}, false, ""},
		{"conversation", `{"id":"a","turns":[{"text":"one","finish_reason":"stop"},{"text":"two","finish_reason":"length"}]}`, noPath, []string{"one", "two"}, true, ""},
		{"conversation, id path missing", `{"id":"a","turns":[{"text":"one"}]}`, byPath, []string{"one"}, true, ""},
		{"turns null", `{"id":"a","turns":null,"text":"flat","completion_tokens":1}`, noPath, []string{"flat"}, false, ""},
	}
	for _, tt := range tests {
		a, err := parseAnswer([]byte(tt.line), rec, tt.m, nil)
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if a.conversation != tt.conv || len(a.turns) != len(tt.texts) {
			t.Errorf("%s: conversation %v, %d turns; want %v, %d", tt.name, a.conversation, len(a.turns), tt.conv, len(tt.texts))
			continue
		}
		for i, want := range tt.texts {
			if got := a.turns[i].content(); got != want {
				t.Errorf("%s: turn %d text %q, want %q", tt.name, i+1, got, want)
			}
		}
		if got := string(a.turns[0].outputIDs); got != tt.outputIDs {
			t.Errorf("%s: output_ids %q, want %q", tt.name, got, tt.outputIDs)
		}
		if !tt.conv && (a.turns[0].finish != "stop" || a.turns[0].completionTokens != 2) {
			t.Errorf("%s: finish %q, %d completion tokens; want the index record's", tt.name, a.turns[0].finish, a.turns[0].completionTokens)
		}
	}
	if _, err := parseAnswer([]byte(`{"id":"a","turns":[1,`), rec, noPath, nil); err == nil {
		t.Error("a broken line: no error")
	}
}
