package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckReadsConversations: check's content checks read a conversation
// line's turns: multi-turn ShareGPT answered turn by turn, and tool
// conversations whose record ends at the model's call with no text (as
// their data ends at its call), are ready, not empty_content; a
// conversation with a turn that says nothing is empty_content. (Before,
// every conversation record was empty_content: check read no text in a
// line whose text is in its turns.)
func TestCheckReadsConversations(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := range 6 {
		lines = append(lines, fmt.Sprintf(`{"id":"c%d","conversations":[{"from":"system","value":"Be brief."},{"from":"human","value":"Hi %d"},{"from":"gpt","value":"Hello."},`+
			`{"from":"human","value":"Name %d colours."},{"from":"gpt","value":"Red."},{"from":"human","value":"And shapes?"},{"from":"gpt","value":"Square."}]}`, i, i, i))
	}
	multi := toolDataset(t, lines...)
	lines = nil
	for i := range 24 {
		lines = append(lines, toolShapes[0].line(i)) // atcall: the data ends at the call
	}
	atCall := toolDataset(t, lines...)
	check := func(db, dir string) (int, string) {
		t.Helper()
		r := gendex(t, testEnv(nil), "--db", db, "check", "--include-truncated", "--allow-simulated", dir)
		return r.code, r.stdout + r.stderr
	}
	for _, tc := range []struct {
		name, dir string
		args      []string
	}{
		{"multi-turn", multi, []string{"--server", "sim"}},
		{"at call", atCall, []string{"--server", "sim", "--sim-tool-calls", "--sim-tool-call-parser", "qwen25", "--exclude-tool-stops"}},
	} {
		db := filepath.Join(t.TempDir(), "g.db")
		args := append([]string{"--db", db, "gen", "--max-new-tokens", "400", "--include-truncated", "--export", "conversations"}, tc.args...)
		if r := gendex(t, testEnv(nil), append(args, tc.dir)...); r.code != 0 {
			t.Fatal(r)
		}
		if code, out := check(db, tc.dir); code != 0 || strings.Contains(out, "empty_content") {
			t.Errorf("%s: check exit %d, want 0 and no empty_content:\n%s", tc.name, code, out)
		}
		if tc.dir == atCall {
			endsAtCall := 0
			for _, l := range readRecords(t, filepath.Join(tc.dir, "tokenized.jsonl")) {
				var conv []recordTurn
				json.Unmarshal(l["conversations"], &conv)
				if last := conv[len(conv)-1]; len(last.ToolCalls) > 0 && strings.TrimSpace(last.Content) == "" {
					endsAtCall++
				}
			}
			if endsAtCall == 0 {
				t.Error("no record ends at the model's call without text: the test needs one")
			}
			continue
		}
		// A turn that says nothing: empty_content.
		raw := filepath.Join(tc.dir, "raw_responses.jsonl")
		b, _ := os.ReadFile(raw)
		first, rest, _ := bytes.Cut(b, []byte("\n"))
		var l map[string]json.RawMessage
		var turns []map[string]json.RawMessage
		json.Unmarshal(first, &l)
		json.Unmarshal(l["turns"], &turns)
		turns[1]["text"] = json.RawMessage(`""`)
		l["turns"], _ = json.Marshal(turns)
		first, _ = json.Marshal(l)
		os.WriteFile(raw, append(append(first, '\n'), rest...), 0o644)
		if r := gendex(t, testEnv(nil), "--db", db, "ingest", tc.dir); r.code != 0 {
			t.Fatal(r)
		}
		if code, out := check(db, tc.dir); code != 1 || !strings.Contains(out, "empty_content 1") {
			t.Errorf("a conversation whose second turn is empty: check exit %d, want 1 and empty_content 1:\n%s", code, out)
		}
	}
}
