package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
)

// lossRuns returns the ids under loss of an ids record, one list per
// maximal run of 1s in its loss_mask.
func lossRuns(t *testing.T, rec map[string]json.RawMessage) [][]int {
	t.Helper()
	var ids, mask []int
	if err := json.Unmarshal(rec["input_ids"], &ids); err != nil || json.Unmarshal(rec["loss_mask"], &mask) != nil || len(ids) != len(mask) {
		t.Fatalf("record %s: %d input_ids, %d loss_mask (%v)", rec["id"], len(ids), len(mask), err)
	}
	var runs [][]int
	for i, m := range mask {
		switch {
		case m == 1 && (i == 0 || mask[i-1] == 0):
			runs = append(runs, []int{ids[i]})
		case m == 1:
			runs[len(runs)-1] = append(runs[len(runs)-1], ids[i])
		case m != 0:
			t.Fatalf("record %s: loss_mask holds %d", rec["id"], m)
		}
	}
	return runs
}

// withoutLoss returns the prompt part of an ids record (its last run of
// loss, the last turn's output, off) without its ids under loss.
func withoutLoss(t *testing.T, rec map[string]json.RawMessage) []int {
	var ids, mask []int
	json.Unmarshal(rec["input_ids"], &ids)
	json.Unmarshal(rec["loss_mask"], &mask)
	n := len(mask)
	for n > 0 && mask[n-1] == 1 {
		n--
	}
	var out []int
	for i := range n {
		if mask[i] == 0 {
			out = append(out, ids[i])
		}
	}
	return out
}

// withoutAssistant returns the simulator's prompt ids without the bodies
// of its assistant turns (from the assistant header to their end).
func withoutAssistant(prompt []int) []int {
	var out []int
	in := false
	for i, id := range prompt {
		switch {
		case in && id == sim.IMEndID:
			in = false
		case in:
			continue
		case i > 0 && prompt[i-1] == sim.IMStartID && id == sim.AssistantID:
			in = true
		}
		out = append(out, id)
	}
	return out
}

// rawTurn is what the loss test reads of one turn of a raw line.
type rawTurn struct {
	OutputIDs []int           `json:"output_ids"`
	PromptIDs []int           `json:"prompt_ids"`
	Text      *string         `json:"text"`
	ToolCalls json.RawMessage `json:"tool_calls"`
}

// rawTurnsOf returns a raw line's turns (a flat answer as its one turn).
func rawTurnsOf(t *testing.T, raw map[string]json.RawMessage) []rawTurn {
	t.Helper()
	if raw["turns"] == nil {
		var one rawTurn
		b, _ := json.Marshal(raw)
		json.Unmarshal(b, &one)
		return []rawTurn{one}
	}
	var ts []rawTurn
	if err := json.Unmarshal(raw["turns"], &ts); err != nil {
		t.Fatalf("raw line %s: %v", raw["id"], err)
	}
	return ts
}

// checkTurnLoss checks every ids record of dir against its raw line:
// counted apart per assistant turn, the ids under loss are each turn's
// own output ids, in order (an earlier turn's without its last id where
// the template ends the turn with its own end token, not the stop token
// generated). It returns how many earlier turns had both text and a call.
func checkTurnLoss(t *testing.T, name, dir string) (textAndCall int) {
	t.Helper()
	raws := map[string][]rawTurn{}
	for _, l := range readRecords(t, filepath.Join(dir, "raw_responses.jsonl")) {
		var id string
		json.Unmarshal(l["id"], &id)
		raws[id] = rawTurnsOf(t, l)
	}
	recs := readRecords(t, filepath.Join(dir, "tokenized.jsonl"))
	if len(recs) == 0 {
		t.Fatalf("%s: no ids records", name)
	}
	lost := 0
	for _, rec := range recs {
		var id string
		json.Unmarshal(rec["id"], &id)
		turns := raws[id]
		runs := lossRuns(t, rec)
		for i, tu := range turns {
			last := i == len(turns)-1
			if !last && tu.Text != nil && strings.TrimSpace(*tu.Text) != "" && len(tu.ToolCalls) > 2 {
				textAndCall++
			}
			ok := i < len(runs) && (slices.Equal(runs[i], tu.OutputIDs) ||
				!last && len(tu.OutputIDs) > 1 && slices.Equal(runs[i], tu.OutputIDs[:len(tu.OutputIDs)-1]))
			if !ok {
				lost++
				t.Errorf("%s: record %s: turn %d of %d does not carry its own %d output ids as its loss (%d runs of loss)",
					name, id, i+1, len(turns), len(tu.OutputIDs), len(runs))
			}
		}
		if len(runs) != len(turns) {
			t.Errorf("%s: record %s: %d runs of loss for %d turns", name, id, len(runs), len(turns))
		}
		if p := turns[len(turns)-1].PromptIDs; p != nil && !slices.Equal(withoutLoss(t, rec), withoutAssistant(p)) {
			t.Errorf("%s: record %s: outside its turns' loss, its ids are not the server's prompt outside the assistant turns", name, id)
		}
	}
	if lost > 0 {
		t.Logf("%s: %d turns without their loss", name, lost)
	}
	return textAndCall
}

// withShareGPT appends to dir's prompts n plain ShareGPT conversations
// of 1 to 3 human turns, some with a system turn.
func withShareGPT(t *testing.T, dir string, n int) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "prompts.jsonl"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range n {
		var turns []string
		if i%2 == 0 {
			turns = append(turns, `{"from":"system","value":"Be brief."}`)
		}
		for h := range 1 + i%3 {
			turns = append(turns, fmt.Sprintf(`{"from":"human","value":"Question %d of chat %d?"}`, h, i), `{"from":"gpt","value":"The data's answer."}`)
		}
		fmt.Fprintf(f, `{"id":"s%d","conversations":[%s]}`+"\n", i, strings.Join(turns, ","))
	}
}

// TestIDsRecordsGiveEveryTurnItsLoss: tool conversations (OpenAI messages
// over two user turns, glaive ShareGPT) and plain ShareGPT conversations
// regenerated against the simulator's tool-calling model as vLLM (chat,
// whose parser keeps the text before a call as it is, so the template
// renders a turn with text and a call with another blank line than the
// model wrote), as SGLang (/generate), Qwen's and Kimi-K2's markup, and
// as a reasoning model (whose template drops an earlier turn's thinking
// once a user turn follows): in every ids record, from gen --export ids
// and from gendex export --format ids alike, every regenerated assistant
// turn carries its own output ids as its loss; none is excluded for want
// of it (a conversation cut at the limit is excluded as length). (Before, the vLLM turns with text and a call had no loss at all,
// nor the earlier turns whose thinking the template dropped.)
func TestIDsRecordsGiveEveryTurnItsLoss(t *testing.T) {
	t.Parallel()
	bin := gendexBinary(t)
	for _, flavor := range [][]string{
		{"--sim-flavor", "vllm", "--sim-tool-call-parser", "hermes", "--sim-enable-auto-tool-choice"},
		{"--sim-flavor", "vllm", "--sim-tool-call-parser", "kimi_k2", "--sim-enable-auto-tool-choice"},
		{"--sim-flavor", "vllm", "--sim-tool-call-parser", "hermes", "--sim-enable-auto-tool-choice", "--sim-reasoning"},
		{"--sim-flavor", "sglang", "--sim-tool-call-parser", "qwen25"},
		{"--sim-flavor", "sglang", "--sim-tool-call-parser", "kimi_k2", "--sim-reasoning"},
	} {
		name := flavor[1] + " " + flavor[3]
		if slices.Contains(flavor, "--sim-reasoning") {
			name += " reasoning"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			checkEveryTurnsLoss(t, bin, name, flavor)
		})
	}
}

// checkEveryTurnsLoss is TestIDsRecordsGiveEveryTurnItsLoss against the
// simulator started with the flags flavor (named name): gen --export ids
// (the binary: the answers of 1,200 tokens are many for the race
// detector), export --format ids and check.
func checkEveryTurnsLoss(t *testing.T, bin, name string, flavor []string) {
	dir := simToolDataset(t, 24)
	withShareGPT(t, dir, 12)
	db := filepath.Join(t.TempDir(), "g.db")
	args := append([]string{"--db", db, "gen", "--server", "sim", "--sim-tool-calls", "--max-new-tokens", "1200", "--export", "ids"}, flavor...)
	if code, stdout, stderr := runGendex(t, bin, "", append(args, dir)...); code != 0 {
		t.Fatalf("%s: gen: exit %d\n%s%s", name, code, stdout, stderr)
	}
	if n := checkTurnLoss(t, name+" gen --export ids", dir); n == 0 && flavor[1] == "vllm" {
		t.Errorf("%s: no earlier turn had text and a call: the case is not tried", name)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "excluded.jsonl")); len(b) > 0 {
		for _, l := range readRecords(t, filepath.Join(dir, "excluded.jsonl")) {
			if string(l["reason"]) != `"length"` { // a conversation cut at the limit ends there, excluded
				t.Errorf("%s: excluded: %s %s %s", name, l["id"], l["reason"], l["detail"])
			}
		}
	}
	out := t.TempDir()
	r := gendex(t, testEnv(nil), "--db", filepath.Join(out, "e.db"), "export", "--format", "ids", "--out", out, dir)
	if r.code != 0 || strings.Contains(r.stderr, "no loss") {
		t.Fatalf("%s: export: %s", name, r)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "tokenized.jsonl"))
	got, _ := os.ReadFile(filepath.Join(out, "agentic", "tokenized.jsonl"))
	if string(got) != string(want) {
		t.Errorf("%s: export's ids records differ from gen's", name)
	}
	if r := gendex(t, testEnv(nil), "--db", db, "check", dir); strings.Contains(r.stdout, "no_turn_loss") {
		t.Errorf("%s: check: %s", name, r)
	}
}

// TestIDsRecordWithoutTurnLossIsExcluded: answers made elsewhere (no
// prompt_tokens per turn) whose earlier turn's output ids are not in the
// conversation's prompt ids cannot give that turn its loss: export
// excludes the answer as no_turn_loss, saying which turn and why, and
// makes the records of the others (a turn found verbatim, or without its
// stop token); check blocks on it with a fix; query counts it (progress)
// and lists it (list --stage excluded --finish no_turn_loss).
func TestIDsRecordWithoutTurnLossIsExcluded(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "convs")
	os.MkdirAll(dir, 0o755)
	prompt := func(id string) string {
		return `{"id":"` + id + `","conversations":[{"from":"system","value":"sys"},{"from":"human","value":"q1"},{"from":"gpt","value":"a"},{"from":"human","value":"q2"},{"from":"gpt","value":"b"}]}`
	}
	// The last prompt renders turn 1 as 20 21 22, then its end 4.
	const last = `"prompt_ids":[1,3,10,11,4,3,12,13,4,3,20,21,22,4,3,12,14,4,3],"finish_reason":"stop"}],"finish_reason":"stop"}`
	writePrompts(t, dir, prompt("ok")+"\n"+prompt("stop")+"\n"+prompt("lost")+"\n")
	os.WriteFile(filepath.Join(dir, "raw_responses.jsonl"), []byte(
		`{"id":"ok","turns":[{"output_ids":[20,21,22,4],"text":"x","finish_reason":"stop"},{"output_ids":[30,2],"text":"y",`+last+"\n"+
			`{"id":"stop","turns":[{"output_ids":[20,21,22,2],"text":"x","finish_reason":"stop"},{"output_ids":[30,2],"text":"y",`+last+"\n"+
			`{"id":"lost","turns":[{"output_ids":[20,25,22,2],"text":"x","finish_reason":"stop"},{"output_ids":[30,2],"text":"y",`+last+"\n"), 0o644)
	db := filepath.Join(t.TempDir(), "e.db")
	r := gendex(t, testEnv(nil), "--db", db, "export", "--format", "ids", dir)
	if r.code != 0 || !strings.Contains(r.stderr, "2 ids records, 1 excluded (no_turn_loss 1)") {
		t.Fatalf("export: %s", r)
	}
	recs := readRecords(t, filepath.Join(dir, "tokenized.jsonl"))
	for _, rec := range recs {
		runs := lossRuns(t, rec)
		if len(runs) != 2 || !slices.Equal(runs[0], []int{20, 21, 22}) && !slices.Equal(runs[0], []int{20, 21, 22, 4}) || !slices.Equal(runs[1], []int{30, 2}) {
			t.Errorf("record %s: loss on %v", rec["id"], runs)
		}
	}
	exc := readRecords(t, filepath.Join(dir, "excluded.jsonl"))
	var reason, detail string
	json.Unmarshal(exc[0]["reason"], &reason)
	json.Unmarshal(exc[0]["detail"], &detail)
	if len(recs) != 2 || len(exc) != 1 || string(exc[0]["id"]) != `"lost"` || reason != "no_turn_loss" ||
		!strings.Contains(detail, "turn 1 of 2: its 4 output ids are not in the conversation's prompt ids") || !strings.Contains(detail, "no prompt_tokens") {
		t.Fatalf("records %d, exclusions %v (%s)", len(recs), exc, detail)
	}
	r = gendex(t, testEnv(nil), "--db", db, "check", "--format", "json", dir)
	var v struct {
		Datasets []struct {
			Ready   bool
			Reasons []struct {
				Reason string
				Blocks bool
				Count  float64
				Fix    string
			}
		}
	}
	json.Unmarshal([]byte(r.stdout), &v)
	found := false
	for _, d := range v.Datasets {
		for _, rs := range d.Reasons {
			found = found || rs.Reason == "no_turn_loss" && rs.Blocks && rs.Count == 1 && strings.Contains(rs.Fix, "--format conversations") && !d.Ready
		}
	}
	if r.code != 1 || !found {
		t.Errorf("check does not block on the answer excluded as no_turn_loss: %s", r)
	}
	if r := gendex(t, testEnv(nil), "--db", db, "query", "list", "convs", "--stage", "excluded", "--finish", "no_turn_loss"); r.code != 0 || !strings.Contains(r.stdout, "\nlost\tno_turn_loss") || strings.Contains(r.stdout, "\nok\t") {
		t.Errorf("query list --stage excluded --finish no_turn_loss: %s", r)
	}
	if r := gendex(t, testEnv(nil), "--db", db, "query", "progress", "--format", "json", "convs"); r.code != 0 || !strings.Contains(r.stdout, `"excluded": 1,`) {
		t.Errorf("query progress: %s", r)
	}
}
