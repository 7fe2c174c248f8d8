package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gendex/ingest/gen/sim"
)

// parallelDataset writes n agent trajectories of each shape with parallel
// calls, over one tool (search) so that any call of the model's takes the
// next result: OpenAI messages (two parallel calls and their results, one
// more call and its result, the answer) and glaive (a function_call list
// of two calls, two observations, the answer). It returns the dataset and
// each prompt's results, in order.
func parallelDataset(t *testing.T, n int) (string, map[string][]string) {
	t.Helper()
	const tools = `[{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}]`
	var lines []string
	results := map[string][]string{}
	for i := range n {
		lines = append(lines, fmt.Sprintf(`{"id":"par%d","tools":%s,"messages":[{"role":"system","content":"You compare."},{"role":"user","content":"Compare %d and %d."},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"search","arguments":"{\"q\": \"%d\"}"}},`+
			`{"id":"b","type":"function","function":{"name":"search","arguments":"{\"q\": \"%d\"}"}}]},`+
			`{"role":"tool","tool_call_id":"a","content":"r%da"},{"role":"tool","tool_call_id":"b","content":"r%db"},`+
			`{"role":"assistant","content":"One more.","tool_calls":[{"id":"c","type":"function","function":{"name":"search","arguments":"{\"q\": \"both\"}"}}]},`+
			`{"role":"tool","tool_call_id":"c","name":"search","content":"r%dc"},{"role":"assistant","content":"Done."}]}`, i, tools, i, i+1, i, i+1, i, i, i))
		results[fmt.Sprint("par", i)] = []string{fmt.Sprintf("r%da", i), fmt.Sprintf("r%db", i), fmt.Sprintf("r%dc", i)}
		lines = append(lines, fmt.Sprintf(`{"id":"gpar%d","tools":"[{\"name\": \"search\", \"parameters\": {\"type\": \"object\", \"properties\": {\"q\": {\"type\": \"string\"}}, \"required\": [\"q\"]}}]",`+
			`"conversations":[{"from":"human","value":"Find %d and %d."},`+
			`{"from":"function_call","value":"[{\"name\": \"search\", \"arguments\": {\"q\": \"%d\"}}, {\"name\": \"search\", \"arguments\": {\"q\": \"%d\"}}]"},`+
			`{"from":"observation","value":"g%da"},{"from":"observation","value":"g%db"},{"from":"gpt","value":"Found."}]}`, i, i, i+1, i, i+1, i, i))
		results[fmt.Sprint("gpar", i)] = []string{fmt.Sprintf("g%da", i), fmt.Sprintf("g%db", i)}
	}
	return toolDataset(t, lines...), results
}

// recordCall is a call of a conversations record's assistant turn.
type recordCall struct {
	ID       string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// recordTurn is a turn of a conversations record.
type recordTurn struct {
	Role       string       `json:"role"`
	Content    string       `json:"content"`
	ToolCalls  []recordCall `json:"tool_calls"`
	ToolCallID string       `json:"tool_call_id"`
	Name       string       `json:"name"`
}

// checkPairedInOrder checks a conversations record's tool turns: the tool
// turns after an assistant turn answer its calls one to one, in order (the
// k-th its k-th call's id and tool), and their contents are the data's
// results in order. It returns how many assistant turns made parallel
// calls answered so.
func checkPairedInOrder(t *testing.T, what, id string, conv []recordTurn, results []string) int {
	t.Helper()
	var got []string
	parallel := 0
	for i := 0; i < len(conv); i++ {
		calls := conv[i].ToolCalls
		if conv[i].Role != "assistant" || len(calls) == 0 {
			continue
		}
		j := i + 1
		for j < len(conv) && conv[j].Role == "tool" {
			j++
		}
		answers := conv[i+1 : j]
		if j == len(conv) && len(answers) == 0 {
			break // the record ends at the model's calls
		}
		if len(answers) != len(calls) {
			t.Errorf("%s: %s: turn %d made %d call(s), %d tool turn(s) follow: %+v", what, id, i+1, len(calls), len(answers), conv)
			continue
		}
		for k, a := range answers {
			if a.ToolCallID != calls[k].ID || a.Name != calls[k].Function.Name || calls[k].ID == "" {
				t.Errorf("%s: %s: turn %d's call %d (%s %s) answered by %+v", what, id, i+1, k+1, calls[k].ID, calls[k].Function.Name, a)
			}
			got = append(got, a.Content)
		}
		if len(calls) > 1 {
			parallel++
		}
	}
	if len(got) > len(results) || !slices.Equal(got, results[:len(got)]) {
		t.Errorf("%s: %s: results sent %q, want the data's in order %q", what, id, got, results)
	}
	return parallel
}

// countIDs counts id in ids, and <|im_start|><|tool|> (tool turns).
func countIDs(ids []int, id int) (n, toolTurns int) {
	for i, x := range ids {
		if x == id {
			n++
		}
		if x == sim.IMStartID && i+1 < len(ids) && ids[i+1] == sim.ToolID {
			toolTurns++
		}
	}
	return n, toolTurns
}

// TestParallelToolCallsPaired: agent trajectories with parallel calls
// (OpenAI messages; glaive's function_call list) regenerated against the
// simulator's tool-calling model as SGLang, vLLM and llama.cpp (which
// makes parallel calls only when the request sets parallel_tool_calls,
// which gen's does): the model's parallel calls are all taken, each answered by the next result with its
// own id, in order, and kept so in the records, in the conversations
// format (every call, a tool turn per call with its id and tool, the
// data's results in order) and the ids format (every call's markup and
// every result's turn in the ids). Under --turns last the data's own
// parallel calls are sent and kept, each result with its call's id.
// (speculators keeps only the first of several parallel calls.)
func TestParallelToolCallsPaired(t *testing.T) {
	t.Parallel()
	llamacpp := struct {
		name string
		args []string
	}{"llamacpp", []string{"--sim-tool-calls", "--sim-flavor", "llamacpp"}}
	for _, fl := range append(slices.Clone(simToolFlavors), llamacpp) {
		for _, format := range []string{"conversations", "ids"} {
			if fl.name == "llamacpp" && format == "ids" {
				continue // llama.cpp's chat answers carry no ids
			}
			what := fl.name + "/" + format
			dir, results := parallelDataset(t, 12)
			db := filepath.Join(t.TempDir(), "g.db")
			args := append([]string{"--db", db, "gen", "--server", "sim", "--max-new-tokens", "400", "--include-truncated", "--export", format}, fl.args...)
			if r := gendex(t, testEnv(nil), append(args, dir)...); r.code != 0 {
				t.Fatalf("%s: %s", what, r)
			}
			calls, answered := map[string]int{}, map[string]int{}
			parallelTaken := 0
			for _, l := range readRecords(t, filepath.Join(dir, "raw_responses.jsonl")) {
				var id string
				var steps []stepSeen
				json.Unmarshal(l["id"], &id)
				json.Unmarshal(l["turns"], &steps)
				used := 0
				for i, s := range steps {
					calls[id] += len(s.ToolCalls)
					answered[id] += len(s.Results)
					if len(s.Results) == 0 {
						continue
					}
					want := make([]int, len(s.ToolCalls))
					for k := range want {
						want[k] = used + k
					}
					if !slices.Equal(s.Results, want) {
						t.Errorf("%s: %s: step %d's %d call(s) took results %v, want %v", what, id, i+1, len(s.ToolCalls), s.Results, want)
					}
					if len(s.ToolCalls) > 1 {
						parallelTaken++
					}
					used += len(s.Results)
				}
			}
			if parallelTaken == 0 {
				t.Errorf("%s: no step's parallel calls took results", what)
			}
			recs := readRecords(t, filepath.Join(dir, "tokenized.jsonl"))
			if len(recs) != len(results) {
				t.Fatalf("%s: %d records of %d prompts", what, len(recs), len(results))
			}
			parallelKept := 0
			for _, l := range recs {
				var id string
				json.Unmarshal(l["id"], &id)
				if format == "ids" {
					var ids []int
					json.Unmarshal(l["input_ids"], &ids)
					if n, tools := countIDs(ids, sim.ToolCallStartID); n != calls[id] || tools != answered[id] {
						t.Errorf("%s: %s: the ids hold %d call(s) and %d tool turn(s); the steps made %d and took %d results", what, id, n, tools, calls[id], answered[id])
					}
					// The prompt as the server rendered it: the results
					// sent back in order.
					text, at := sim.Decode(ids, false), 0
					for _, r := range results[id][:answered[id]] {
						k := strings.Index(text[at:], "<|tool|>"+r+"<|im_end|>")
						if k < 0 {
							t.Errorf("%s: %s: result %q not sent after the results before it: %q", what, id, r, text)
							break
						}
						at += k + len(r)
					}
					continue
				}
				var conv []recordTurn
				json.Unmarshal(l["conversations"], &conv)
				parallelKept += checkPairedInOrder(t, what, id, conv, results[id])
			}
			if format == "conversations" && parallelKept == 0 {
				t.Errorf("%s: no record keeps parallel calls with their results", what)
			}
		}

		// --turns last: the data's history, parallel calls and all.
		for _, format := range []string{"conversations", "ids"} {
			if fl.name == "llamacpp" && format == "ids" {
				continue
			}
			what := fl.name + "/last/" + format
			dir, results := parallelDataset(t, 3)
			db := filepath.Join(t.TempDir(), "g.db")
			args := append([]string{"--db", db, "gen", "--server", "sim", "--turns", "last", "--max-new-tokens", "400", "--include-truncated", "--export", format}, fl.args...)
			if r := gendex(t, testEnv(nil), append(args, dir)...); r.code != 0 {
				t.Fatalf("%s: %s", what, r)
			}
			for _, l := range readRecords(t, filepath.Join(dir, "tokenized.jsonl")) {
				var id string
				json.Unmarshal(l["id"], &id)
				if format == "ids" {
					var ids []int
					json.Unmarshal(l["input_ids"], &ids)
					if n, tools := countIDs(ids, sim.ToolCallStartID); n < len(results[id]) || tools != len(results[id]) {
						t.Errorf("%s: %s: the ids hold %d call(s) and %d tool turn(s); the data has %d of each", what, id, n, tools, len(results[id]))
					}
					continue
				}
				var conv []recordTurn
				json.Unmarshal(l["conversations"], &conv)
				if checkPairedInOrder(t, what, id, conv, results[id]) == 0 {
					t.Errorf("%s: %s: the data's parallel calls are not kept: %+v", what, id, conv)
				}
				if n := len(slices.DeleteFunc(slices.Clone(conv), func(m recordTurn) bool { return m.Role != "tool" })); n != len(results[id]) {
					t.Errorf("%s: %s: %d tool turns, the data has %d", what, id, n, len(results[id]))
				}
			}
		}
	}
}
