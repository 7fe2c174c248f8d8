package ingest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gendex/store"
	"gendex/store/terminal"
)

// TestMissSaysWherePathStops: a path that names nothing says where it
// stops and what is there instead.
func TestMissSaysWherePathStops(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ line, path, want string }{
		{`{"meta":{"usage":{"in":1,"total":2}}}`, "meta.usage.out", "meta.usage.out: no such key; meta.usage has in, total"},
		{`{"a":1,"b":2}`, "x", "x: no such key; the line has a, b"},
		{`{"choices":[{"text":"a"}]}`, "choices.1.text", "choices.1: choices has 1 elements"},
		{`{"choices":[{"text":"a"}]}`, "choices.text", "choices is a list of 1: want a number after it (choices.0)"},
		{`{"a":"s"}`, "a.b", "a is a string, not an object"},
		{`{"a":{}}`, "a.b", "a.b: no such key; a has no keys"},
		{`{"a":{"b":null}}`, "a.b", ""},
		{`{"choices":[{"text":"a"}]}`, "choices.0.text", ""},
	} {
		var f fields
		b := []byte(c.line)
		top, _, err := readTop(b, &f, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := miss(b, top, strings.Split(c.path, ".")); got != c.want {
			t.Errorf("miss(%s, %s) = %q; want %q", c.line, c.path, got, c.want)
		}
	}
}

// TestCheckMapping: a map's path must match in one of the file's first
// lines; a failed request's line (the map's error) is not looked in for
// the others, a field a line may lack needs only its object, an error's
// path and a prompt file's fields but the id are not checked.
func TestCheckMapping(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i, c := range []struct {
		stage       store.Stage
		lines, spec string
		miss        string // "" when it passes
	}{
		{store.Raw, `{"uid":"1","failure":"boom"}` + "\n" + `{"uid":"2","answer":{"body":"x"}}`, "id=uid,text=answer.body,error=failure", ""},
		{store.Raw, `{"uid":"1","failure":"boom"}` + "\n" + `{"uid":"2","failure":"boom"}`, "id=uid,text=answer.body,error=failure", ""},
		{store.Raw, `{"uid":"1","answer":{"body":"x"}}`, "id=uid,reasoning=answer.thinking", ""},
		{store.Raw, `{"uid":"1","answer":{"body":"x"}}`, "id=uid,reasoning=ans.thinking", "reasoning (line 1): ans: no such key; the line has uid, answer"},
		{store.Raw, `{"uid":"1"}`, "id=uid,error=fail.why", ""},
		{store.Prompts, `{"uid":"1","q":"hi"}`, "id=uid,text=answer.body", ""},
		{store.Prompts, `{"id":"1","q":"hi"}`, "uid", "id (line 1): uid: no such key; the line has id, q"},
		{store.Raw, "\n" + `{"uid":"1","n":[1,2]}`, "id=uid,completion_tokens=n.2", "completion_tokens (line 2): n.2: n has 2 elements"},
		{store.Raw, "", "id=uid,text=x", ""},
		{store.Raw, "{not json\n", "id=uid,text=x", ""},
	} {
		path := filepath.Join(dir, "f"+string(rune('a'+i))+".jsonl")
		if err := os.WriteFile(path, []byte(c.lines+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := CheckMapping(Source{Path: path, Stage: c.stage, IDPath: c.spec})
		switch me, _ := err.(*MappingError); {
		case c.miss == "" && err != nil:
			t.Errorf("%s with %s: %v; want it to pass", c.lines, c.spec, err)
		case c.miss != "" && (me == nil || len(me.Misses) != 1 || me.Misses[0] != c.miss):
			t.Errorf("%s with %s: %v; want %q", c.lines, c.spec, err, c.miss)
		}
	}
}

// TestMappingChange: a new map for a file says, field by field, what
// changed.
func TestMappingChange(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ now, was, want string }{
		{"id=uid,completion_tokens=s.out", "id=uid,completion_tokens=s.total,text=a",
			"its map changed: completion_tokens now at s.out (was s.total); text now by the built-in rules (was a)"},
		{"question_id", "", "its map changed: id now at question_id (was custom_id or id)"},
		{"", "meta.uid", "its map changed: id now at custom_id or id (was meta.uid)"},
	} {
		if got := mappingChange(c.now, c.was); got != c.want {
			t.Errorf("mappingChange(%q, %q) = %q; want %q", c.now, c.was, got, c.want)
		}
	}
}

// TestExplainFindsWhereFrom: the sources Explain finds in shapes whose
// values sit in lists and parts, under a stated total, or are a list's
// length; a stream's event before its last is said to be skipped.
func TestExplainFindsWhereFrom(t *testing.T) {
	t.Parallel()
	lines := []string{
		`{"id":17,"output_ids":[5,6,7,8]}`,
		`{"id":"resp_1","object":"response","status":"completed","output":[{"type":"message","content":[` +
			`{"type":"output_text","text":"Hel"},{"type":"output_text","text":"lo"}]}],` +
			`"usage":{"input_tokens":5,"output_tokens":2,"total_tokens":7}}`,
		`{"model":"llama3","created_at":"2026-01-02T03:04:05Z","response":"Hi","done":false}`,
	}
	path := filepath.Join(t.TempDir(), "raw_responses.jsonl")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reps, err := Explain(Source{Path: path, Stage: store.Raw}, 5)
	if err != nil || len(reps) != 3 {
		t.Fatalf("Explain: %v, %d lines", err, len(reps))
	}
	from := func(r LineReport, field string) string {
		for _, f := range r.Fields {
			if f.Field == field {
				return f.Value + " from " + strings.Join(f.From, ", ")
			}
		}
		return "no field " + field
	}
	for _, c := range []struct {
		line        int
		field, want string
	}{
		{0, "id", "17 from id"},
		{0, "completion_tokens", "4 from output_ids (its length)"},
		{1, "text", "Hello from output.0.content.0.text, output.0.content.1.text"},
		{1, "prompt_tokens", "5 from usage.input_tokens"},
		{1, "completion_tokens", "2 from usage.output_tokens"},
	} {
		if got := from(reps[c.line], c.field); got != c.want {
			t.Errorf("line %d's %s: %q; want %q", c.line+1, c.field, got, c.want)
		}
	}
	if !strings.HasPrefix(reps[2].Skipped, "a stream's event before its last") {
		t.Errorf("a stream's event: %+v; want it skipped as one", reps[2])
	}
}

// TestWriteExplainedWidth: every line WriteExplained writes fits 80
// columns, a word longer than a line broken.
func TestWriteExplainedWidth(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 130) + strings.Repeat("好", 50)
	var b bytes.Buffer
	WriteExplained(&b, []LineReport{{File: "f.jsonl", Line: 1, Rule: "any other " + long, Shape: "s",
		Fields: []FieldReport{{Field: "text", Known: true, Value: long, From: []string{long + ".a", "b"}},
			{Field: "prompt_tokens", Why: "not in the line " + long}},
		Notes: []string{long}}})
	for _, l := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if n := terminal.Width(l); n > explainWidth {
			t.Errorf("%d columns: %q", n, l)
		}
	}
	if joined := strings.Join(strings.Fields(b.String()), ""); strings.Count(joined, long+".a") != 1 {
		t.Errorf("a long word lost:\n%s", b.String())
	}
}

// TestOneEach: paths that differ in one list index alone are said once.
func TestOneEach(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		paths []string
		want  string
	}{
		{[]string{"a.0.text", "a.1.text", "a.2999.text"}, "a.N.text (each N)"},
		{[]string{"usage.in", "usage.cache"}, "usage.in, usage.cache"},
		{[]string{"a.0.b.0", "a.1.b.1"}, "a.0.b.0, a.1.b.1"},
		{[]string{"text"}, "text"},
	} {
		if got := oneEach(c.paths); got != c.want {
			t.Errorf("oneEach(%q) = %q; want %q", c.paths, got, c.want)
		}
	}
}
