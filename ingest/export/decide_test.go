package export

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDecideLineAsExport: every answer of the fixture, decided in memory
// with its prompt line (DecideLine, as gen --export does), gives the line
// Export writes from the files: the same record, or the same exclusion;
// and an answer Export leaves is left. In both formats, with and without a
// tokenizer, with --max-len and --include-truncated. Only a bad answer's
// detail differs: in memory the answer has no line number yet.
func TestDecideLineAsExport(t *testing.T) {
	prompts := map[string][]byte{}
	promptLine := map[string]int64{}
	for i, l := range strings.Split(strings.TrimSpace(fixturePrompts), "\n") {
		var p struct{ ID string }
		json.Unmarshal([]byte(l), &p)
		prompts[p.ID], promptLine[p.ID] = []byte(l), int64(i+1)
	}
	for _, cfg := range []Config{
		{Format: IDs},
		{Format: IDs, Tokenizer: &fakeTokenizer{}},
		{Format: IDs, MaxLen: 5, IncludeTruncated: true},
		{Format: Conversations, KeepReasoning: true},
		{Format: Conversations, MaxLen: 8},
	} {
		d, db := fixture(t, fixturePrompts, fixtureRaw)
		res, _, _ := runExport(t, db, d, cfg)
		tok, _ := os.ReadFile(d.Tokenized()) // with their answer_sum
		exc, _ := os.ReadFile(d.Excluded())
		want := map[string]string{} // id -> its line, from the files
		for _, l := range strings.SplitAfter(string(tok)+string(exc), "\n") {
			var m struct{ ID string }
			if json.Unmarshal([]byte(l), &m) == nil {
				want[m.ID] = l
			}
		}
		cfg.Now = func() time.Time { return fixedNow }
		dir := filepath.Dir(d.Tokenized()) // the answers' and the prompts' folder
		raw, promptsPath := filepath.Join(dir, "raw_responses.jsonl"), filepath.Join(dir, "prompts.jsonl")
		left := 0
		for _, answer := range strings.SplitAfter(strings.TrimSpace(fixtureRaw), "\n") {
			answer = strings.TrimSuffix(answer, "\n")
			var m struct{ ID string }
			json.Unmarshal([]byte(answer), &m)
			p := prompts[m.ID]
			got, err := cfg.DecideLine(context.Background(), m.ID, []byte(answer), raw, p, promptsPath, promptLine[m.ID])
			if err != nil {
				t.Fatalf("%+v: %s: %v", cfg, m.ID, err)
			}
			w, ok := want[m.ID]
			switch {
			case got.Left != "":
				left++
				if ok {
					t.Errorf("format %d: %s left (%s); export wrote %s", cfg.Format, m.ID, got.Left, w)
				}
			case got.Reason == ReasonBadAnswer:
				if !strings.Contains(w, `"reason":"bad_answer"`) || !strings.Contains(string(got.Line), "raw_responses.jsonl (the answer to "+m.ID+")") {
					t.Errorf("format %d: %s: %s; export wrote %s", cfg.Format, m.ID, got.Line, w)
				}
			case string(got.Line) != w:
				t.Errorf("format %d: %s:\n got %s\nwant %s", cfg.Format, m.ID, got.Line, w)
			case (got.Reason != "") != strings.Contains(w, `"reason":`):
				t.Errorf("format %d: %s: Reason %q for %s", cfg.Format, m.ID, got.Reason, w)
			}
		}
		if want := res.LeftNeedsServer() + res.LeftBadPrompt() + res.LeftNoPrompt(); left != want {
			t.Errorf("format %d: %d left in memory; export left %d", cfg.Format, left, want)
		}
	}
}

// TestCheckFormat: a records file of one format refuses the other; a
// missing or empty file, or one of the same format, is fine.
func TestCheckFormat(t *testing.T) {
	dir := t.TempDir()
	ids, conv, empty := dir+"/ids.jsonl", dir+"/conv.jsonl", dir+"/empty.jsonl"
	os.WriteFile(ids, []byte(`{"id":"a","input_ids":[1],"loss_mask":[0]}`+"\n"), 0o644)
	os.WriteFile(conv, []byte(`{"id":"a","conversations":[{"role":"user","content":"x"}]}`+"\n"), 0o644)
	os.WriteFile(empty, nil, 0o644)
	for _, tc := range []struct {
		path string
		f    Format
		bad  bool
	}{{ids, IDs, false}, {ids, Conversations, true}, {conv, Conversations, false}, {conv, IDs, true},
		{empty, IDs, false}, {dir + "/none.jsonl", Conversations, false}} {
		if err := CheckFormat(tc.path, tc.f); (err != nil) != tc.bad {
			t.Errorf("CheckFormat(%s, %s) = %v", tc.path, tc.f, err)
		}
	}
}

// BenchmarkDecideLine measures gen --export's cost per answer: one ids
// decision of a ~1 KB answer to a token-id prompt, in memory.
func BenchmarkDecideLine(b *testing.B) {
	var out, in bytes.Buffer
	out.WriteString(`{"id":"x1","output_ids":[`)
	for i := range 200 {
		if i > 0 {
			out.WriteByte(',')
		}
		out.WriteString("12345")
	}
	out.WriteString(`],"text":"an answer","prompt_tokens":40,"completion_tokens":200,"finish_reason":"stop","finished_at":"2026-12-01T12:00:00.000Z"}`)
	in.WriteString(`{"id":"x1","input_ids":[`)
	for i := range 40 {
		if i > 0 {
			in.WriteByte(',')
		}
		in.WriteString("678")
	}
	in.WriteString("]}")
	c := Config{Format: IDs}
	b.SetBytes(int64(out.Len()))
	for b.Loop() {
		d, err := c.DecideLine(context.Background(), "x1", out.Bytes(), "raw.jsonl", in.Bytes(), "prompts.jsonl", 1)
		if err != nil || d.Line == nil || d.Reason != "" {
			b.Fatal(d, err)
		}
	}
}
