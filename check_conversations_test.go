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

// seedShapes writes, under root, a dataset folder per shape the seeds'
// data has: sharegpt (one to three human turns, system turns), chat
// (OpenAI messages, one to three user turns after a system one), fncall
// (OpenAI messages + tools whose data ends at the assistant's call), traj
// (agent trajectories: several and parallel calls, their results, a last
// text answer) and glaive (function_call / observation).
func seedShapes(t *testing.T, root string) {
	t.Helper()
	tools := `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},` +
		`{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"zone":{"type":"string"}}}}}]`
	call := func(id, name, args string) string {
		return fmt.Sprintf(`{"id":%q,"type":"function","function":{"name":%q,"arguments":%q}}`, id, name, args)
	}
	result := func(id, name, content string) string {
		return fmt.Sprintf(`{"role":"tool","tool_call_id":%q,"name":%q,"content":%q}`, id, name, content)
	}
	sets := map[string][]string{}
	for i := range 18 {
		var turns []string
		if i%2 == 0 {
			turns = append(turns, `{"from":"system","value":"Answer briefly."}`)
		}
		for h := range i%3 + 1 {
			turns = append(turns, fmt.Sprintf(`{"from":"human","value":"question %d, turn %d: how does a drafter learn?"}`, i, h),
				`{"from":"gpt","value":"old answer"}`)
		}
		sets["sharegpt"] = append(sets["sharegpt"], fmt.Sprintf(`{"id":"s%d","conversations":[%s]}`, i, strings.Join(turns, ",")))
		msgs := []string{`{"role":"system","content":"You are terse."}`}
		for u := range (i+1)%3 + 1 {
			msgs = append(msgs, fmt.Sprintf(`{"role":"user","content":"chat %d, message %d: what is a loss mask?"}`, i, u),
				`{"role":"assistant","content":"old reply"}`)
		}
		sets["chat"] = append(sets["chat"], fmt.Sprintf(`{"id":"c%d","messages":[%s]}`, i, strings.Join(msgs, ",")))
	}
	for i := range 16 {
		sets["fncall"] = append(sets["fncall"], fmt.Sprintf(`{"id":"f%d","tools":%s,"messages":[{"role":"system","content":"Use the tools."},`+
			`{"role":"user","content":"Weather in city %d?"},{"role":"assistant","content":null,"tool_calls":[%s]}]}`,
			i, tools, i, call("call_1", "get_weather", fmt.Sprintf(`{"city": "c%d"}`, i))))
		calls := call("call_1", "get_weather", `{"city": "Paris"}`)
		results := result("call_1", "get_weather", "15C")
		if i%2 == 0 { // parallel calls
			calls += "," + call("call_2", "get_time", `{"zone": "CET"}`)
			results += "," + result("call_2", "get_time", "10:00")
		}
		more := ""
		if i%3 == 0 { // a second user turn, with another call
			more = fmt.Sprintf(`,{"role":"user","content":"And in Rome?"},{"role":"assistant","content":null,"tool_calls":[%s]},%s,{"role":"assistant","content":"Rome: 20C."}`,
				call("call_3", "get_weather", `{"city": "Rome"}`), result("call_3", "get_weather", "20C"))
		}
		sets["traj"] = append(sets["traj"], fmt.Sprintf(`{"id":"t%d","tools":%s,"messages":[{"role":"user","content":"Weather and time for trip %d?"},`+
			`{"role":"assistant","content":null,"tool_calls":[%s]},%s,{"role":"assistant","content":"15C at 10:00."}%s]}`, i, tools, i, calls, results, more))
		glaiveTools, _ := json.Marshal(`[{"name": "calculate_area", "description": "area", "parameters": {"type": "object", "properties": {"w": {"type": "number"}}}}]`)
		sets["glaive"] = append(sets["glaive"], fmt.Sprintf(`{"id":"g%d","tools":%s,"conversations":[{"from":"system","value":"You may call functions."},`+
			`{"from":"human","value":"Area of a %d by 3 rectangle?"},{"from":"function_call","value":"{\"name\": \"calculate_area\", \"arguments\": {\"w\": %d}}"},`+
			`{"from":"observation","value":"{\"area\": %d}"},{"from":"gpt","value":"%d square units."}]}`, i, glaiveTools, i, i, 3*i, 3*i))
	}
	for name, lines := range sets {
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writePrompts(t, dir, strings.Join(lines, "\n")+"\n")
	}
}

// seedShapeNames are seedShapes' datasets.
var seedShapeNames = []string{"chat", "fncall", "glaive", "sharegpt", "traj"}

// simToolArgs answer every seed shape with the simulator: a tool-calling
// model, its calls read by SGLang's qwen25 parser.
var simToolArgs = []string{"gen", "--server", "sim", "--sim-tool-calls", "--tool-call-parser", "qwen25", "--max-new-tokens", "512"}

// assistantTurns reads a folder's raw_responses.jsonl as a reader outside
// gendex would: each answer's assistant turns (a conversation line's
// "turns", else the line itself), by id.
func assistantTurns(t *testing.T, dir string) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	eachJSONLine(t, filepath.Join(dir, "raw_responses.jsonl"), func(l []byte) {
		var a map[string]any
		if err := json.Unmarshal(l, &a); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		id, _ := a["id"].(string)
		if ts, ok := a["turns"].([]any); ok {
			for _, x := range ts {
				m, _ := x.(map[string]any)
				out[id] = append(out[id], m)
			}
			return
		}
		out[id] = []map[string]any{a}
	})
	return out
}

// TestCheckReadsEveryTurn: a clean run of every seed shape (multi-turn
// ShareGPT, a function-calling set that ends at the call, agent
// trajectories, glaive), each answered and exported whole, is ready: a
// turn that only calls a tool is not empty, and every turn is read. So it
// is for a thinking model's answers, through SGLang's /generate (the
// <think> section in the text) and vLLM's chat (reasoning_content apart).
// Before, check read only an answer line's top-level text, which a
// conversation line has none of: every conversation was empty_content.
func TestCheckReadsEveryTurn(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	seedShapes(t, filepath.Join(p.dir, "seeds"))
	p.mustRun(append(simToolArgs, "--export", "conversations", "seeds")...)
	// The data holds what the test is about: conversations of several
	// turns, and turns that only call a tool.
	var multi, callOnly int
	for _, ds := range seedShapeNames {
		for _, turns := range assistantTurns(t, filepath.Join(p.dir, "seeds", ds)) {
			if len(turns) > 1 {
				multi++
			}
			for _, tn := range turns {
				if text, _ := tn["text"].(string); strings.TrimSpace(text) == "" && tn["tool_calls"] != nil {
					callOnly++
				}
			}
		}
	}
	if multi == 0 || callOnly == 0 {
		t.Fatalf("the seed shapes' answers hold %d conversations of several turns and %d turns that only call a tool; want some of each", multi, callOnly)
	}
	code, reasons, out := p.checkJSON("--allow-simulated", "--max-length", "100000", "seeds")
	if code != 0 || len(reasons) != len(seedShapeNames) {
		t.Errorf("check of a clean run of every seed shape: exit %d, %d datasets; want 0 and %d\n%s", code, len(reasons), len(seedShapeNames), out)
	}
	for ds, rs := range reasons {
		for r := range rs {
			if r != "simulated" && r != "made_by" {
				t.Errorf("%s: reason %s (%v) in a clean run\n%s", ds, r, rs[r], out)
			}
		}
	}

	// Asked of a writer (ingest --follow holds the index), which reads the
	// answers itself: the same verdicts, every turn read.
	startWriter(t, filepath.Join(p.dir, "gendex.db"), []string{"GENDEX_DB="}, "ingest", "--follow", filepath.Join(p.dir, "seeds"))
	code, reasons, out = p.checkJSON("--allow-simulated", "--max-length", "100000", "seeds")
	if code != 0 || len(reasons) != len(seedShapeNames) {
		t.Errorf("check asked of a writer: exit %d, %d datasets; want 0 and %d\n%s", code, len(reasons), len(seedShapeNames), out)
	}
	for ds, rs := range reasons {
		if _, ok := rs["content_unchecked"]; ok || rs["length_unknown"] != 0 {
			t.Errorf("%s: the writer did not read the answers\n%s", ds, out)
		}
	}

	for _, flavor := range []string{"sglang", "vllm"} {
		db := "think-" + flavor + ".db"
		args := []string{"--db", db, "gen", "--server", "sim", "--sim-flavor", flavor, "--sim-reasoning", "--sim-tool-calls", "--max-new-tokens", "2048",
			"--export", "conversations", "--out", "think-" + flavor}
		if flavor == "vllm" {
			args = append(args, "--sim-enable-auto-tool-choice", "--sim-tool-call-parser", "hermes")
		} else {
			args = append(args, "--tool-call-parser", "qwen25")
		}
		p.mustRun(append(args, "seeds")...)
		thought := 0
		for _, ds := range seedShapeNames {
			for _, turns := range assistantTurns(t, filepath.Join(p.dir, "think-"+flavor, ds)) {
				for _, tn := range turns {
					if text, _ := tn["text"].(string); tn["reasoning_content"] != nil || strings.Contains(text, "</think>") {
						thought++
					}
				}
			}
		}
		if thought == 0 {
			t.Errorf("%s: the reasoning model's answers hold no thinking", flavor)
		}
		if code, reasons, out := p.checkJSON("--db", db, "--allow-simulated", "think-"+flavor); code != 0 || len(reasons) != len(seedShapeNames) {
			t.Errorf("%s: check of a thinking model's clean run: exit %d, %d datasets; want 0 and %d\n%s", flavor, code, len(reasons), len(seedShapeNames), out)
		}
		if code, reasons, out := p.checkJSON("--db", db, "think-"+flavor); code != 1 || reasons["sharegpt"]["simulated"] != float64(len(assistantTurns(t, filepath.Join(p.dir, "think-"+flavor, "sharegpt")))) {
			t.Errorf("%s: check of the simulator's thinking answers without --allow-simulated: exit %d, want 1 and every answer simulated\n%s", flavor, code, out)
		}
		// Its records' lengths, thinking and all, as export measures them.
		lengths := map[string]map[string]int{}
		for _, ds := range seedShapeNames {
			lengths[ds] = recordLengths(t, filepath.Join(p.dir, "think-"+flavor, ds))
		}
		p.maxLengthClears(db, "think-"+flavor, "", lengths)
	}
}

// editAnswers copies the seed run's prompts and answers of each dataset
// under from to to, with edit applied to each answer line (decoded with
// its numbers as they are; edit returns whether it changed it): answers as
// a server could have made them, for a fresh index.
func editAnswers(t *testing.T, from, to string, edit func(ds string, a map[string]any) bool) map[string]int {
	t.Helper()
	edited := map[string]int{}
	for _, ds := range seedShapeNames {
		src, dst := filepath.Join(from, ds), filepath.Join(to, ds)
		copyPrompts(t, src, dst)
		var buf bytes.Buffer
		eachJSONLine(t, filepath.Join(src, "raw_responses.jsonl"), func(l []byte) {
			d := json.NewDecoder(bytes.NewReader(l))
			d.UseNumber()
			var a map[string]any
			if err := d.Decode(&a); err != nil {
				t.Fatal(err)
			}
			if edit(ds, a) {
				edited[ds]++
			}
			b, _ := json.Marshal(a)
			buf.Write(append(b, '\n'))
		})
		if err := os.WriteFile(filepath.Join(dst, "raw_responses.jsonl"), buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return edited
}

// turnsOf is an answer line's "turns", nil for a single answer.
func turnsOf(a map[string]any) []map[string]any {
	ts, _ := a["turns"].([]any)
	var out []map[string]any
	for _, x := range ts {
		m, _ := x.(map[string]any)
		out = append(out, m)
	}
	return out
}

// TestCheckContentFaultsInEveryTurn: the content checks read every
// assistant turn of every seed shape. Answers edited as a broken server
// could have made them, then ingested and exported by a fresh index: an
// earlier turn left empty (while turns that only call a tool stay fine),
// <think> markers in an earlier turn's text with its reasoning kept
// apart, one text in an earlier turn of 3 conversations, and a last turn
// without its token counts (its length unknown, never 0): each is counted
// exactly. Before, a conversation line's turns were not read at all.
func TestCheckContentFaultsInEveryTurn(t *testing.T) {
	t.Parallel()
	p := newPlaceRun(t)
	seedShapes(t, filepath.Join(p.dir, "seeds"))
	p.mustRun(append(simToolArgs, "seeds")...)
	type want struct{ empty, think, repeated, unknown int }
	wants := map[string]*want{}
	edited := editAnswers(t, filepath.Join(p.dir, "seeds"), filepath.Join(p.dir, "faults"), func(ds string, a map[string]any) bool {
		w := wants[ds]
		if w == nil {
			w = &want{}
			wants[ds] = w
		}
		ts := turnsOf(a)
		for _, tn := range ts {
			if tn["finish_reason"] == "length" {
				return false // excluded: no record to check
			}
		}
		if len(ts) == 0 {
			return false
		}
		// A turn with text and no call, before the last if there is one.
		at := -1
		for i, tn := range ts {
			if text, _ := tn["text"].(string); tn["tool_calls"] == nil && strings.TrimSpace(text) != "" && (at < 0 || i < len(ts)-1) {
				at = i
				if i < len(ts)-1 {
					break
				}
			}
		}
		switch {
		case at >= 0 && w.empty < 1:
			ts[at]["text"] = " \n"
			w.empty++
		case at >= 0 && w.think < 1:
			ts[at]["text"] = "<think>\nthe plan\n</think>\n\nThe answer."
			ts[at]["reasoning_content"] = "the plan"
			w.think++
		case at >= 0 && w.repeated < 3:
			ts[at]["text"] = "The same answer, whatever was asked."
			w.repeated++
		case w.unknown < 1:
			last := ts[len(ts)-1]
			delete(last, "prompt_tokens")
			delete(last, "completion_tokens")
			w.unknown++
		default:
			return false
		}
		return true
	})
	for _, ds := range seedShapeNames {
		if w := wants[ds]; w == nil || w.unknown != 1 || edited[ds] != 6 {
			t.Fatalf("%s: the seed run has too few answers of several turns to edit (%d edited): %+v", ds, edited[ds], w)
		}
	}
	p.mustRun("--db", "faults.db", "ingest", "faults")
	p.mustRun("--db", "faults.db", "export", "faults")
	code, reasons, out := p.checkJSON("--db", "faults.db", "--allow-simulated", "--max-length", "100000", "faults")
	if code != 1 {
		t.Errorf("check of the edited answers: exit %d, want 1\n%s", code, out)
	}
	for _, ds := range seedShapeNames {
		r := reasons[ds]
		if r["empty_content"] != 1 || r["think_in_content"] != 1 || r["repeated_text"] != 3 || r["length_unknown"] != 1 {
			t.Errorf("%s: empty_content %v, think_in_content %v, repeated_text %v, length_unknown %v; want 1, 1, 3, 1\n%s",
				ds, r["empty_content"], r["think_in_content"], r["repeated_text"], r["length_unknown"], out)
		}
	}
}
