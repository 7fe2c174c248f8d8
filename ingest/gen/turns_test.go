package gen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"gendex/ingest"
	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store"
)

// TestTurnsAll regenerates a 3-turn messages dataset and a 2-turn ShareGPT
// dataset through /v1/tokenize + /generate, and through chat (--api chat,
// and --api completions, which sends chat prompts to chat): one request per
// turn, each with the regenerated turns before it and no original assistant
// text; one raw line per conversation, the earlier turns in turns.jsonl.
func TestTurnsAll(t *testing.T) {
	t.Parallel()
	for _, api := range []client.API{client.APIGenerate, client.APIChat, client.APICompletions} {
		t.Run(string(api), func(t *testing.T) {
			rc, url := recordedSim(t, sim.Config{Seed: 5})
			root, out := t.TempDir(), t.TempDir()
			writeConversations(t, root, "M", "messages", 12, 3)
			writeConversations(t, root, "S", "sharegpt", 10, 2)
			dbPath := filepath.Join(t.TempDir(), "g.db")
			sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 4, API: api}, root)
			if err != nil {
				t.Fatalf("%v\n%s", err, log)
			}
			if sum.Responses != 22 || sum.Turns != 12*2+10 || sum.Errors != 0 {
				t.Errorf("summary %+v\n%s", sum, log)
			}
			if !strings.Contains(log, "34 earlier turns were answered into turns.jsonl") {
				t.Errorf("the summary does not count the earlier turns:\n%s", log)
			}
			reqs := generations(t, rc)
			var tok *client.Client
			if api == client.APIGenerate {
				tok = client.New(url, client.Options{})
			}
			checkConversations(t, dbPath, out, "M", 12, 3, reqs, tok, true)
			checkConversations(t, dbPath, out, "S", 10, 2, reqs, tok, false)
			// Every turn's completion tokens are in the run's count.
			var want float64
			for _, ds := range []string{"M", "S"} {
				for _, l := range readJSONL(t, filepath.Join(out, ds, "raw_responses.jsonl")) {
					want += decodeMap(t, l)["completion_tokens"].(float64)
				}
			}
			if float64(sum.Tokens) != want {
				t.Errorf("run counted %d tokens; the conversations hold %v", sum.Tokens, want)
			}
			// A second run has nothing to do.
			sum, log, err = runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, API: api}, root)
			if err != nil || sum.Responses != 0 || !strings.Contains(log, "nothing to do") {
				t.Fatalf("second run: %+v %v\n%s", sum, err, log)
			}
		})
	}
}

// TestTurnsLast: --turns last asks one request per conversation, as gen
// always did (the prompt's own assistant turns as context), and writes
// today's answer line, without turns.jsonl.
func TestTurnsLast(t *testing.T) {
	t.Parallel()
	rc, url := recordedSim(t, sim.Config{Seed: 5})
	root, out := t.TempDir(), t.TempDir()
	writeConversations(t, root, "S", "sharegpt", 8, 2)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 4, Turns: TurnsLast}, root)
	if err != nil || sum.Responses != 8 || sum.Turns != 0 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	n := 0
	for _, r := range rc.all() {
		if r.path == "/generate" {
			n++
		}
	}
	if n != 8 {
		t.Errorf("%d requests to /generate; want one per conversation, 8", n)
	}
	c := client.New(url, client.Options{})
	maxNew := 24
	for _, l := range readJSONL(t, filepath.Join(out, "S", "raw_responses.jsonl")) {
		m := decodeMap(t, l)
		var i int
		fmt.Sscanf(m["id"].(string), "S-%05d", &i)
		var msgs []client.Message
		for u := 1; u <= 2; u++ {
			msgs = append(msgs, client.Message{Role: "user", Content: userText("S", i, u)})
			if u < 2 {
				msgs = append(msgs, client.Message{Role: "assistant", Content: fmt.Sprintf("%s %d.%d", origMarker, i, u)})
			}
		}
		ids, err := c.TokenizeMessages(t.Context(), msgs)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Generate(t.Context(), client.GenerateRequest{InputIDs: ids, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}})
		if err != nil {
			t.Fatal(err)
		}
		res.PromptIDs = ids
		want := decodeMap(t, res.AppendJSONL(nil, m["id"].(string)))
		if m["model"] != "sim-model" || m["simulated"] != true {
			t.Errorf("line %v: want model sim-model, simulated", m)
		}
		if p, ok := m["provenance"].(map[string]any); !ok || p["server"].(map[string]any)["model"] != "sim-model" {
			t.Errorf("line %v: want its provenance, by sim-model", m)
		}
		for _, k := range []string{"e2e_latency", "finished_at", "server", "model", "simulated", "provenance"} {
			delete(m, k)
			delete(want, k)
		}
		if !reflect.DeepEqual(m, want) {
			t.Errorf("line %v; want %v", m, want)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "S", "turns.jsonl")); !os.IsNotExist(err) {
		t.Errorf("--turns last wrote turns.jsonl: %v", err)
	}
}

// TestTurnsResume: a conversation whose later turn failed keeps its first
// turn; sent again (--retry-errors), only the turns not recorded are asked,
// the first one read back from turns.jsonl into the conversation's line.
// A turn line changed since it was indexed is an error for its
// conversation, not a guess; a torn last line of turns.jsonl is cut.
func TestTurnsResume(t *testing.T) {
	t.Parallel()
	rc, url := recordedSim(t, sim.Config{Seed: 8})
	rc.refuse = func(path string, body []byte) bool {
		var b struct {
			InputIDs []int `json:"input_ids"`
		}
		json.Unmarshal(body, &b)
		return strings.Count(sim.Decode(b.InputIDs, false), "<|user|>") >= 2
	}
	root, out := t.TempDir(), t.TempDir()
	writeConversations(t, root, "M", "messages", 20, 3)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	sum, log, err := runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 3, MaxAttempts: 1}, root)
	if err != nil || sum.Errors != 20 || sum.Turns != 20 {
		t.Fatalf("first run: %+v %v\n%s", sum, err, log)
	}
	for _, l := range readJSONL(t, filepath.Join(out, "M", "errors.jsonl")) {
		if msg := decodeMap(t, l)["error"].(string); !strings.HasPrefix(msg, "turn 2 of 3: gave up after 1 attempts") {
			t.Errorf("error message %q", msg)
		}
	}
	turns := readJSONL(t, filepath.Join(out, "M", "turns.jsonl"))
	if len(turns) != 20 {
		t.Fatalf("%d turn lines; want 20", len(turns))
	}
	// Change a byte of a turn's text in place (same length, past the first
	// 4 KiB and before the last 4 KiB the index hashes, so the file looks
	// unchanged to the disk check): only the turn's own CRC, when the turn
	// is read, finds it.
	tf := filepath.Join(out, "M", "turns.jsonl")
	b, _ := os.ReadFile(tf)
	var changedID any
	i := -1
	for _, l := range turns {
		at := bytes.Index(b, l)
		ts := at + bytes.Index(l, []byte(`"text":"`)) + len(`"text":"`)
		for p := max(ts, 4096); p < at+len(l) && p < len(b)-4096 && b[p] != '"'; p++ {
			if c := b[p]; b[p-1] != '\\' && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
				i, changedID = p, decodeMap(t, l)["id"]
				break
			}
		}
		if i >= 0 {
			break
		}
	}
	if i < 0 {
		t.Fatalf("no turn's text has a letter between the first and the last 4 KiB of turns.jsonl (%d bytes)", len(b))
	}
	b[i] = 'X' + (b[i]-'X'+1)%2 // X or Y, and never what it was
	// And leave a torn last line, as a crash inside a write does.
	b = append(b, `{"id":"M-00001","turn":2,"turns":3,"output_ids":[3`...)
	if err := os.WriteFile(tf, b, 0o644); err != nil {
		t.Fatal(err)
	}

	rc.refuse = nil
	before := len(generations(t, rc))
	sum, log, err = runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 3, RetryErrors: true}, root)
	if err != nil || sum.Responses != 19 || sum.Errors != 1 {
		t.Fatalf("second run: %+v %v\n%s", sum, err, log)
	}
	if !strings.Contains(log, "20 of them conversations half done") {
		t.Errorf("the start does not say that conversations are half done:\n%s", log)
	}
	if !strings.Contains(log, "turns.jsonl:21: cut an unfinished last line (50 bytes) left by an earlier run; that turn will be answered again") {
		t.Errorf("the torn last line of turns.jsonl was not cut:\n%s", log)
	}
	reqs := generations(t, rc)[before:]
	per := map[[2]int]int{}
	for _, q := range reqs {
		per[[2]int{q.conv, q.turn}]++
	}
	for c := 1; c <= 20; c++ {
		want := [3]int{0, 1, 1}
		if fmt.Sprintf("M-%05d", c) == changedID {
			want = [3]int{}
		}
		if got := [3]int{per[[2]int{c, 1}], per[[2]int{c, 2}], per[[2]int{c, 3}]}; got != want {
			t.Errorf("c%d: requests per turn %v; want %v", c, got, want)
		}
	}
	rb, _ := os.ReadFile(filepath.Join(out, "M", "raw_responses.jsonl"))
	raw := string(rb)
	for _, l := range readJSONL(t, tf) {
		m := decodeMap(t, l)
		if m["id"] == changedID {
			continue
		}
		obj, err := objectWithout(l, "id", "turn", "turns")
		if err != nil {
			t.Fatal(err)
		}
		before := `"turns":[`
		if m["turn"] == 2.0 {
			before = "},"
		}
		if !strings.Contains(raw, before+string(obj)+`,{`) {
			t.Errorf("%s: its turn %v %s is not that turn of its conversation's line", m["id"], m["turn"], obj)
		}
	}
	errs := readJSONL(t, filepath.Join(out, "M", "errors.jsonl"))
	last := decodeMap(t, errs[len(errs)-1])
	if last["id"] != changedID || !strings.Contains(last["error"].(string), "no longer holds turn 1") {
		t.Errorf("the changed turn line of %s gave %v", changedID, last)
	}
}

// TestConversationLine: the raw line of a conversation holds its turn
// objects in order and the sums of their counts; a count that one turn
// lacks is left out, never summed as if it were 0.
func TestConversationLine(t *testing.T) {
	t.Parallel()
	turns := []turnAnswer{
		{obj: []byte(`{"text":"a","prompt_tokens":5,"completion_tokens":2}`), counts: [4]int64{5, 2, store.Unknown, 0}},
		{obj: []byte(`{"text":"b","prompt_tokens":9,"completion_tokens":3,"cached_tokens":4}`), counts: [4]int64{9, 3, 4, 1}},
	}
	last := &client.Result{FinishReason: "length", Server: "http://s"}
	got := string(conversationLine("c\"1", turns, last))
	want := `{"id":"c\"1","turns":[{"text":"a","prompt_tokens":5,"completion_tokens":2},{"text":"b","prompt_tokens":9,"completion_tokens":3,"cached_tokens":4}],"prompt_tokens":14,"completion_tokens":5,"reasoning_tokens":1,"finish_reason":"length","server":"http://s"}` + "\n"
	if got != want {
		t.Errorf("line\n%s\nwant\n%s", got, want)
	}
	// The index reads it as one answer with those sums.
	var rec store.Record
	if st, err := ingest.Normalize([]byte(got[:len(got)-1]), store.Raw, &rec); err != nil || st != store.Raw ||
		rec.PromptTokens != 14 || rec.CompletionTokens != 5 || rec.CachedTokens != store.Unknown || rec.ReasoningTokens != 1 || rec.Finish != "length" {
		t.Errorf("indexed as %v %+v (%v)", st, rec, err)
	}
}

// TestTurnMessages: turn i sends the system and other turns and user turns
// 1..i in order, each earlier user turn followed by its regenerated answer;
// the prompt's own assistant turns are dropped; a conversations prompt of
// one user turn (or --turns last) keeps today's messages.
func TestTurnMessages(t *testing.T) {
	t.Parallel()
	line := `{"id":"x","conversations":[{"from":"system","value":"S"},{"from":"human","value":"U1"},{"from":"gpt","value":"A1"},{"from":"human","value":"U2"},{"from":"gpt","value":"A2"},{"from":"human","value":"U3"},{"from":"gpt","value":"A3"}]}`
	p, err := ParsePrompt([]byte(line), "x", 1)
	if err != nil {
		t.Fatal(err)
	}
	if p.Turns != 3 || len(p.Messages) != 6 || p.Messages[5].Content != "U3" {
		t.Fatalf("turns %d, messages %+v", p.Turns, p.Messages)
	}
	m := func(role, content string) client.Message { return client.Message{Role: role, Content: content} }
	for i, want := range [][]client.Message{
		{m("system", "S"), m("user", "U1")},
		{m("system", "S"), m("user", "U1"), m("assistant", "a1"), m("user", "U2")},
		{m("system", "S"), m("user", "U1"), m("assistant", "a1"), m("user", "U2"), m("assistant", "a2"), m("user", "U3")},
	} {
		if got := p.TurnMessages(i+1, []string{"a1", "a2"}[:i]); !reflect.DeepEqual(got, want) {
			t.Errorf("turn %d: %+v; want %+v", i+1, got, want)
		}
	}
	p, _ = ParsePrompt([]byte(`{"id":"y","messages":[{"role":"user","content":"U"},{"role":"assistant","content":"A"}]}`), "y", 1)
	if p.Turns != 1 || len(p.Messages) != 2 {
		t.Errorf("one user turn: turns %d, messages %+v (messages are sent as given)", p.Turns, p.Messages)
	}
	if _, err := ParsePrompt([]byte(`{"id":"z","conversations":[{"from":"gpt","value":"A"}]}`), "z", 1); err == nil || !strings.Contains(err.Error(), "no turns to answer") {
		t.Errorf("a conversation of assistant turns only: %v", err)
	}
}

// TestObjectWithout: a turn line's object is kept byte for byte, in its
// order, without the keys the conversation line does not repeat.
func TestObjectWithout(t *testing.T) {
	t.Parallel()
	got, err := objectWithout([]byte(`{"id":"a#1","turn":1,"turns":2,"text":"é\u00e9 <x>","e2e_latency":1.50,"x":{"id":1}}`), "id", "turn", "turns")
	if want := `{"text":"é\u00e9 <x>","e2e_latency":1.50,"x":{"id":1}}`; err != nil || string(got) != want {
		t.Errorf("%s (%v); want %s", got, err, want)
	}
	if _, err := objectWithout([]byte(`[1]`), "id"); err == nil {
		t.Error("an array was taken for an object")
	}
}

// TestTurnWithoutText: an earlier turn's answer without text cannot be
// carried into the next turn; the conversation is recorded as an error
// saying so, and nothing of it is written as answered.
func TestTurnWithoutText(t *testing.T) {
	t.Parallel()
	s := sim.New(sim.Config{Seed: 3})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/generate" {
			s.Handler().ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, r)
		var m map[string]any
		json.Unmarshal(rec.Body.Bytes(), &m)
		delete(m, "text") // as with --skip-tokenizer-init
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		json.NewEncoder(w).Encode(m)
	})
	hs := httptest.NewServer(h)
	defer hs.Close()
	root, out := t.TempDir(), t.TempDir()
	writeConversations(t, root, "S", "sharegpt", 3, 2)
	sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{hs.URL}, Out: out}, root)
	if err != nil || sum.Errors != 3 || sum.Responses != 0 || sum.Turns != 0 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	for _, l := range readJSONL(t, filepath.Join(out, "S", "errors.jsonl")) {
		if msg := decodeMap(t, l)["error"].(string); !strings.HasPrefix(msg, "turn 1 of 2: the answer has no text to carry into turn 2") {
			t.Errorf("error %q", msg)
		}
	}
	if n := len(readJSONL(t, filepath.Join(out, "S", "turns.jsonl"))); n != 0 {
		t.Errorf("%d turn lines written for answers without text", n)
	}
}

// TestTurnsVisibleWhileHalfDone: while conversations are half done, gen's
// log lines say how many, and how many earlier turns were answered; at the
// end none is left half done.
func TestTurnsVisibleWhileHalfDone(t *testing.T) {
	t.Parallel()
	_, url := simServer(t, sim.Config{Seed: 4, DecodeTokensPerSec: 200})
	root, out := t.TempDir(), t.TempDir()
	writeConversations(t, root, "M", "messages", 16, 3)
	sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{url}, Out: out, Concurrency: 4, LogEvery: 20 * time.Millisecond}, root)
	if err != nil || sum.Responses != 16 {
		t.Fatalf("%+v %v\n%s", sum, err, log)
	}
	live := regexp.MustCompile(`\n\S+   M \d+/16 .*, (\d+) earlier turns answered, ([1-9]\d*) conversations half done, `)
	if !live.MatchString(log) {
		t.Errorf("no log line shows conversations half done:\n%s", log)
	}
	if !strings.Contains(log, "M: 16/16 answered (16 this run), 0 failed, 0 to go, 32 earlier turns answered, 0 conversations half done") {
		t.Errorf("the summary does not say how the conversations stand:\n%s", log)
	}
}

// TestTurnsReasoning: on a reasoning model, an earlier turn's thinking is
// not sent back: chat carries the answer's content alone (its
// reasoning_content stays in the turn's object), and /generate's text,
// which holds the <think> section as SGLang returns it, is rendered without
// it by the chat template (Qwen3's, as the simulator's).
func TestTurnsReasoning(t *testing.T) {
	t.Parallel()
	for _, api := range []client.API{client.APIGenerate, client.APIChat} {
		t.Run(string(api), func(t *testing.T) {
			rc, url := recordedSim(t, sim.Config{Seed: 6, ReasoningParser: true})
			root, out := t.TempDir(), t.TempDir()
			writeConversations(t, root, "S", "sharegpt", 6, 2)
			// 8192 tokens, not the prompts' 24: the thinking ends
			// (</think>) in every first turn, as the template needs to
			// leave it out.
			prompts := filepath.Join(root, "S", "prompts.jsonl")
			b, err := os.ReadFile(prompts)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(prompts, bytes.ReplaceAll(b, []byte(`"max_new_tokens":24`), []byte(`"max_new_tokens":8192`)), 0o644); err != nil {
				t.Fatal(err)
			}
			sum, log, err := runGen(t, t.Context(), filepath.Join(t.TempDir(), "g.db"), Config{Servers: []string{url}, Out: out, API: api}, root)
			if err != nil || sum.Responses != 6 {
				t.Fatalf("%+v %v\n%s", sum, err, log)
			}
			thought := 0
			for _, l := range readJSONL(t, filepath.Join(out, "S", "raw_responses.jsonl")) {
				t1 := decodeMap(t, l)["turns"].([]any)[0].(map[string]any)
				text := t1["text"].(string)
				if api == client.APIChat {
					if rc, _ := t1["reasoning_content"].(string); rc != "" && !strings.Contains(text, "<think>") {
						thought++
					}
				} else if strings.HasPrefix(text, "<think>") {
					thought++
				}
			}
			if thought != 6 {
				t.Errorf("%d of 6 first turns have their reasoning where %s puts it", thought, api)
			}
			for _, q := range generations(t, rc) {
				prompt := sim.Decode(q.ids, false)
				for _, m := range q.messages {
					prompt += m.Content
				}
				if q.turn == 2 && strings.Contains(prompt, "<think>") {
					t.Errorf("turn 2 of c%d was sent the first turn's thinking: %q", q.conv, prompt)
				}
			}
		})
	}
}

// TestTurnsInterrupted: a run interrupted with conversations half done
// says so; the next run asks each of their missing turns once and none of
// the recorded ones again.
func TestTurnsInterrupted(t *testing.T) {
	t.Parallel()
	rc, url := recordedSim(t, sim.Config{Seed: 9, DecodeTokensPerSec: 100})
	root, out := t.TempDir(), t.TempDir()
	writeConversations(t, root, "M", "messages", 12, 3)
	dbPath := filepath.Join(t.TempDir(), "g.db")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		for {
			b, _ := os.ReadFile(filepath.Join(out, "M", "turns.jsonl"))
			if bytes.Count(b, []byte("\n")) >= 4 {
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	sum, log, err := runGen(t, ctx, dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 4, Grace: time.Millisecond}, root)
	if !errors.Is(err, context.Canceled) || sum.Responses == 12 {
		t.Fatalf("interrupted run: %+v %v\n%s", sum, err, log)
	}
	if !regexp.MustCompile(`; [1-9]\d* conversations are half done \(the next run asks only their missing turns\)`).MatchString(log) {
		t.Errorf("the summary does not say that conversations are half done:\n%s", log)
	}
	// What the interrupted run wrote: turn lines, and whole conversations.
	first := len(generations(t, rc))
	written, half := map[string]bool{}, map[string]bool{}
	for _, l := range readJSONL(t, filepath.Join(out, "M", "turns.jsonl")) {
		m := decodeMap(t, l)
		written[ingest.TurnID(m["id"].(string), int(m["turn"].(float64)))] = true
		half[m["id"].(string)] = true
	}
	rawBefore := readJSONL(t, filepath.Join(out, "M", "raw_responses.jsonl"))
	for _, l := range rawBefore {
		id := decodeMap(t, l)["id"].(string)
		for u := 1; u <= 3; u++ {
			written[ingest.TurnID(id, u)] = true
		}
		delete(half, id)
	}
	sum, log, err = runGen(t, t.Context(), dbPath, Config{Servers: []string{url}, Out: out, Concurrency: 4}, root)
	if err != nil || sum.Responses != int64(12-len(rawBefore)) ||
		!strings.Contains(log, fmt.Sprintf("(%d of them conversations half done", len(half))) {
		t.Fatalf("second run (%d conversations were half done): %v\n%s", len(half), err, log)
	}
	// The second run asks every turn not written once, and none written.
	asked := map[string]int{}
	for _, q := range generations(t, rc)[first:] {
		asked[ingest.TurnID(fmt.Sprintf("M-%05d", q.conv), q.turn)]++
	}
	for c := 1; c <= 12; c++ {
		for u := 1; u <= 3; u++ {
			id := ingest.TurnID(fmt.Sprintf("M-%05d", c), u)
			if want := map[bool]int{true: 0, false: 1}[written[id]]; asked[id] != want {
				t.Errorf("%s: asked %d times by the second run; want %d", id, asked[id], want)
			}
		}
	}
	checkIndexed(t, dbPath, out, "M", 12, 24)
	if n := len(readJSONL(t, filepath.Join(out, "M", "turns.jsonl"))); n != 24 {
		t.Errorf("%d turn lines; want 24", n)
	}
}
