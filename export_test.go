package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gendex/ingest/gen/client"
	"gendex/ingest/gen/sim"
	"gendex/store"
)

// jsonLines reads a JSONL file into maps, failing on a bad line.
func jsonLines(t *testing.T, path string) []map[string]json.RawMessage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: %v in %q", path, err, sc.Text())
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func idOfLine(t *testing.T, m map[string]json.RawMessage) string {
	t.Helper()
	var id string
	if err := json.Unmarshal(m["id"], &id); err != nil {
		t.Fatalf("line without a string id: %v", m)
	}
	return id
}

// TestExportAgainstSim: gen answers the four demo datasets (token ids,
// text, chat messages, ShareGPT) from a `gendex sim` process; export
// writes ids records (prompt ids from the prompt line, or from the sim's
// /v1/tokenize) and, into another index, conversations records. Every
// answer has exactly one record or exclusion; an ids record is the prompt's
// ids + the raw line's output_ids exactly, with loss on the output only; a
// conversation has as many assistant turns as user turns, ending with the
// answer's text; a second run of each has nothing to do and writes nothing.
func TestExportAgainstSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary and a simulator process")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin)
	dir := t.TempDir()
	prompts, _ := filepath.Abs("testdata/demo")
	out := filepath.Join(dir, "out")
	db := filepath.Join(dir, "g.db")
	gendexOK := func(args ...string) string {
		t.Helper()
		code, o := runGendexCombined(t, bin, args...)
		if code != 0 {
			t.Fatalf("gendex %v: exit %d\n%s", args, code, o)
		}
		return o
	}
	gendexOK("--db", db, "gen", "--server", url, "--max-new-tokens", "40", "--out", out, prompts)
	// A copy of the index before export, for the conversations run.
	data, _ := os.ReadFile(db)
	db2 := filepath.Join(dir, "g2.db")
	os.WriteFile(db2, data, 0o600)

	idsOut, convOut := filepath.Join(dir, "ids"), filepath.Join(dir, "conv")
	gendexOK("--db", db, "export", "--format", "ids", "--server", url, "--out", idsOut, out, prompts)
	gendexOK("--db", db2, "export", "--out", convOut, out, prompts)

	c := client.New(url, client.Options{})
	sets := []string{"B1_ids", "B2_text", "B3_chat", "B4_sharegpt"}
	for _, ds := range sets {
		promptByID := map[string]map[string]json.RawMessage{}
		for _, p := range jsonLines(t, filepath.Join(prompts, ds, "prompts.jsonl")) {
			promptByID[idOfLine(t, p)] = p
		}
		raws := jsonLines(t, filepath.Join(out, ds, "raw_responses.jsonl"))
		rawByID := map[string]map[string]json.RawMessage{}
		for _, r := range raws {
			rawByID[idOfLine(t, r)] = r
		}
		for _, o := range []string{idsOut, convOut} {
			checkEveryAnswerOnce(t, ds, o, o == convOut, promptByID, rawByID)
		}

		checkIDsRecordsAsSent(t, c, ds, idsOut, promptByID, rawByID)
		checkConversationsEndWithTheAnswer(t, ds, convOut, rawByID)
	}
	if _, err := os.Stat(filepath.Join(convOut, "B1_ids", "tokenized.jsonl")); err != nil {
		t.Error(err)
	}
	if n := len(jsonLines(t, filepath.Join(convOut, "B1_ids", "tokenized.jsonl"))); n != 0 {
		t.Errorf("B1_ids (token-id prompts) has %d conversations records; want every answer excluded as ids_prompt or length", n)
	}

	// Second runs: nothing to do, nothing written.
	size := func(root string) int64 {
		var n int64
		filepath.Walk(root, func(_ string, fi os.FileInfo, _ error) error {
			if fi != nil && !fi.IsDir() {
				n += fi.Size()
			}
			return nil
		})
		return n
	}
	for _, run := range []struct{ db, out, format string }{{db, idsOut, "ids"}, {db2, convOut, "conversations"}} {
		before := size(run.out)
		o := gendexOK("--db", run.db, "export", "--format", run.format, "--server", url, "--out", run.out, out, prompts)
		for _, ds := range sets {
			if !strings.Contains(o, "export: nothing to do: every answer of "+ds+" has a record or an exclusion") {
				t.Errorf("second run does not say %s has nothing to do:\n%s", ds, o)
			}
		}
		if after := size(run.out); after != before {
			t.Errorf("second run wrote %d bytes", after-before)
		}
	}
}

// checkEveryAnswerOnce checks that export's folder o holds, for dataset ds,
// exactly one record or exclusion per answer of rawByID, and that an
// exclusion's reason is length for a cut answer, else (in a conversations
// export, of a token-id prompt) ids_prompt.
func checkEveryAnswerOnce(t *testing.T, ds, o string, conversations bool, promptByID, rawByID map[string]map[string]json.RawMessage) {
	t.Helper()
	seen := map[string]int{}
	for _, name := range []string{"tokenized.jsonl", "excluded.jsonl"} {
		for _, l := range jsonLines(t, filepath.Join(o, ds, name)) {
			id := idOfLine(t, l)
			seen[id]++
			if name == "excluded.jsonl" {
				var reason string
				json.Unmarshal(l["reason"], &reason)
				var finish string
				json.Unmarshal(rawByID[id]["finish_reason"], &finish)
				want := "length"
				if finish != "length" && conversations && promptByID[id]["input_ids"] != nil {
					want = "ids_prompt"
				}
				if reason != want {
					t.Errorf("%s %s excluded for %s; its finish_reason is %s: want %s", ds, id, reason, finish, want)
				}
			}
		}
	}
	for id := range rawByID {
		if seen[id] != 1 {
			t.Errorf("%s: answer %s has %d records and exclusions in %s; want exactly 1", ds, id, seen[id], o)
		}
	}
	if len(seen) != len(rawByID) {
		t.Errorf("%s: %d ids in %s for %d answers", ds, len(seen), o, len(rawByID))
	}
}

// checkIDsRecordsAsSent checks that every ids record of ds in idsOut is
// the prompt's ids as the server c tokenizes them (as many as the answer's
// prompt_tokens) followed by the answer's output_ids, with the loss on the
// output only, and that ds has ids records.
func checkIDsRecordsAsSent(t *testing.T, c *client.Client, ds, idsOut string, promptByID, rawByID map[string]map[string]json.RawMessage) {
	t.Helper()
	records := 0
	for _, l := range jsonLines(t, filepath.Join(idsOut, ds, "tokenized.jsonl")) {
		records++
		id := idOfLine(t, l)
		var input, mask, output []int
		json.Unmarshal(l["input_ids"], &input)
		json.Unmarshal(l["loss_mask"], &mask)
		json.Unmarshal(rawByID[id]["output_ids"], &output)
		p := promptByID[id]
		var want []int
		switch {
		case p["input_ids"] != nil:
			json.Unmarshal(p["input_ids"], &want)
		case p["text"] != nil:
			var text string
			json.Unmarshal(p["text"], &text)
			want = sim.Encode(text, true)
		default:
			var turns []map[string]string
			json.Unmarshal(p["messages"], &turns)
			if turns == nil {
				json.Unmarshal(p["conversations"], &turns)
			}
			var msgs []client.Message
			for _, m := range turns {
				role, content := m["role"], m["content"]
				if m["from"] != "" {
					role, content = map[string]string{"human": "user", "gpt": "assistant", "system": "system"}[m["from"]], m["value"]
				}
				msgs = append(msgs, client.Message{Role: role, Content: content})
			}
			for len(msgs) > 0 && msgs[len(msgs)-1].Role == "assistant" {
				msgs = msgs[:len(msgs)-1]
			}
			var err error
			if want, err = c.TokenizeMessages(t.Context(), msgs); err != nil {
				t.Fatal(err)
			}
		}
		var promptTokens int
		json.Unmarshal(rawByID[id]["prompt_tokens"], &promptTokens)
		if len(want) != promptTokens {
			t.Fatalf("%s %s: the check's own prompt ids (%d) are not the %d the server saw", ds, id, len(want), promptTokens)
		}
		want = append(want, output...)
		if !reflect.DeepEqual(input, want) {
			t.Errorf("%s %s: input_ids %v; want prompt ids + output_ids %v", ds, id, input, want)
		}
		wantMask := make([]int, len(want))
		for i := promptTokens; i < len(want); i++ {
			wantMask[i] = 1
		}
		if !reflect.DeepEqual(mask, wantMask) {
			t.Errorf("%s %s: loss_mask %v; want %v", ds, id, mask, wantMask)
		}
	}
	if records == 0 {
		t.Errorf("%s: no ids records", ds)
	}
}

// checkConversationsEndWithTheAnswer checks that every conversations record
// of ds in convOut has as many user as assistant turns, at least one, and
// ends with the answer's text.
func checkConversationsEndWithTheAnswer(t *testing.T, ds, convOut string, rawByID map[string]map[string]json.RawMessage) {
	t.Helper()
	for _, l := range jsonLines(t, filepath.Join(convOut, ds, "tokenized.jsonl")) {
		id := idOfLine(t, l)
		var conv []client.Message
		json.Unmarshal(l["conversations"], &conv)
		users, assistants := 0, 0
		for _, m := range conv {
			switch m.Role {
			case "user":
				users++
			case "assistant":
				assistants++
			}
		}
		var text string
		json.Unmarshal(rawByID[id]["text"], &text)
		if users == 0 || users != assistants || conv[len(conv)-1].Content != text {
			t.Errorf("%s %s: %d user and %d assistant turns, last %q; want as many of each, ending with the answer %q", ds, id, users, assistants, conv[len(conv)-1], text)
		}
	}
}

// TestExportLeftAnswers: answers whose prompts are not indexed are left,
// not excluded: export says how to index them and exits 1; once the
// prompts are given, the next run exports them.
func TestExportLeftAnswers(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "answers", "L"), 0o755)
	os.MkdirAll(filepath.Join(root, "prompts", "L"), 0o755)
	answer := `{"id":"l1","output_ids":[5,2],"text":"hi","completion_tokens":2,"finish_reason":"stop"}`
	os.WriteFile(filepath.Join(root, "answers", "L", "raw_responses.jsonl"), []byte(answer+"\n"), 0o644)
	os.WriteFile(filepath.Join(root, "prompts", "L", "prompts.jsonl"), []byte(`{"id":"l1","input_ids":[1,4]}`+"\n"), 0o644)
	db := filepath.Join(t.TempDir(), "g.db")
	r := gendex(t, testEnv(nil), "--db", db, "export", "--format", "ids", filepath.Join(root, "answers"))
	if r.code != 1 || !strings.Contains(r.stderr, "1 answers left: their prompts are not in the index") {
		t.Fatalf("without the prompts: %s", r)
	}
	if data, _ := os.ReadFile(filepath.Join(root, "answers", "L", "excluded.jsonl")); len(data) != 0 {
		t.Errorf("a left answer was excluded: %s", data)
	}
	mustGendex(t, testEnv(nil), "--db", db, "export", "--format", "ids", filepath.Join(root, "answers"), filepath.Join(root, "prompts"))
	data, _ := os.ReadFile(filepath.Join(root, "answers", "L", "tokenized.jsonl"))
	// Last, the sum of the answer it was built from (its line's CRC-32C).
	if want := fmt.Sprintf(`{"id":"l1","input_ids":[1,4,5,2],"loss_mask":[0,0,1,1],"answer_sum":"%08x"}`+"\n", store.LineSum([]byte(answer))); string(data) != want {
		t.Errorf("tokenized.jsonl %q; want %q", data, want)
	}
}

// TestExportBadPromptNamedOnce: the answers of a prompt asked several
// times (gen --samples 3) whose prompt line is not a prompt are left, and
// export's message names that line once, not once per sample, for a
// prompt of ids and for one of messages.
func TestExportBadPromptNamedOnce(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	for ds, bad := range map[string]string{"L": `{"id":"p1","foo":1}`, "M": `{"id":"p1","messages":"hi"}`} {
		dir := filepath.Join(root, ds)
		os.MkdirAll(dir, 0o755)
		writeTestFile(t, filepath.Join(dir, "prompts.jsonl"), bad+"\n"+`{"id":"p2","input_ids":[1,4]}`+"\n")
		var answers strings.Builder
		for s := range 3 {
			for _, id := range []string{"p1", "p2"} {
				fmt.Fprintf(&answers, `{"sample":%d,"samples":3,"id":%q,"output_ids":[5,2],"text":"hi","completion_tokens":2,"finish_reason":"stop"}`+"\n", s, id)
			}
		}
		writeTestFile(t, filepath.Join(dir, "raw_responses.jsonl"), answers.String())
	}
	db := filepath.Join(t.TempDir(), "g.db")
	r := gendex(t, testEnv(nil), "--db", db, "export", "--format", "ids", root)
	for _, ds := range []string{"L", "M"} {
		line := fmt.Sprintf("export: %s: 3 answers left: their prompt lines are not prompts (", ds)
		i := strings.Index(r.stderr, line)
		if r.code != 1 || i < 0 {
			t.Fatalf("export of %s: %s", ds, r)
		}
		said, _, _ := strings.Cut(r.stderr[i+len(line):], "\n")
		if n := strings.Count(said, "prompts.jsonl:1:"); n != 1 || strings.Contains(said, "; ") {
			t.Errorf("%s: the bad prompt line named %d times, want once: %s", ds, n, said)
		}
	}
}

// TestExportMultiTurnFromSim: conversation lines in the contract's format
// (gen --turns all: one request per user turn, each sent with the
// regenerated turns before it, Tk carrying prompt_ids), generated here
// turn by turn from a `gendex sim` process for a 3-turn messages prompt and
// a 2-turn ShareGPT prompt, export as: ids records whose input_ids are Tk's
// prompt ids + Tk's output ids, with loss on Tk's output and, inside the
// prompt, exactly on the earlier turns' output ids (without the stop
// token, which the sim's template renders as <|im_end|>); and
// conversations with every assistant turn regenerated, none original.
func TestExportMultiTurnFromSim(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary and a simulator process")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin)
	c := client.New(url, client.Options{})
	root := filepath.Join(t.TempDir(), "root")
	dir := filepath.Join(root, "MT")
	os.MkdirAll(dir, 0o755)
	type prompt struct {
		id   string
		line string
		msgs []client.Message // the system and user turns
	}
	ps := []prompt{{
		id: "m3",
		line: `{"id":"m3","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"First question?"},` +
			`{"role":"assistant","content":"old one"},{"role":"user","content":"Second question?"},{"role":"assistant","content":"old two"},` +
			`{"role":"user","content":"Third question?"}]}`,
		msgs: []client.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "First question?"},
			{Role: "user", Content: "Second question?"}, {Role: "user", Content: "Third question?"}},
	}, {
		id: "s2",
		line: `{"id":"s2","conversations":[{"from":"human","value":"Tell me about eagles."},{"from":"gpt","value":"old reply"},` +
			`{"from":"human","value":"And about drafts?"},{"from":"gpt","value":"old reply 2"}]}`,
		msgs: []client.Message{{Role: "user", Content: "Tell me about eagles."}, {Role: "user", Content: "And about drafts?"}},
	}}
	var promptLines, rawLines strings.Builder
	turnsOf := map[string][]map[string]any{}
	maxNew := 4096
	for _, p := range ps {
		promptLines.WriteString(p.line + "\n")
		var history []client.Message
		var turns []map[string]any
		sumP, sumC := 0, 0
		for _, m := range p.msgs {
			history = append(history, m)
			if m.Role != "user" {
				continue
			}
			ids, err := c.TokenizeMessages(t.Context(), history)
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Generate(t.Context(), client.GenerateRequest{InputIDs: ids, Sampling: client.SamplingParams{MaxNewTokens: &maxNew}})
			if err != nil {
				t.Fatal(err)
			}
			if res.FinishReason != "stop" || res.Text == nil {
				t.Fatalf("%s: the simulator's answer finished with %q; the test wants whole answers", p.id, res.FinishReason)
			}
			turns = append(turns, map[string]any{"output_ids": res.OutputIDs, "text": *res.Text, "prompt_tokens": len(ids),
				"completion_tokens": len(res.OutputIDs), "finish_reason": "stop"})
			sumP += len(ids)
			sumC += len(res.OutputIDs)
			history = append(history, client.Message{Role: "assistant", Content: *res.Text})
			turns[len(turns)-1]["prompt_ids"] = ids // kept on the last turn only, below
		}
		for _, tu := range turns[:len(turns)-1] {
			delete(tu, "prompt_ids")
		}
		turnsOf[p.id] = turns
		line, _ := json.Marshal(map[string]any{"id": p.id, "turns": turns, "prompt_tokens": sumP, "completion_tokens": sumC, "finish_reason": "stop"})
		rawLines.Write(append(line, '\n'))
	}
	writePrompts(t, dir, promptLines.String())
	os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), []byte(rawLines.String()), 0o644)

	tmp := t.TempDir()
	idsOut, convOut := filepath.Join(tmp, "ids"), filepath.Join(tmp, "conv")
	for _, args := range [][]string{
		{"--db", filepath.Join(tmp, "a.db"), "export", "--format", "ids", "--out", idsOut, root},
		{"--db", filepath.Join(tmp, "b.db"), "export", "--out", convOut, root},
	} {
		mustRunGendex(t, bin, args...)
	}
	ints := func(v any) []int {
		b, _ := json.Marshal(v)
		var out []int
		json.Unmarshal(b, &out)
		return out
	}
	recs := jsonLines(t, filepath.Join(idsOut, "MT", "tokenized.jsonl"))
	if len(recs) != len(ps) {
		t.Fatalf("%d ids records for %d conversations", len(recs), len(ps))
	}
	for _, l := range recs {
		id := idOfLine(t, l)
		turns := turnsOf[id]
		k := len(turns)
		var input, mask []int
		json.Unmarshal(l["input_ids"], &input)
		json.Unmarshal(l["loss_mask"], &mask)
		promptIDs, out := ints(turns[k-1]["prompt_ids"]), ints(turns[k-1]["output_ids"])
		if want := append(append([]int(nil), promptIDs...), out...); !reflect.DeepEqual(input, want) {
			t.Errorf("%s: input_ids are not Tk's prompt_ids + output_ids", id)
		}
		var lossed, want []int
		for i, m := range mask[:min(len(mask), len(promptIDs))] {
			if m == 1 {
				lossed = append(lossed, input[i])
			}
		}
		for _, tu := range turns[:k-1] {
			o := ints(tu["output_ids"])
			want = append(want, o[:len(o)-1]...) // without the stop token
		}
		if len(want) == 0 || !reflect.DeepEqual(lossed, want) {
			t.Errorf("%s: the prompt ids with loss are %v; want the earlier turns' output ids %v", id, lossed, want)
		}
		for i, m := range mask[len(promptIDs):] {
			if m != 1 {
				t.Errorf("%s: output id %d has no loss", id, i)
			}
		}
	}
	for _, l := range jsonLines(t, filepath.Join(convOut, "MT", "tokenized.jsonl")) {
		id := idOfLine(t, l)
		var conv []client.Message
		json.Unmarshal(l["conversations"], &conv)
		var got, want []string
		users := 0
		for _, m := range conv {
			switch m.Role {
			case "assistant":
				got = append(got, m.Content)
			case "user":
				users++
			}
		}
		for _, tu := range turnsOf[id] {
			want = append(want, tu["text"].(string))
		}
		if !reflect.DeepEqual(got, want) || users != len(want) {
			t.Errorf("%s: assistant turns %q with %d user turns; want the regenerated %q, one per user turn", id, got, users, want)
		}
	}
}

// TestGenTurnsThenExport is the SpecForge path end to end: gen --turns all
// regenerates 3-turn conversations against the simulator, then export
// writes both formats with no server. An ids record is the last turn's
// prompt_ids + output_ids, with loss on the last turn's ids and on the
// earlier turns' ids inside the prompt; a conversations record holds the
// prompt's system and user turns with each turn's regenerated text.
func TestGenTurnsThenExport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	bin := gendexBinary(t)
	t.Parallel()
	dir := t.TempDir()
	const n, k = 20, 3
	writeConversationPrompts(t, filepath.Join(dir, "in", "mt"), "mt", n, k)
	run := func(args ...string) {
		t.Helper()
		mustRunGendex(t, bin, args...)
	}
	db := filepath.Join(dir, "g.db")
	out := filepath.Join(dir, "out")
	run("--db", db, "gen", "--server", "sim", "--max-new-tokens", "400", "--out", out, filepath.Join(dir, "in"))
	data, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	db2 := filepath.Join(dir, "g2.db")
	if err := os.WriteFile(db2, data, 0o600); err != nil {
		t.Fatal(err)
	}
	idsOut, convOut := filepath.Join(dir, "ids"), filepath.Join(dir, "conv")
	run("--db", db, "export", "--format", "ids", "--out", idsOut, out) // exit 0: nothing left for want of a server
	run("--db", db2, "export", "--out", convOut, out)

	type turnObj struct {
		OutputIDs    []int  `json:"output_ids"`
		PromptIDs    []int  `json:"prompt_ids"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	}
	conv := map[string][]turnObj{}
	for _, l := range jsonLines(t, filepath.Join(out, "mt", "raw_responses.jsonl")) {
		var ts []turnObj
		if err := json.Unmarshal(l["turns"], &ts); err != nil || len(ts) != k {
			t.Fatalf("raw line %s: %d turns (%v); want %d", l["id"], len(ts), err, k)
		}
		conv[idOfLine(t, l)] = ts
	}
	if len(conv) != n {
		t.Fatalf("%d conversations answered; want %d", len(conv), n)
	}
	truncated := func(ts []turnObj) bool {
		for _, x := range ts {
			if x.FinishReason == "length" {
				return true
			}
		}
		return false
	}
	records := 0
	for _, o := range []string{idsOut, convOut} {
		seen := map[string]bool{}
		for _, l := range jsonLines(t, filepath.Join(o, "mt", "excluded.jsonl")) {
			id := idOfLine(t, l)
			seen[id] = true
			if !truncated(conv[id]) {
				t.Errorf("%s excluded %s (%s), but no turn was cut off", o, id, l["reason"])
			}
		}
		for _, l := range jsonLines(t, filepath.Join(o, "mt", "tokenized.jsonl")) {
			id := idOfLine(t, l)
			if seen[id] {
				t.Fatalf("%s: %s both excluded and exported", o, id)
			}
			seen[id] = true
			ts := conv[id]
			last := ts[k-1]
			if o == idsOut {
				records++
				var ids, mask []int
				json.Unmarshal(l["input_ids"], &ids)
				json.Unmarshal(l["loss_mask"], &mask)
				want := append(append([]int(nil), last.PromptIDs...), last.OutputIDs...)
				if len(last.PromptIDs) == 0 || !slices.Equal(ids, want) || len(mask) != len(ids) {
					t.Fatalf("%s: input_ids %v, mask of %d; want prompt_ids + output_ids of the last turn (%d ids)", id, ids, len(mask), len(want))
				}
				p := len(last.PromptIDs)
				ones, earlier := 0, 0
				for _, m := range mask[:p] {
					ones += m
				}
				for _, x := range ts[:k-1] {
					earlier += len(x.OutputIDs)
				}
				if !slices.Equal(mask[p:], slices.Repeat([]int{1}, len(last.OutputIDs))) || ones < earlier-(k-1) || ones > earlier {
					t.Errorf("%s: %d prompt ids carry loss; the earlier turns have %d output ids (the stop token may be left out)", id, ones, earlier)
				}
				continue
			}
			var turns []struct{ Role, Content string }
			json.Unmarshal(l["conversations"], &turns)
			var user, assistant []string
			for _, x := range turns {
				switch x.Role {
				case "user":
					user = append(user, x.Content)
				case "assistant":
					assistant = append(assistant, x.Content)
				}
			}
			if len(user) != k || len(assistant) != k || turns[0].Role != "system" {
				t.Fatalf("%s: %d user and %d assistant turns (first %q); want %d each after the system turn", id, len(user), len(assistant), turns[0].Role, k)
			}
			var c int
			fmt.Sscanf(id, "mt-%d", &c)
			for i := range k {
				if user[i] != convUser("mt", c, i+1) {
					t.Errorf("%s: user turn %d is %q; want %q", id, i+1, user[i], convUser("mt", c, i+1))
				}
				if assistant[i] != ts[i].Text || strings.Contains(assistant[i], "an original answer") {
					t.Errorf("%s: assistant turn %d is %q; want the regenerated %q", id, i+1, assistant[i], ts[i].Text)
				}
			}
		}
		if len(seen) != n {
			t.Errorf("%s: %d conversations have a record or an exclusion; want %d", o, len(seen), n)
		}
	}
	if records == 0 {
		t.Fatal("no ids record to check (every conversation excluded)")
	}
	t.Logf("%d of %d conversations exported as ids records, the rest excluded as truncated", records, n)
}
