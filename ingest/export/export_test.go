package export

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gendex/ingest"
	"gendex/ingest/gen/client"
	"gendex/store"
)

// The fixture: one prompt and one answer of each kind export meets.
const fixturePrompts = `{"id":"a1","messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"}]}
{"id":"a2","conversations":[{"from":"human","value":"Q1"},{"from":"gpt","value":"old"},{"from":"human","value":"Q2"}]}
{"id":"a3","text":"Tell me"}
{"id":"a4","input_ids":[1,2,3]}
{"id":"c1","messages":[{"role":"system","content":"S"},{"role":"user","content":"U1"},{"role":"assistant","content":"old1"},{"role":"user","content":"U2"},{"role":"assistant","content":"old2"},{"role":"user","content":"U3"}]}
{"id":"c2","conversations":[{"from":"human","value":"H1"},{"from":"gpt","value":"g"},{"from":"human","value":"H2"},{"from":"gpt","value":"g2"}]}
{"id":"t1","messages":[{"role":"user","content":"T"}]}
{"id":"ab1","text":"abort me"}
{"id":"nc","messages":[{"role":"user","content":"Why?"}]}
{"id":"nt","text":"x"}
{"id":"bad","text":"y"}
{"id":"op","messages":[{"role":"user","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]}]}
{"id":"c3","messages":[{"role":"user","content":"P1"},{"role":"user","content":"P2"}]}
`

const fixtureRaw = `{"id":"a1","output_ids":[10,11,2],"text":"Hello","prompt_ids":[1,5,6],"prompt_tokens":3,"completion_tokens":3,"finish_reason":"stop"}
{"id":"a2","output_ids":[12,2],"text":"A2","prompt_tokens":7,"completion_tokens":2,"finish_reason":"stop"}
{"id":"a3","output_ids":[13,2],"text":"A3","prompt_tokens":4,"completion_tokens":2,"finish_reason":"stop"}
{"id":"a4","output_ids":[14, 15, 2],"text":"A4","prompt_tokens":3,"completion_tokens":3,"finish_reason":"stop"}
{"id":"c1","turns":[{"output_ids":[20,2],"text":"R1","prompt_tokens":5,"completion_tokens":2,"finish_reason":"stop"},{"output_ids":[21,22,2],"text":"R2","reasoning_content":"think2","prompt_tokens":9,"completion_tokens":3,"finish_reason":"stop"},{"output_ids":[23,2],"text":"R3","prompt_ids":[1,7,20,2,8,21,22,2,9],"prompt_tokens":9,"completion_tokens":2,"finish_reason":"stop"}],"prompt_tokens":23,"completion_tokens":7,"finish_reason":"stop"}
{"id":"c2","turns":[{"output_ids":[82,49,120,2],"text":"R1x","prompt_tokens":5,"completion_tokens":4,"finish_reason":"stop"},{"output_ids":[30,2],"text":"R2x","prompt_tokens":15,"completion_tokens":2,"finish_reason":"stop"}],"prompt_tokens":20,"completion_tokens":6,"finish_reason":"stop"}
{"id":"t1","output_ids":[30,31],"text":"cut","prompt_ids":[1,2],"prompt_tokens":2,"completion_tokens":2,"finish_reason":"length"}
{"id":"ab1","output_ids":[],"text":"","completion_tokens":0,"finish_reason":"abort"}
{"id":"nc","text":"chat answer","reasoning_content":"because","prompt_tokens":4,"completion_tokens":5,"finish_reason":"stop"}
{"id":"nt","output_ids":[50,2],"prompt_ids":[1,9],"prompt_tokens":2,"completion_tokens":2,"finish_reason":"stop"}
{"id":"bad","text":5,"completion_tokens":1,"finish_reason":"stop"}
{"id":"np","output_ids":[60,2],"text":"orphan","prompt_ids":[1,3],"completion_tokens":2,"finish_reason":"stop"}
{"id":"op","output_ids":[70,2],"text":"AB answer","prompt_tokens":3,"completion_tokens":2,"finish_reason":"stop"}
{"id":"c3","turns":[{"output_ids":[60,61,2],"text":"S1","prompt_tokens":4,"completion_tokens":3,"finish_reason":"stop"},{"output_ids":[62,2],"text":"S2","prompt_ids":[1,6,50,4,7,60,61,4,6,51,4,7],"prompt_tokens":12,"completion_tokens":2,"finish_reason":"stop"}],"prompt_tokens":16,"completion_tokens":5,"finish_reason":"stop"}
`

var fixedNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// fixture writes the dataset U (prompts and answers) and opens an index.
func fixture(t *testing.T, prompts, raw string) (Dataset, *store.DB) {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "U")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "prompts.jsonl"), []byte(prompts), 0o644)
	os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), []byte(raw), 0o644)
	db, err := store.Open(filepath.Join(t.TempDir(), "g.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sets, err := Find([]string{root}, "")
	if err != nil || len(sets) != 1 {
		t.Fatalf("Find: %v %v", sets, err)
	}
	return sets[0], db
}

// runExport exports d and returns its result, records and exclusions, each
// line checked for its answer's sum and shown without it (answerSums);
// older are lines written before, by an older gendex (none).
func runExport(t *testing.T, db *store.DB, d Dataset, cfg Config, older ...string) (Result, string, string) {
	t.Helper()
	cfg.Now = func() time.Time { return fixedNow }
	x := &Exporter{Ix: &ingest.Indexer{DB: db}, Config: cfg}
	res, err := x.Export(t.Context(), d)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := os.ReadFile(d.Tokenized())
	exc, _ := os.ReadFile(d.Excluded())
	return res, answerSums(t, db, d, store.Tokenized, string(tok), older), answerSums(t, db, d, store.Excluded, string(exc), older)
}

var answerSumRe = regexp.MustCompile(`^\{"id":"([^"]*)".*(,"answer_sum":"([0-9a-f]{8})")\}$`)

// answerSums checks that each of text's lines (a record or an exclusion of
// stage) ends with the answer_sum of its id's answer, as the index holds
// it in the answer and in the line's record, and returns text without
// them (so the tests compare the rest exactly).
func answerSums(t *testing.T, db *store.DB, d Dataset, stage store.Stage, text string, older []string) string {
	t.Helper()
	var out strings.Builder
	for _, line := range strings.SplitAfter(text, "\n") {
		m := answerSumRe.FindStringSubmatchIndex(strings.TrimSuffix(line, "\n"))
		if m == nil {
			if line != "" && !slices.Contains(older, strings.TrimSuffix(line, "\n")) {
				t.Errorf("%s line without its answer_sum last: %s", stage, line)
			}
			out.WriteString(line)
			continue
		}
		id, sum := line[m[2]:m[3]], line[m[6]:m[7]]
		db.View(func(v *store.View) error {
			a, ok, err := v.Get(d.Name, store.Raw, id)
			r, rok, rerr := v.Get(d.Name, stage, id)
			if want := fmt.Sprintf("%08x", a.Sum); err != nil || rerr != nil || !ok || sum != want {
				t.Errorf("%s %s: answer_sum %s, its answer's line sum %s (%v %v)", stage, id, sum, want, ok, err)
			} else if !rok || !r.HasFrom || fmt.Sprintf("%08x", r.From) != sum {
				t.Errorf("%s %s: the index holds its record from %08x (%v), the line says %s", stage, id, r.From, r.HasFrom, sum)
			}
			return nil
		})
		out.WriteString(line[:m[4]] + line[m[5]:])
	}
	return out.String()
}

func excl(id, reason, detail string) string {
	return `{"id":"` + id + `","reason":"` + reason + `","detail":"` + detail + `","excluded_at":"2026-12-01T12:00:00.000Z"}` + "\n"
}

func same(t *testing.T, what, got, want string) {
	t.Helper()
	if got != want {
		gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Errorf("%s line %d:\n got %s\nwant %s", what, i+1, g, w)
			}
		}
	}
}

const lengthDetail = "finish_reason length: cut off at the token limit (2 completion tokens); --include-truncated exports it"

// TestConversations: every kind of answer, exact records and exclusions.
func TestConversations(t *testing.T) {
	d, db := fixture(t, fixturePrompts, fixtureRaw)
	res, tok, exc := runExport(t, db, d, Config{Format: Conversations, KeepReasoning: true})
	same(t, "tokenized.jsonl", tok, `{"id":"a1","conversations":[{"role":"system","content":"S"},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello"}]}
{"id":"a2","conversations":[{"role":"user","content":"Q1"},{"role":"assistant","content":"old"},{"role":"user","content":"Q2"},{"role":"assistant","content":"A2"}]}
{"id":"a3","conversations":[{"role":"user","content":"Tell me"},{"role":"assistant","content":"A3"}]}
{"id":"c1","conversations":[{"role":"system","content":"S"},{"role":"user","content":"U1"},{"role":"assistant","content":"R1"},{"role":"user","content":"U2"},{"role":"assistant","content":"R2","reasoning_content":"think2"},{"role":"user","content":"U3"},{"role":"assistant","content":"R3"}]}
{"id":"c2","conversations":[{"role":"user","content":"H1"},{"role":"assistant","content":"R1x"},{"role":"user","content":"H2"},{"role":"assistant","content":"R2x"}]}
{"id":"nc","conversations":[{"role":"user","content":"Why?"},{"role":"assistant","content":"chat answer","reasoning_content":"because"}]}
{"id":"op","conversations":[{"role":"user","content":"AB"},{"role":"assistant","content":"AB answer"}]}
{"id":"c3","conversations":[{"role":"user","content":"P1"},{"role":"assistant","content":"S1"},{"role":"user","content":"P2"},{"role":"assistant","content":"S2"}]}
`)
	raw := filepath.Join(filepath.Dir(d.Tokenized()), "raw_responses.jsonl")
	same(t, "excluded.jsonl", exc,
		excl("a4", "ids_prompt", "the prompt (prompts.jsonl:4) is token ids (input_ids), not a conversation; its ids record: "+IDsCommand(filepath.Dir(raw), filepath.Dir(raw)))+
			excl("t1", "length", lengthDetail)+
			excl("ab1", "abort", "finish_reason abort: the server aborted the request")+
			excl("nt", "no_text", "the answer has no text (generated with --skip-tokenizer-init, or its content is null); export it with --format ids")+
			excl("bad", "bad_answer", raw+`:11: not an answer: \"text\" is not a string`))
	if res.Records != 8 || res.LeftNoPrompt() != 1 || res.Todo != 14 {
		t.Errorf("result %+v; want 8 records, np left for its prompt, 14 to do", res)
	}
	// Nothing to do the second time, and nothing written.
	res, tok2, exc2 := runExport(t, db, d, Config{Format: Conversations, KeepReasoning: true})
	if res.Todo != 1 || res.Records != 0 || tok2 != tok || exc2 != exc {
		t.Errorf("second run: %+v; want only np still to do, nothing written", res)
	}
}

// TestConversationsDropReasoning: --reasoning drop leaves reasoning_content out.
func TestConversationsDropReasoning(t *testing.T) {
	d, db := fixture(t, fixturePrompts, fixtureRaw)
	_, tok, _ := runExport(t, db, d, Config{Format: Conversations})
	if strings.Contains(tok, "reasoning_content") {
		t.Errorf("reasoning_content written under --reasoning drop:\n%s", tok)
	}
}

// fakeTokenizer renders a chat as BOS, then per message a role id, the
// content's bytes and 2 (the end of a turn), then 99 (the generation
// prompt); a text as BOS and its bytes.
type fakeTokenizer struct{ calls atomic.Int64 }

func (f *fakeTokenizer) TokenizeMessages(_ context.Context, msgs []client.Message) ([]int, error) {
	f.calls.Add(1)
	ids := []int{1}
	for _, m := range msgs {
		ids = append(ids, map[string]int{"system": 5, "user": 6, "assistant": 7}[m.Role])
		for _, c := range []byte(m.Content) {
			ids = append(ids, int(c))
		}
		ids = append(ids, 2)
	}
	return append(ids, 99), nil
}

func (f *fakeTokenizer) TokenizeText(_ context.Context, text string) ([]int, error) {
	f.calls.Add(1)
	ids := []int{1}
	for _, c := range []byte(text) {
		ids = append(ids, int(c))
	}
	return ids, nil
}

// TestIDs: prompt ids from the answer, the prompt line or (second run)
// the tokenizer; exact input_ids and loss_mask, earlier turns' output ids
// carry loss where they occur in the prompt ids.
func TestIDs(t *testing.T) {
	d, db := fixture(t, fixturePrompts, fixtureRaw)
	res, tok, exc := runExport(t, db, d, Config{Format: IDs})
	first := `{"id":"a1","input_ids":[1,5,6,10,11,2],"loss_mask":[0,0,0,1,1,1]}
{"id":"a4","input_ids":[1,2,3,14,15,2],"loss_mask":[0,0,0,1,1,1]}
{"id":"c1","input_ids":[1,7,20,2,8,21,22,2,9,23,2],"loss_mask":[0,0,1,1,0,1,1,1,0,1,1]}
{"id":"nt","input_ids":[1,9,50,2],"loss_mask":[0,0,1,1]}
{"id":"np","input_ids":[1,3,60,2],"loss_mask":[0,0,1,1]}
{"id":"c3","input_ids":[1,6,50,4,7,60,61,4,6,51,4,7,62,2],"loss_mask":[0,0,0,0,0,1,1,0,0,0,0,0,1,1]}
`
	same(t, "tokenized.jsonl", tok, first)
	raw := filepath.Join(filepath.Dir(d.Tokenized()), "raw_responses.jsonl")
	same(t, "excluded.jsonl", exc,
		excl("t1", "length", lengthDetail)+
			excl("ab1", "abort", "finish_reason abort: the server aborted the request")+
			excl("nc", "no_output_ids", "the answer has no output_ids (a chat or completions endpoint returns none); export it with --format conversations")+
			excl("bad", "bad_answer", raw+`:11: not an answer: \"text\" is not a string`))
	if res.LeftNeedsServer() != 4 || res.Records != 6 {
		t.Errorf("result %+v; want 6 records and a2, a3, c2, op left for a server", res)
	}

	tz := &fakeTokenizer{}
	res, tok, _ = runExport(t, db, d, Config{Format: IDs, Tokenizer: tz})
	same(t, "tokenized.jsonl", tok, first+`{"id":"a2","input_ids":[1,6,81,49,2,7,111,108,100,2,6,81,50,2,99,12,2],"loss_mask":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1]}
{"id":"a3","input_ids":[1,84,101,108,108,32,109,101,13,2],"loss_mask":[0,0,0,0,0,0,0,0,1,1]}
{"id":"c2","input_ids":[1,6,72,49,2,7,82,49,120,2,6,72,50,2,99,30,2],"loss_mask":[0,0,0,0,0,0,1,1,1,1,0,0,0,0,0,1,1]}
{"id":"op","input_ids":[1,6,65,66,2,99,70,2],"loss_mask":[0,0,0,0,0,0,1,1]}
`)
	if res.Records != 4 || tz.calls.Load() != 4 || res.OwnTurns != 0 {
		t.Errorf("with a tokenizer: %+v, %d calls; want 4 records from 4 calls", res, tz.calls.Load())
	}
}

// TestMaxLenAndTruncated: --max-len by input_ids (ids) or by the last
// turn's counts (conversations); --include-truncated exports length.
func TestMaxLenAndTruncated(t *testing.T) {
	d, db := fixture(t, fixturePrompts, fixtureRaw)
	_, tok, exc := runExport(t, db, d, Config{Format: IDs, MaxLen: 6, IncludeTruncated: true})
	if !strings.Contains(tok, `{"id":"t1","input_ids":[1,2,30,31],"loss_mask":[0,0,1,1]}`) {
		t.Errorf("--include-truncated: t1 not exported:\n%s", tok)
	}
	if !strings.Contains(exc, excl("c1", "max_len", "11 input_ids (prompt 9 + output 2), over --max-len 6")) {
		t.Errorf("c1 not excluded for max_len:\n%s", exc)
	}
	if strings.Contains(exc, `"a1"`) || !strings.Contains(tok, `"a1"`) {
		t.Errorf("a1 (6 ids) is not over --max-len 6")
	}

	d, db = fixture(t, fixturePrompts, fixtureRaw)
	res, tok, exc := runExport(t, db, d, Config{Format: Conversations, MaxLen: 10})
	if !strings.Contains(exc, excl("c1", "max_len", "11 tokens (prompt 9 + completion 2 of the last turn), over --max-len 10")) ||
		!strings.Contains(exc, excl("c2", "max_len", "17 tokens (prompt 15 + completion 2 of the last turn), over --max-len 10")) {
		t.Errorf("conversations over --max-len not excluded:\n%s", exc)
	}
	if !strings.Contains(tok, `"a1"`) || res.LenUnknown != 0 {
		t.Errorf("a1 (3+3 tokens) not exported, or lengths unknown: %+v\n%s", res, tok)
	}
}

// TestTornOutputIsCut: a crash left a record written and not indexed, and
// half of the next one: the next run indexes the first, cuts the second
// and writes it again, so each answer has one record.
func TestTornOutputIsCut(t *testing.T) {
	d, db := fixture(t, fixturePrompts, fixtureRaw)
	half := `{"id":"a4","input_ids":[1,2,3,14,15,2],"loss_m`
	older := `{"id":"a1","input_ids":[1,5,6,10,11,2],"loss_mask":[0,0,0,1,1,1]}` // no answer_sum: an older gendex's
	os.WriteFile(d.Tokenized(), []byte(older+"\n"+half), 0o644)
	res, tok, _ := runExport(t, db, d, Config{Format: IDs}, older)
	if strings.Count(tok, `"id":"a1"`) != 1 || strings.Count(tok, `"id":"a4"`) != 1 || strings.Contains(tok, half+"\n") {
		t.Errorf("after a torn write:\n%s", tok)
	}
	if res.Records != 5 {
		t.Errorf("%d records written; want 5 (a1 was written by the crashed run)", res.Records)
	}
}

// TestChangedAnswerFile: a line that is not the indexed one (a rewrite
// the indexer cannot see: the same size, inode and ends) makes the export
// forget its file, say so with its file:line, read it again and export
// every answer from the lines as they are now, once.
func TestChangedAnswerFile(t *testing.T) {
	d, db := fixture(t, fixturePrompts, fixtureRaw)
	var probs []ingest.Problem
	x := &Exporter{Ix: &ingest.Indexer{DB: db, Report: func(p ingest.Problem) { probs = append(probs, p) }}}
	for _, src := range d.Sources {
		if _, err := x.Ix.IndexFile(t.Context(), src); err != nil {
			t.Fatal(err)
		}
	}
	raw := filepath.Join(filepath.Dir(d.Tokenized()), "raw_responses.jsonl")
	changed := strings.Replace(fixtureRaw, `"Hello"`, `"Jello"`, 1)
	f, _ := os.OpenFile(raw, os.O_WRONLY, 0)
	f.WriteAt([]byte(changed), 0) // same size, same inode: the indexer sees no change
	f.Close()
	x.Config.Format = IDs
	res, err := x.Export(t.Context(), Dataset{Name: d.Name, Out: d.Out})
	if err != nil {
		t.Fatal(err)
	}
	said := 0
	for _, p := range probs {
		if p.Path == raw && strings.Contains(p.Msg, "line 1 is not the line the index holds") {
			said++
		}
	}
	if said != 1 {
		t.Errorf("the changed line was said %d times, want once: %v", said, probs)
	}
	tok, _ := os.ReadFile(d.Tokenized())
	exc, _ := os.ReadFile(d.Excluded())
	if lines := strings.Count(string(tok)+string(exc), "\n"); res.Unwritten || lines != res.Records+sum(res.Excluded) || strings.Count(string(tok), `"id":"a1"`) != 1 {
		t.Errorf("%d records and %v exclusions counted, %d lines written (a1 %d times), want them the same and a1 once:\n%s",
			res.Records, res.Excluded, lines, strings.Count(string(tok), `"id":"a1"`), tok)
	}
}

// TestSpillManyChunks: more answers than a chunk, every one exported once.
func TestSpillManyChunks(t *testing.T) {
	var p, r strings.Builder
	const n = 1000
	for i := range n {
		id := fmt.Sprintf("k%04d", i)
		p.WriteString(`{"id":"` + id + `","input_ids":[1,2]}` + "\n")
		r.WriteString(`{"id":"` + id + `","output_ids":[3,2],"text":"t","completion_tokens":2,"finish_reason":"stop"}` + "\n")
	}
	d, db := fixture(t, p.String(), r.String())
	res, tok, _ := runExport(t, db, d, Config{Format: IDs, ChunkSize: 7, FlushBytes: 100})
	if res.Records != n || strings.Count(tok, "\n") != n {
		t.Errorf("%d records, %d lines; want %d", res.Records, strings.Count(tok, "\n"), n)
	}
}
