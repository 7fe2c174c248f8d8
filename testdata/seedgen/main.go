// Command seedgen writes prompt datasets in every shape the seeds' datasets
// have, for the seed-shaped end-to-end test (specforge_seed_shapes_test.go):
//
//	ROOT/sharegpt/prompts.jsonl  ShareGPT, one to three human turns, some
//	                             with a system turn, some ending at a human turn
//	ROOT/fncall/prompts.jsonl    function calling: messages + tools, the data
//	                             ending at the assistant's call (one or two)
//	ROOT/glaive/prompts.jsonl    glaive: function_call / observation turns,
//	                             tools as a JSON string of bare schemas
//	ROOT/agent/prompts.jsonl     OpenAI agent trajectories: several calls in
//	                             a row, parallel calls, a second user turn
//	ROOT/ids/prompts.jsonl       token ids (input_ids)
//	ROOT/thinking/prompts.jsonl  a reasoning model's conversations: the
//	                             data's assistant turns carry reasoning_content
//
// with messy lines: blank lines, CRLF ends, a duplicate id (the first line
// counts), unicode, a line over 64 KiB (over the simulator's context but
// for token ids), a turn of an unknown role, and a torn last line (no
// newline: not a prompt until it is completed). Every file is a pure function of
// -n and -seed. Usage:
//
//	go run ./testdata/seedgen -root DIR [-n 24] [-seed 1]
//
// It imports nothing of gendex: the shapes are the seeds', written here.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	root := flag.String("root", "", "the folder to write the datasets in (required)")
	n := flag.Int("n", 24, "prompts per dataset, before the messy lines")
	seed := flag.Int64("seed", 1, "random seed")
	flag.Parse()
	if *root == "" {
		fmt.Fprintln(os.Stderr, "seedgen: -root DIR is required")
		os.Exit(2)
	}
	for _, ds := range []struct {
		name string
		line func(r *rand.Rand, i int) any
	}{
		{"sharegpt", shareGPT}, {"fncall", fnCall}, {"glaive", glaive},
		{"agent", agent}, {"ids", tokenIDs}, {"thinking", thinking},
	} {
		r := rand.New(rand.NewSource(*seed + int64(len(ds.name))))
		if err := write(*root, ds.name, *n, r, ds.line); err != nil {
			fmt.Fprintln(os.Stderr, "seedgen:", err)
			os.Exit(1)
		}
	}
}

// write writes one dataset's prompts.jsonl: n prompts, then the messy
// lines, each prompt's line ending in \n or (every fifth) \r\n, a blank
// line now and then.
func write(root, name string, n int, r *rand.Rand, line func(*rand.Rand, int) any) error {
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var b bytes.Buffer
	put := func(v any, i int) {
		b.Write(marshal(v))
		if i%5 == 3 {
			b.WriteString("\r\n")
		} else {
			b.WriteString("\n")
		}
		if i%7 == 6 {
			b.WriteString("\n") // a blank line
		}
	}
	for i := 1; i <= n; i++ {
		put(line(r, i), i)
	}
	// The messy lines: a duplicate of prompt 2's id with another prompt
	// (the first counts), a prompt in other scripts, one over 64 KiB, a
	// blank line with spaces and CR, and a torn last line.
	dup := line(r, n+1).(map[string]any)
	dup["id"] = fmt.Sprintf("%s-%04d", name, 2)
	put(dup, n+1)
	uni := line(r, n+2).(map[string]any)
	uni["id"] = fmt.Sprintf("%s-ünï-%04d", name, n+2)
	setText(uni, "Résumé of 東京 weather 🌧️ — مرحبا, Привет: answer briefly.")
	put(uni, n+2)
	long, text := line(r, n+3), longText(r)
	if name == "ids" { // as ids (4 bytes each) the line is over 64 KiB, within the context
		text = text[:17000]
	}
	setText(long.(map[string]any), text)
	put(long, n+3)
	if bad := line(r, n+4).(map[string]any); unknownRole(bad) {
		put(bad, n+4)
	}
	b.WriteString("  \r\n")
	torn := marshal(line(r, n+5))
	b.Write(torn[:len(torn)/2])
	return os.WriteFile(filepath.Join(dir, "prompts.jsonl"), b.Bytes(), 0o644)
}

// marshal is v's JSON as the seeds' files have it: <, > and & as written.
func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// unknownRole puts a turn of a role no chat template knows in front of a
// chat prompt's turns (ShareGPT "narrator", OpenAI "critic"): a prompt
// that cannot be sent. False for a prompt of token ids.
func unknownRole(m map[string]any) bool {
	if turns, ok := m["conversations"].([]map[string]any); ok {
		m["conversations"] = append([]map[string]any{{"from": "narrator", "value": "The scene opens."}}, turns...)
		return true
	}
	if turns, ok := m["messages"].([]map[string]any); ok {
		m["messages"] = append([]map[string]any{{"role": "critic", "content": "Be harsh."}}, turns...)
		return true
	}
	return false
}

// longText is a user turn over 64 KiB of words: 70,000 bytes, enough for
// a line reader with a 64 KiB buffer to fail on, and more tokens than the
// simulator's 32,768-token context (one token a byte).
func longText(r *rand.Rand) string {
	var s strings.Builder
	for s.Len() < 70000 {
		s.WriteString(words[r.Intn(len(words))])
		s.WriteByte(' ')
	}
	return s.String()
}

// setText replaces the first user turn's text of a prompt line, whatever
// its shape (token ids: the ids of the text).
func setText(m map[string]any, text string) {
	if _, ok := m["input_ids"]; ok {
		m["input_ids"] = encode(text)
		return
	}
	for _, key := range []string{"conversations", "messages"} {
		turns, _ := m[key].([]map[string]any)
		for _, t := range turns {
			if t["from"] == "human" {
				t["value"] = text
				return
			}
			if t["role"] == "user" {
				t["content"] = text
				return
			}
		}
	}
}

var words = strings.Fields(`weather paris tokyo stock price search the web explain why
	how does a cache work summarize this article in three lines translate into french
	what is the capital compute the area of a circle list prime numbers write a haiku
	about rain debug this python function sort an array compare two approaches`)

// question is a short user turn; a few are long enough (about 5,000 bytes)
// that a conversation holding one passes 4,096 tokens.
func question(r *rand.Rand) string {
	k := 4 + r.Intn(9)
	if r.Intn(12) == 0 {
		k = 900
	}
	q := make([]string, k)
	for i := range q {
		q[i] = words[r.Intn(len(words))]
	}
	return strings.ToUpper(q[0][:1]) + q[0][1:] + " " + strings.Join(q[1:], " ") + "?"
}

func shareGPT(r *rand.Rand, i int) any {
	var turns []map[string]any
	if i%3 == 0 {
		turns = append(turns, map[string]any{"from": "system", "value": "You are a careful assistant. Answer in plain words."})
	}
	humans := 1 + r.Intn(3)
	for h := 0; h < humans; h++ {
		turns = append(turns, map[string]any{"from": "human", "value": question(r)})
		if h < humans-1 || i%4 != 1 { // some end at the human turn
			turns = append(turns, map[string]any{"from": "gpt", "value": "The data's answer " + fmt.Sprint(h+1) + "."})
		}
	}
	return map[string]any{"id": fmt.Sprintf("sharegpt-%04d", i), "conversations": turns}
}

// The tools the function-calling shapes define (OpenAI's wrapped schema).
var toolDefs = []map[string]any{
	fn("get_weather", "Current weather in a city", "city", "string"),
	fn("get_stock_price", "Latest price of a stock", "symbol", "string"),
	fn("search_web", "Search the web", "query", "string"),
	fn("calculate", "Evaluate an arithmetic expression", "expression", "string"),
}

func fn(name, desc, arg, typ string) map[string]any {
	return map[string]any{"type": "function", "function": map[string]any{
		"name": name, "description": desc,
		"parameters": map[string]any{"type": "object", "required": []string{arg},
			"properties": map[string]any{arg: map[string]any{"type": typ, "description": "the " + arg}}}}}
}

func toolName(t map[string]any) string { return t["function"].(map[string]any)["name"].(string) }

// call is an assistant's tool call with its id.
func call(id string, t map[string]any, args string) map[string]any {
	return map[string]any{"id": id, "type": "function",
		"function": map[string]any{"name": toolName(t), "arguments": args}}
}

func pickTools(r *rand.Rand) []map[string]any {
	k := 2 + r.Intn(3)
	p := r.Perm(len(toolDefs))[:k]
	out := make([]map[string]any, k)
	for i, j := range p {
		out[i] = toolDefs[j]
	}
	return out
}

// fnCall is a function-calling example whose data ends at the assistant's
// call: a query, the tools, the call (every fourth: two parallel calls).
func fnCall(r *rand.Rand, i int) any {
	tools := pickTools(r)
	var msgs []map[string]any
	if i%2 == 0 {
		msgs = append(msgs, map[string]any{"role": "system", "content": "You can call functions."})
	}
	msgs = append(msgs, map[string]any{"role": "user", "content": question(r)})
	calls := []map[string]any{call(fmt.Sprintf("call_%d_0", i), tools[0], `{"city": "Paris"}`)}
	if i%4 == 0 {
		calls = append(calls, call(fmt.Sprintf("call_%d_1", i), tools[1], `{"symbol": "ACME"}`))
	}
	msgs = append(msgs, map[string]any{"role": "assistant", "content": nil, "tool_calls": calls})
	return map[string]any{"id": fmt.Sprintf("fncall-%04d", i), "tools": tools, "messages": msgs}
}

// glaive is a glaive-function-calling-v2 line: the tools as a JSON string
// of bare schemas, the system turn naming them, a function_call and its
// observation (some lines: no call at all; some: Hermes' <tool_call> in
// the gpt turn and its <tool_response>, as hermes-function-calling has).
func glaive(r *rand.Rand, i int) any {
	tools := pickTools(r)
	bare := make([]any, len(tools))
	for k, t := range tools {
		bare[k] = t["function"]
	}
	js, _ := json.Marshal(bare)
	turns := []map[string]any{
		{"from": "system", "value": "SYSTEM: You are a helpful assistant with access to the following functions. Use them if required -"},
		{"from": "human", "value": question(r)},
	}
	args, _ := json.Marshal(map[string]any{"name": toolName(tools[0]), "arguments": map[string]any{"city": "Lyon"}})
	switch {
	case i%5 == 0: // no call
	case i%3 == 0: // Hermes markup in the gpt turn, the result wrapped
		turns = append(turns,
			map[string]any{"from": "gpt", "value": "Let me look.\n<tool_call>\n" + string(args) + "\n</tool_call>"},
			map[string]any{"from": "tool", "value": `<tool_response>{"name": "` + toolName(tools[0]) + `", "content": "12C"}</tool_response>`})
	default:
		turns = append(turns,
			map[string]any{"from": "function_call", "value": string(args)},
			map[string]any{"from": "observation", "value": `{"result": "12C, cloudy"}`})
	}
	turns = append(turns, map[string]any{"from": "gpt", "value": "Here is what I found."})
	return map[string]any{"id": fmt.Sprintf("glaive-%04d", i), "tools": string(js), "conversations": turns}
}

// agent is an OpenAI agent trajectory: parallel calls and their results,
// then another call, a text answer; every third has a second user turn
// with a call of its own.
func agent(r *rand.Rand, i int) any {
	tools := pickTools(r)
	res := func(id string, t map[string]any, v string) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": id, "name": toolName(t), "content": v}
	}
	a, b, c := fmt.Sprintf("call_%da", i), fmt.Sprintf("call_%db", i), fmt.Sprintf("call_%dc", i)
	msgs := []map[string]any{
		{"role": "system", "content": "You are an agent. Use the tools."},
		{"role": "user", "content": question(r)},
		{"role": "assistant", "content": "", "tool_calls": []map[string]any{
			call(a, tools[0], `{"city": "Oslo"}`), call(b, tools[1], `{"symbol": "XYZ"}`)}},
		res(a, tools[0], "3C"), res(b, tools[1], `{"price": 12.5}`),
		{"role": "assistant", "content": "One more look.", "tool_calls": []map[string]any{
			call(c, tools[0], `{"city": "Bergen"}`)}},
		res(c, tools[0], "5C"),
		{"role": "assistant", "content": "Done: cold in both."},
	}
	if i%3 == 0 {
		d := fmt.Sprintf("call_%dd", i)
		msgs = append(msgs,
			map[string]any{"role": "user", "content": question(r)},
			map[string]any{"role": "assistant", "content": nil, "tool_calls": []map[string]any{
				call(d, tools[1], `{"symbol": "ACME"}`)}},
			res(d, tools[1], `{"price": 99}`),
			map[string]any{"role": "assistant", "content": "ACME is at 99."})
	}
	return map[string]any{"id": fmt.Sprintf("agent-%04d", i), "tools": tools, "messages": msgs}
}

// encode is a chat prompt's token ids in a byte-level vocabulary (byte b
// is 256+b) between template tokens: <bos> <im_start> <user> text
// <im_end> <im_start> <assistant>.
func encode(text string) []int {
	ids := []int{1, 3, 6}
	for i := 0; i < len(text); i++ {
		ids = append(ids, 256+int(text[i]))
	}
	return append(ids, 4, 3, 7)
}

func tokenIDs(r *rand.Rand, i int) any {
	return map[string]any{"id": fmt.Sprintf("ids-%04d", i), "input_ids": encode(question(r))}
}

// thinking is a reasoning model's conversation: two user turns, the data's
// assistant turns with reasoning_content and <think> in their content.
func thinking(r *rand.Rand, i int) any {
	msgs := []map[string]any{{"role": "user", "content": question(r)}}
	for k := 0; k < 1+i%2; k++ {
		msgs = append(msgs, map[string]any{"role": "assistant", "reasoning_content": "Let me think about it.",
			"content": "<think>\nLet me think about it.\n</think>\n\nThe data's answer."},
			map[string]any{"role": "user", "content": question(r)})
	}
	return map[string]any{"id": fmt.Sprintf("thinking-%04d", i), "messages": msgs}
}
