package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// simToolDataset writes n prompts of each shape: OpenAI messages with two
// tools and two user turns (each answered by a call and its result), and
// glaive-style ShareGPT (function_call / observation, tools a JSON string
// of bare schemas).
func simToolDataset(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agentic")
	os.MkdirAll(dir, 0o755)
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"id":"m%d","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},{"type":"function","function":{"name":"search","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}}}],`+
			`"messages":[{"role":"system","content":"You help."},{"role":"user","content":"Weather in city %d?"},`+
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"C%d\"}"}}]},`+
			`{"role":"tool","tool_call_id":"c1","content":"%dC"},{"role":"assistant","content":"It is %dC."},`+
			`{"role":"user","content":"Search news %d"},`+
			`{"role":"assistant","content":"","tool_calls":[{"id":"c2","type":"function","function":{"name":"search","arguments":"{\"q\": \"news %d\"}"}}]},`+
			`{"role":"tool","tool_call_id":"c2","name":"search","content":"nothing new"},{"role":"assistant","content":"Nothing new."}]}`+"\n", i, i, i, i, i, i, i)
		fmt.Fprintf(&b, `{"id":"g%d","tools":"[{\"name\": \"calculate_area\", \"description\": \"area\", \"parameters\": {\"type\": \"object\", \"properties\": {\"w\": {\"type\": \"integer\"}, \"h\": {\"type\": \"integer\"}}, \"required\": [\"w\", \"h\"]}}]",`+
			`"conversations":[{"from":"human","value":"Area of %d by 3?"},{"from":"function_call","value":"{\"name\": \"calculate_area\", \"arguments\": {\"w\": %d, \"h\": 3}}"},`+
			`{"from":"observation","value":"{\"area\": %d}"},{"from":"gpt","value":"%d square units."}]}`+"\n", i, i, i, 3*i, 3*i)
	}
	writePrompts(t, dir, b.String())
	return dir
}

// TestGenToolsAgainstSim: both dataset shapes regenerated against the
// simulator's tool-calling model, as SGLang (/generate, its parser read
// from /server_info), as vLLM (chat with auto tool choice) and as
// llama.cpp (chat, Jinja), under
// --export conversations and ids: every answer has exactly one record or
// exclusion; every tool turn of every record answers a call of the
// assistant turn before it with that call's id and tool; records carry
// the tools; regenerated turns call tools; the raw lines' stops match the
// summary's count by reason.
func TestGenToolsAgainstSim(t *testing.T) {
	t.Parallel()
	const n = 12
	for _, flavor := range [][]string{
		{"--sim-tool-calls", "--sim-tool-call-parser", "qwen25"},
		{"--sim-tool-calls", "--sim-flavor", "vllm", "--sim-tool-call-parser", "hermes", "--sim-enable-auto-tool-choice"},
		{"--sim-tool-calls", "--sim-flavor", "llamacpp"},
	} {
		for _, format := range []string{"conversations", "ids"} {
			if flavor[len(flavor)-1] == "llamacpp" && format == "ids" {
				continue // llama.cpp's chat answers carry no ids
			}
			name := flavor[len(flavor)-1] + "/" + format
			dir := simToolDataset(t, n)
			db := filepath.Join(t.TempDir(), "g.db")
			args := append([]string{"--db", db, "gen", "--server", "sim", "--max-new-tokens", "400", "--include-truncated", "--export", format}, flavor...)
			r := gendex(t, testEnv(nil), append(args, dir)...)
			if r.code != 0 {
				t.Fatalf("%s: %s", name, r)
			}
			raws := readRecords(t, filepath.Join(dir, "raw_responses.jsonl"))
			if len(raws) != 2*n {
				t.Fatalf("%s: %d answers; want %d", name, len(raws), 2*n)
			}
			stops, calls := map[string]int{}, 0
			for _, l := range raws {
				var st struct{ Reason string }
				if json.Unmarshal(l["tool_stop"], &st) == nil && st.Reason != "" {
					stops[st.Reason]++
				}
				calls += strings.Count(string(l["turns"]), `"tool_calls":[{`)
			}
			if calls == 0 {
				t.Errorf("%s: no regenerated turn called a tool", name)
			}
			total := 0
			var parts []string
			for _, reason := range []string{"other_tool", "more_calls", "no_call", "bad_arguments"} {
				if c := stops[reason]; c > 0 {
					total += c
					parts = append(parts, fmt.Sprintf("%s %d", reason, c))
				}
			}
			if total > 0 && !strings.Contains(r.stderr, fmt.Sprintf("%d stopped where the model departed from the data (%s)", total, strings.Join(parts, ", "))) {
				t.Errorf("%s: stops %v not in the summary:\n%s", name, stops, r.stderr)
			}
			recs := readRecords(t, filepath.Join(dir, "tokenized.jsonl"))
			var excl []map[string]json.RawMessage
			if b, _ := os.ReadFile(filepath.Join(dir, "excluded.jsonl")); len(b) > 0 {
				excl = readRecords(t, filepath.Join(dir, "excluded.jsonl"))
			}
			seen := map[string]int{}
			for _, l := range append(recs, excl...) {
				var id string
				json.Unmarshal(l["id"], &id)
				seen[id]++
			}
			for _, l := range raws {
				var id string
				json.Unmarshal(l["id"], &id)
				if seen[id] != 1 {
					t.Errorf("%s: answer %s has %d records or exclusions", name, id, seen[id])
				}
			}
			if format == "ids" {
				for _, l := range recs {
					var ids, mask []int
					json.Unmarshal(l["input_ids"], &ids)
					json.Unmarshal(l["loss_mask"], &mask)
					if len(ids) == 0 || len(ids) != len(mask) {
						t.Errorf("%s: ids record %s", name, l["id"])
					}
				}
				continue
			}
			for _, l := range recs {
				if len(l["tools"]) == 0 {
					t.Errorf("%s: record %s has no tools", name, l["id"])
				}
				var conv []map[string]any
				json.Unmarshal(l["conversations"], &conv)
				for i, m := range conv {
					if m["role"] != "tool" {
						continue
					}
					j := i - 1
					for j > 0 && conv[j]["role"] == "tool" {
						j--
					}
					ok := false
					cs, _ := conv[j]["tool_calls"].([]any)
					for _, c := range cs {
						c := c.(map[string]any)
						fn := c["function"].(map[string]any)
						_, isString := fn["arguments"].(string)
						ok = ok || c["id"] == m["tool_call_id"] && fn["name"] == m["name"] && isString
					}
					if !ok {
						t.Errorf("%s: record %s: turn %d answers no call of turn %d: %v", name, l["id"], i+1, j+1, conv)
					}
				}
				if last := conv[len(conv)-1]; last["role"] != "assistant" {
					t.Errorf("%s: record %s does not end with the model's turn", name, l["id"])
				}
			}
		}
	}
}

// TestExportToolConversations: gendex export makes the same records of
// gen's tool conversations as gen --export does, and excludes the stopped
// ones as tool_stop with --exclude-tool-stops.
func TestExportToolConversations(t *testing.T) {
	t.Parallel()
	dir := simToolDataset(t, 8)
	db := filepath.Join(t.TempDir(), "g.db")
	sim := []string{"--server", "sim", "--sim-tool-calls", "--sim-tool-call-parser", "qwen25", "--max-new-tokens", "400", "--include-truncated"}
	if r := gendex(t, testEnv(nil), append(append([]string{"--db", db, "gen"}, sim...), "--export", "conversations", dir)...); r.code != 0 {
		t.Fatal(r)
	}
	want, _ := os.ReadFile(filepath.Join(dir, "tokenized.jsonl"))
	out := t.TempDir()
	if r := gendex(t, testEnv(nil), "--db", filepath.Join(out, "e.db"), "export", "--include-truncated", "--out", out, dir); r.code != 0 {
		t.Fatal(r)
	}
	got, _ := os.ReadFile(filepath.Join(out, "agentic", "tokenized.jsonl"))
	if len(want) == 0 || string(got) != string(want) {
		t.Errorf("export's records differ from gen's:\n%s\nwant\n%s", got, want)
	}
	stopped := 0
	for _, l := range readRecords(t, filepath.Join(dir, "raw_responses.jsonl")) {
		if l["tool_stop"] != nil {
			stopped++
		}
	}
	out2 := t.TempDir()
	if r := gendex(t, testEnv(nil), "--db", filepath.Join(out2, "e.db"), "export", "--include-truncated", "--exclude-tool-stops", "--out", out2, dir); r.code != 0 {
		t.Fatal(r)
	}
	exc, _ := os.ReadFile(filepath.Join(out2, "agentic", "excluded.jsonl"))
	if strings.Count(string(exc), `"reason":"tool_stop"`) != stopped || stopped == 0 {
		t.Errorf("%d stopped; excluded:\n%s", stopped, exc)
	}
}

// TestGenToolConversationsSurviveSIGKILL kills a running gen --export
// conversations of tool conversations (against a separate `gendex sim
// --tool-calls` slow enough that kills land mid-conversation) at random
// moments, resuming each time, then lets it finish: every prompt has
// exactly one answer line and exactly one record or exclusion, and the
// records are those gendex export makes from the same answers.
func TestGenToolConversationsSurviveSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	bin := gendexBinary(t)
	t.Parallel()
	url := startSimProcess(t, bin, "--tool-calls", "--tool-call-parser", "qwen25", "--slots", "32", "--decode-tps", "400")
	dir := simToolDataset(t, 40)
	db := filepath.Join(t.TempDir(), "g.db")
	args := []string{"--db", db, "gen", "--server", url, "--concurrency", "16", "--max-new-tokens", "120", "--include-truncated", "--export", "conversations", dir}
	size := func() int64 {
		fi, err := os.Stat(filepath.Join(dir, "raw_responses.jsonl"))
		if err != nil {
			return 0
		}
		return fi.Size()
	}
	kills := 0
	for i := 0; i < 12 && kills < 5; i++ {
		before := size()
		killed, _ := killWhileWriting(t, bin, args, func() bool { return size() != before }, time.Duration(20+37*i%150)*time.Millisecond)
		if killed {
			kills++
		} else {
			break
		}
	}
	mustRunGendex(t, bin, args...)
	if kills == 0 {
		t.Fatal("no run was killed mid-way")
	}
	t.Logf("%d kills", kills)
	count := func(path string) map[string]int {
		n := map[string]int{}
		if b, _ := os.ReadFile(path); len(b) == 0 {
			return n
		}
		for _, l := range readRecords(t, path) {
			var id string
			json.Unmarshal(l["id"], &id)
			n[id]++
		}
		return n
	}
	raw := count(filepath.Join(dir, "raw_responses.jsonl"))
	recs, excl := count(filepath.Join(dir, "tokenized.jsonl")), count(filepath.Join(dir, "excluded.jsonl"))
	if len(raw) != 80 {
		t.Errorf("%d prompts answered; want 80", len(raw))
	}
	for id, n := range raw {
		if n != 1 || recs[id]+excl[id] != 1 {
			t.Errorf("%s: %d answer lines, %d records, %d exclusions (after %d kills)", id, n, recs[id], excl[id], kills)
		}
	}
	out := t.TempDir()
	if r := gendex(t, testEnv(nil), "--db", filepath.Join(out, "e.db"), "export", "--include-truncated", "--out", out, dir); r.code != 0 {
		t.Fatal(r)
	}
	sorted := func(path string) string {
		b, _ := os.ReadFile(path)
		ls := strings.Split(strings.TrimSpace(string(b)), "\n")
		slices.Sort(ls)
		return strings.Join(ls, "\n")
	}
	if got, want := sorted(filepath.Join(dir, "tokenized.jsonl")), sorted(filepath.Join(out, "agentic", "tokenized.jsonl")); got != want {
		t.Errorf("gen's records differ from export's")
	}
}
