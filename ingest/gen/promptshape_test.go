package gen

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"gendex/ingest"
	"gendex/store"
)

// TestClassify: each prompt line is counted by what it holds, by gen's
// keys or at a --prompt path; a line whose prompt is at the path is read
// as ParsePrompt reads the same prompt under gen's key.
func TestClassify(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line, path string
		want       lineShape
	}{
		{`{"id":"a","input_ids":[1,2,3]}`, "", lineIDs},
		{`{"id":"a","input_ids":[1,2,3],"max_new_tokens":4}`, "", lineIDs},
		{`{"id":"a","text":"hi"}`, "", lineText},
		{`{"id":"a","messages":[{"role":"user","content":"hi"}]}`, "", lineMessages},
		{`{"id":"a","conversations":[{"from":"human","value":"hi"}]}`, "", lineConvos},
		{`{"id":"a","text":null,"messages":[{"role":"user","content":"hi"}]}`, "", lineMessages},
		{`{"meta":{"uid":"u"},"prompt":"hi"}`, "", lineNone},
		{`{"id":"a","text":"x","input_ids":[1]}`, "", lineMany},
		{`[1,2]`, "", lineBad},
		{`{"id":`, "", lineBad},
		{`{"meta":{"uid":"u"},"prompt":"hi"}`, "prompt", lineText},
		{`{"d":{"turns":[{"role":"user","content":"hi"}]}}`, "d.turns", lineMessages},
		{`{"d":{"turns":[{"from":"human","value":"hi"}]}}`, "d.turns", lineConvos},
		{`{"d":[{"ids":[5,6]}]}`, "d.0.ids", lineIDs},
		{`{"d":[{"ids":[5,6]}]}`, "d.1.ids", lineNone},
		{`{"prompt":null}`, "prompt", lineNone},
		{`{"prompt":{"a":1}}`, "prompt", lineNone},
		{`{"prompt":7}`, "prompt", lineNone},
	} {
		var path []string
		if tc.path != "" {
			path = strings.Split(tc.path, ".")
		}
		if got := classify([]byte(tc.line), path); got != tc.want {
			t.Errorf("classify(%s, %q) = %s; want %s", tc.line, tc.path, lineShapeNames[got], lineShapeNames[tc.want])
		}
	}

	for _, tc := range []struct{ at, plain string }{
		{`{"x":{"q":"hello"},"max_new_tokens":9}`, `{"text":"hello","max_new_tokens":9}`},
		{`{"x":{"q":[{"from":"human","value":"a"},{"from":"gpt","value":"b"},{"from":"human","value":"c"},{"from":"gpt","value":"d"}]}}`,
			`{"conversations":[{"from":"human","value":"a"},{"from":"gpt","value":"b"},{"from":"human","value":"c"},{"from":"gpt","value":"d"}]}`},
		{`{"x":{"q":[{"role":"system","content":"s"},{"role":"user","content":"u"}]},"sampling_params":{"temperature":0.5}}`,
			`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}],"sampling_params":{"temperature":0.5}}`},
		{`{"x":{"q":[3,4,5]}}`, `{"input_ids":[3,4,5]}`},
	} {
		got, err := parsePromptAt([]byte(tc.at), []string{"x", "q"}, "i", 1)
		want, werr := ParsePrompt([]byte(tc.plain), "i", 1)
		if err != nil || werr != nil {
			t.Fatalf("%s: %v / %v", tc.at, err, werr)
		}
		if g, w := promptString(got), promptString(want); g != w {
			t.Errorf("%s:\n got %s\nwant %s", tc.at, g, w)
		}
	}
	if _, err := parsePromptAt([]byte(`{"x":{}}`), []string{"x", "q"}, "i", 1); !errors.Is(err, errNoPrompt) || !strings.Contains(err.Error(), "x.q") {
		t.Errorf("nothing at the path: %v", err)
	}
}

func promptString(p *Prompt) string {
	var b strings.Builder
	b.WriteString(p.Text)
	for _, m := range p.Messages {
		b.WriteString("|" + m.Role + ":" + m.Content)
	}
	for _, id := range p.InputIDs {
		b.WriteString(" " + string(rune('0'+id)))
	}
	if p.Sampling.MaxNewTokens != nil {
		b.WriteString(" max=" + string(rune('0'+*p.Sampling.MaxNewTokens)))
	}
	if p.Sampling.Temperature != nil {
		b.WriteString(" temp")
	}
	b.WriteString(" turns=" + string(rune('0'+p.Turns)))
	return b.String()
}

// TestLeftUnsent: a run that sent nothing while the index holds prompts
// without an answer or an error ends in an error that says so (a script
// must not take it for done); one that left prompts unsent for their
// shape says how many; one that sent a prompt, or was interrupted, or had
// nothing missing, ends without.
func TestLeftUnsent(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	writePrompts(t, root, "D", "text", 3)
	db := openDB(t, filepath.Join(t.TempDir(), "g.db"))
	defer db.Close()
	path := filepath.Join(root, "D", "prompts.jsonl")
	ix := &ingest.Indexer{DB: db}
	if _, err := ix.IndexFile(t.Context(), ingest.Source{Path: path, Dataset: "D", Stage: store.Prompts}); err != nil {
		t.Fatal(err)
	}
	newFeeder := func() *feeder {
		return &feeder{cfg: &Config{}, db: db, sets: []*dsRun{{Dataset: Dataset{Name: "D", Prompts: []string{path}}, scan: &promptScan{}}}}
	}
	if err := newFeeder().leftUnsent(&Summary{}); err == nil || !strings.Contains(err.Error(), "no prompt was sent, yet 3 are missing") {
		t.Errorf("nothing sent, 3 missing: %v", err)
	}
	fe := newFeeder()
	fe.sets[0].scan.unsent.Add(2)
	if err := fe.leftUnsent(&Summary{}); err == nil || !strings.Contains(err.Error(), "2 prompts not sent for their shape (still to go)") {
		t.Errorf("2 unsent: %v", err)
	}
	fe = newFeeder()
	fe.sets[0].scan.fed.Add(1)
	if err := fe.leftUnsent(&Summary{}); err != nil {
		t.Errorf("one sent: %v", err)
	}
	if err := newFeeder().leftUnsent(&Summary{Interrupted: true}); err != nil {
		t.Errorf("interrupted: %v", err)
	}
}
