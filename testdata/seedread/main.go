// Command seedread reads a root of dataset folders as a person with jq
// would, without gendex's code, and prints what the files say as JSON: the
// independent reading the seed-shaped end-to-end test (specforge_seed_shapes_test.go)
// compares every count and verdict of gendex with.
//
//	go run ./testdata/seedread -root DIR [-ids DIR] [-max-length N]
//
// For each ROOT/<dataset>/ it reads prompts.jsonl, raw_responses.jsonl,
// turns.jsonl, errors.jsonl, tokenized.jsonl and excluded.jsonl; with -ids,
// the ids records (input_ids, loss_mask) of the same answers exported to
// DIR/<dataset>/tokenized.jsonl. The rules it reads by are the files' own
// (README's formats), stated here once:
//
//   - a line is a record when it ends in a newline (a torn last line is
//     not one yet); CR and blank lines are nothing; the first line of an
//     id counts, except for answers, where the newest does (a redo);
//   - an answer is a whole conversation: its "turns" (or itself), a turn
//     with "asked": false never asked; a turn is empty when it has neither
//     text nor a tool call;
//   - a record is as long as the ids record export makes of it: the last
//     turn's prompt ids and output ids (else its prompt and completion
//     token counts);
//   - a regenerated turn carries its loss when its own tokens are marked 1
//     where they stand in input_ids: the last turn's output ids at the end,
//     an earlier turn's last 8 tokens before its stop token inside;
//   - a function-calling prompt whose data ends at the assistant's calls,
//     with no result recorded, expects of the model's answer: its calls
//     (the same tools, no more) no stop, another tool other_tool, more
//     calls more_calls, text no_call.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Counts is what the files say of one dataset.
type Counts struct {
	Prompts    int `json:"prompts"`     // distinct ids of complete prompt lines
	Duplicates int `json:"duplicates"`  // prompt lines repeating an id
	TornPrompt int `json:"torn_prompt"` // a last line without its newline
	Answers    int `json:"answers"`     // distinct ids in raw_responses
	Failed     int `json:"failed"`      // ids in errors.jsonl without an answer
	Unanswered int `json:"unanswered"`  // prompts neither answered nor failed
	TurnLines  int `json:"turn_lines"`  // lines of turns.jsonl

	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	UnknownTokens    int   `json:"unknown_tokens"` // answers without both counts

	Records  int            `json:"records"`  // conversations records
	Excluded map[string]int `json:"excluded"` // exclusions by reason
	NoRecord int            `json:"no_record"`
	Stale    int            `json:"stale"` // records whose answer_sum is not their answer's

	// The content of the answers that have a record.
	Truncated int      `json:"truncated"` // a turn cut at the token limit
	Empty     int      `json:"empty"`     // answers with a turn of no text and no call
	EmptyIDs  []string `json:"empty_ids,omitempty"`
	Think     int      `json:"think"`    // <think> in text while reasoning is apart
	Repeated  int      `json:"repeated"` // answers sharing one text with many

	// With -max-length.
	OverMax       int   `json:"over_max"`
	OverMaxTokens int64 `json:"over_max_tokens"`
	Longest       int64 `json:"longest"`
	LenUnknown    int   `json:"length_unknown"`

	ToolStops     map[string]int    `json:"tool_stops"`     // the raw lines' tool_stop reasons
	ExpectedStops map[string]int    `json:"expected_stops"` // where the data ends at its calls
	StopMismatch  map[string]string `json:"stop_mismatch,omitempty"`
	AnswerCalls   int               `json:"answer_calls"` // the model's calls in the answers with a record
	RecordCalls   int               `json:"record_calls"` // the assistant calls in those records
	AnswerResults int               `json:"answer_results"`
	RecordResults int               `json:"record_results"` // tool turns in those records

	// Prompts that cannot be sent (a turn of an unknown role; with
	// -context, more tokens than the server's context), id -> why; and
	// those of them not refused with their file:line in errors.jsonl.
	Unsendable map[string]string `json:"unsendable,omitempty"`
	NotRefused map[string]string `json:"unsendable_not_refused,omitempty"`

	// With -ids.
	IDsRecords       int               `json:"ids_records"`
	IDsOverMax       int               `json:"ids_over_max"` // with -max-length: len(input_ids) over it
	IDsOverMaxTokens int64             `json:"ids_over_max_tokens"`
	IDsLongest       int64             `json:"ids_longest"`
	IDsExcluded      map[string]int    `json:"ids_excluded"`                 // the ids export's exclusions by reason
	NoLoss           map[string]string `json:"turns_without_loss,omitempty"` // id -> which turns
}

func main() {
	root := flag.String("root", "", "the root of dataset folders (required)")
	ids := flag.String("ids", "", "the root the same answers' ids records were exported to")
	maxLength := flag.Int64("max-length", 0, "the drafter's length: records longer are counted")
	flag.IntVar(&context, "context", 0, "the server's context in tokens, one token a byte (the simulator's tokenizer): longer prompts cannot be sent")
	flag.Parse()
	if *root == "" {
		fmt.Fprintln(os.Stderr, "seedread: -root DIR is required")
		os.Exit(2)
	}
	dirs, err := os.ReadDir(*root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "seedread:", err)
		os.Exit(1)
	}
	out := map[string]*Counts{}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		c, err := readDataset(filepath.Join(*root, d.Name()), *ids, d.Name(), *maxLength)
		if err != nil {
			fmt.Fprintf(os.Stderr, "seedread: %s: %v\n", d.Name(), err)
			os.Exit(1)
		}
		out[d.Name()] = c
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	if err := enc.Encode(out); err != nil {
		os.Exit(1)
	}
}

// context is -context: 0, prompts' length is not judged.
var context int

// line is one record line of a file: its bytes (without the newline and a
// CR) and its object.
type line struct {
	n   int // its line number in the file
	raw []byte
	obj map[string]any
}

// readLines reads the complete, non-blank lines of path (none if it does
// not exist); torn is true when the file ends in a line without newline.
func readLines(path string) (ls []line, torn bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		b, err := r.ReadBytes('\n')
		if err == io.EOF {
			return ls, len(bytes.TrimSpace(b)) > 0, nil
		}
		if err != nil {
			return nil, false, err
		}
		b = bytes.TrimRight(b[:len(b)-1], "\r")
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			return nil, false, fmt.Errorf("%s:%d: %v", path, n, err)
		}
		ls = append(ls, line{n: n, raw: b, obj: m})
	}
}

// idOf is a line's id as written: a string, or a number's digits.
func idOf(m map[string]any) string {
	switch v := m["id"].(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	}
	return ""
}

func num(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

func list(v any) []any { l, _ := v.([]any); return l }

func str(v any) string { s, _ := v.(string); return s }

// firstByID keeps the first line of each id; dups counts the others.
func firstByID(ls []line) (by map[string]line, dups int) {
	by = map[string]line{}
	for _, l := range ls {
		id := idOf(l.obj)
		if _, ok := by[id]; ok {
			dups++
			continue
		}
		by[id] = l
	}
	return by, dups
}

func readDataset(dir, idsRoot, name string, maxLength int64) (*Counts, error) {
	c := &Counts{Excluded: map[string]int{}, ToolStops: map[string]int{}, ExpectedStops: map[string]int{}}
	var err error
	read := func(f string) []line {
		ls, torn, e := readLines(filepath.Join(dir, f))
		if e != nil && err == nil {
			err = e
		}
		if f == "prompts.jsonl" && torn {
			c.TornPrompt = 1
		}
		return ls
	}
	promptLines, rawLines, turnLines := read("prompts.jsonl"), read("raw_responses.jsonl"), read("turns.jsonl")
	errLines, recLines, exLines := read("errors.jsonl"), read("tokenized.jsonl"), read("excluded.jsonl")
	if err != nil {
		return nil, err
	}
	prompts, dups := firstByID(promptLines)
	c.Prompts, c.Duplicates, c.TurnLines = len(prompts), dups, len(turnLines)
	answers := map[string]line{} // the newest line of each id
	for _, l := range rawLines {
		answers[idOf(l.obj)] = l
	}
	c.Answers = len(answers)
	failed := map[string]bool{}
	for _, l := range errLines {
		if _, ok := answers[idOf(l.obj)]; !ok {
			failed[idOf(l.obj)] = true
		}
	}
	c.Failed = len(failed)
	c.unsendable(prompts, errLines, answers)
	for id := range prompts {
		if _, ok := answers[id]; !ok && !failed[id] {
			c.Unanswered++
		}
	}
	records, _ := firstByID(recLines)
	c.Records = len(records)
	excluded, _ := firstByID(exLines)
	for _, l := range excluded {
		c.Excluded[str(l.obj["reason"])]++
	}
	castagnoli := crc32.MakeTable(crc32.Castagnoli)
	texts := map[string][]string{} // an answer's texts -> its ids
	for id, a := range answers {
		p, ok1 := num(a.obj["prompt_tokens"])
		k, ok2 := num(a.obj["completion_tokens"])
		if ok1 && ok2 {
			c.PromptTokens += p
			c.CompletionTokens += k
		} else {
			c.UnknownTokens++
		}
		if ts, ok := a.obj["tool_stop"].(map[string]any); ok {
			c.ToolStops[str(ts["reason"])]++
		}
		rec, hasRec := records[id]
		_, hasEx := excluded[id]
		if !hasRec && !hasEx {
			c.NoRecord++
		}
		if !hasRec {
			continue
		}
		if sum := fmt.Sprintf("%08x", crc32.Checksum(a.raw, castagnoli)); str(rec.obj["answer_sum"]) != sum {
			c.Stale++
		}
		turns := asked(a.obj)
		for _, t := range turns {
			if str(t["finish_reason"]) == "length" {
				c.Truncated++
				break
			}
		}
		c.content(id, turns, texts)
		c.length(turns, maxLength)
		c.calls(turns, rec.obj)
		if p, ok := prompts[id]; ok {
			c.expectStop(id, p.obj, a.obj, turns)
		}
	}
	at := max(3, c.Records/100+1)
	for _, ids := range texts {
		if len(ids) >= at {
			c.Repeated += len(ids)
		}
	}
	sort.Strings(c.EmptyIDs)
	if idsRoot != "" {
		if err := c.idsRecords(filepath.Join(idsRoot, name, "tokenized.jsonl"), answers, maxLength); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// knownRoles are the roles and ShareGPT speakers a chat prompt may have.
var knownRoles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true, "function": true,
	"developer": true, "human": true, "gpt": true, "function_call": true, "observation": true, "function_response": true}

// unsendable finds the prompts that cannot be sent and checks each was
// refused naming prompts.jsonl and its line.
func (c *Counts) unsendable(prompts map[string]line, errs []line, answers map[string]line) {
	refusal := map[string]string{}
	for _, l := range errs {
		refusal[idOf(l.obj)] += str(l.obj["error"]) + " "
	}
	for id, p := range prompts {
		why, size := "", len(list(p.obj["input_ids"]))
		for _, key := range []string{"messages", "conversations"} {
			for _, t := range list(p.obj[key]) {
				m, _ := t.(map[string]any)
				role := str(m["role"]) + str(m["from"])
				if !knownRoles[role] && why == "" {
					why = "a turn of role " + strconv.Quote(role)
				}
				size += len(str(m["content"])) + len(str(m["value"]))
			}
		}
		if why == "" && context > 0 && size > context {
			why = fmt.Sprintf("%d tokens or more, the context is %d", size, context)
		}
		if why == "" {
			continue
		}
		where := fmt.Sprintf("prompts.jsonl:%d", p.n)
		if c.Unsendable == nil {
			c.Unsendable, c.NotRefused = map[string]string{}, map[string]string{}
		}
		c.Unsendable[id] = where + ": " + why
		_, answered := answers[id]
		if got := refusal[id]; answered || !strings.Contains(got, where) {
			c.NotRefused[id] = fmt.Sprintf("%s: %s; answered %v, errors.jsonl says %q", where, why, answered, strings.TrimSpace(got))
		}
	}
}

// asked is an answer's turns that were asked: its "turns" (a conversation,
// a tool conversation's steps) or the line itself.
func asked(a map[string]any) []map[string]any {
	ts := list(a["turns"])
	if ts == nil {
		return []map[string]any{a}
	}
	var out []map[string]any
	for _, t := range ts {
		m, _ := t.(map[string]any)
		if m != nil && m["asked"] != false {
			out = append(out, m)
		}
	}
	return out
}

// content counts an answer's empty turns, thinking left in its text, and
// keeps its texts for the repeats.
func (c *Counts) content(id string, turns []map[string]any, texts map[string][]string) {
	empty, think := false, false
	var all []string
	for _, t := range turns {
		text := str(t["text"])
		if strings.TrimSpace(text) == "" && len(list(t["tool_calls"])) == 0 {
			empty = true
		}
		if str(t["reasoning_content"]) != "" && (strings.Contains(text, "<think>") || strings.Contains(text, "</think>")) {
			think = true
		}
		all = append(all, text)
	}
	if empty {
		c.Empty++
		c.EmptyIDs = append(c.EmptyIDs, id)
	}
	if think {
		c.Think++
	}
	key := strings.Join(all, "\x00")
	if strings.TrimSpace(strings.ReplaceAll(key, "\x00", "")) != "" {
		texts[key] = append(texts[key], id)
	}
}

// recordLength is a record's tokens as its ids record holds them: the
// last turn's prompt and output ids, else its token counts; ok is false
// when neither is there.
func recordLength(turns []map[string]any) (n int64, ok bool) {
	if len(turns) == 0 {
		return 0, false
	}
	last := turns[len(turns)-1]
	pi, oi := list(last["prompt_ids"]), list(last["output_ids"])
	if pi != nil && oi != nil {
		return int64(len(pi) + len(oi)), true
	}
	p, ok1 := num(last["prompt_tokens"])
	k, ok2 := num(last["completion_tokens"])
	return p + k, ok1 && ok2
}

func (c *Counts) length(turns []map[string]any, maxLength int64) {
	if maxLength <= 0 {
		return
	}
	n, ok := recordLength(turns)
	switch {
	case !ok:
		c.LenUnknown++
	case n > maxLength:
		c.OverMax++
		c.OverMaxTokens += n
		c.Longest = max(c.Longest, n)
	}
}

// calls counts the model's calls and the results paired to them in the
// answer, and the assistant calls and tool turns in its record.
func (c *Counts) calls(turns []map[string]any, rec map[string]any) {
	for _, t := range turns {
		c.AnswerCalls += len(list(t["tool_calls"]))
		c.AnswerResults += len(list(t["results"]))
	}
	for _, t := range list(rec["conversations"]) {
		m, _ := t.(map[string]any)
		switch str(m["role"]) {
		case "assistant":
			c.RecordCalls += len(list(m["tool_calls"]))
		case "tool":
			c.RecordResults++
		}
	}
}

// expectStop: where a prompt's data ends at the assistant's calls with no
// result recorded (one user turn, no tool turn), the model's first step
// decides the stop; it is compared with the answer's tool_stop.
func (c *Counts) expectStop(id string, prompt, answer map[string]any, turns []map[string]any) {
	msgs := list(prompt["messages"])
	if prompt["tools"] == nil || len(msgs) == 0 || len(turns) == 0 {
		return
	}
	users, results := 0, 0
	for _, m := range msgs {
		switch str(m.(map[string]any)["role"]) {
		case "user":
			users++
		case "tool", "function":
			results++
		}
	}
	last, _ := msgs[len(msgs)-1].(map[string]any)
	dataCalls := list(last["tool_calls"])
	if users != 1 || results != 0 || str(last["role"]) != "assistant" || len(dataCalls) == 0 {
		return
	}
	step := turns[0]
	if str(step["finish_reason"]) == "length" {
		return // cut: a length exclusion, not a stop
	}
	model := list(step["tool_calls"])
	want := ""
	switch {
	case len(model) == 0:
		want = "no_call"
	case len(model) > len(dataCalls):
		want = "more_calls"
	default:
		for i, call := range model {
			if fnName(call) != fnName(dataCalls[i]) {
				want = "other_tool"
				break
			}
		}
	}
	if want != "" {
		c.ExpectedStops[want]++
	}
	got := ""
	if ts, ok := answer["tool_stop"].(map[string]any); ok {
		got = str(ts["reason"])
	}
	if got != want {
		if c.StopMismatch == nil {
			c.StopMismatch = map[string]string{}
		}
		c.StopMismatch[id] = fmt.Sprintf("data calls %s, model %s: want stop %q, got %q", names(dataCalls), names(model), want, got)
	}
}

func fnName(call any) string {
	m, _ := call.(map[string]any)
	f, _ := m["function"].(map[string]any)
	return str(f["name"])
}

func names(calls []any) string {
	var s []string
	for _, c := range calls {
		s = append(s, fnName(c))
	}
	if len(s) == 0 {
		return "(text)"
	}
	return strings.Join(s, ",")
}

// idsRecords compares each ids record with its answer: its length, and
// the loss each regenerated turn's own tokens carry.
func (c *Counts) idsRecords(path string, answers map[string]line, maxLength int64) error {
	ls, _, err := readLines(path)
	if err != nil {
		return err
	}
	exs, _, err := readLines(filepath.Join(filepath.Dir(path), "excluded.jsonl"))
	if err != nil {
		return err
	}
	ex, _ := firstByID(exs)
	c.IDsExcluded = map[string]int{}
	for _, l := range ex {
		c.IDsExcluded[str(l.obj["reason"])]++
	}
	recs, _ := firstByID(ls)
	for id, r := range recs {
		a, ok := answers[id]
		if !ok {
			continue
		}
		c.IDsRecords++
		in, mask := ints(list(r.obj["input_ids"])), ints(list(r.obj["loss_mask"]))
		if maxLength > 0 && int64(len(in)) > maxLength {
			c.IDsOverMax++
			c.IDsOverMaxTokens += int64(len(in))
			c.IDsLongest = max(c.IDsLongest, int64(len(in)))
		}
		turns := asked(a.obj)
		if bad := withoutLoss(in, mask, turns); bad != "" {
			if c.NoLoss == nil {
				c.NoLoss = map[string]string{}
			}
			c.NoLoss[id] = bad
		}
	}
	return nil
}

func ints(l []any) []int64 {
	out := make([]int64, len(l))
	for i, v := range l {
		out[i], _ = num(v)
	}
	return out
}

// withoutLoss names the turns whose own tokens carry no loss: the last
// turn's output ids must end input_ids, every one marked 1; an earlier
// turn's last 8 tokens before its stop token must stand in input_ids,
// after the earlier turns', marked 1.
func withoutLoss(in, mask []int64, turns []map[string]any) string {
	var bad []string
	from := 0
	for i, t := range turns {
		out := ints(list(t["output_ids"]))
		if len(out) == 0 {
			continue // no output ids: an exclusion's business, not this record's
		}
		if i == len(turns)-1 {
			if len(out) > len(in) || !equal(in[len(in)-len(out):], out) || !allOne(mask[len(in)-len(out):]) {
				bad = append(bad, fmt.Sprintf("turn %d of %d (the last)", i+1, len(turns)))
			}
			continue
		}
		tail := out[:len(out)-1]
		tail = tail[max(0, len(tail)-8):]
		at := find(in, tail, from)
		for at >= 0 && !allOne(mask[at:at+len(tail)]) {
			at = find(in, tail, at+1)
		}
		if at < 0 {
			bad = append(bad, fmt.Sprintf("turn %d of %d", i+1, len(turns)))
			continue
		}
		from = at + len(tail)
	}
	return strings.Join(bad, ", ")
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func allOne(m []int64) bool {
	for _, v := range m {
		if v != 1 {
			return false
		}
	}
	return true
}

func find(in, seq []int64, from int) int {
	for i := from; i+len(seq) <= len(in); i++ {
		if equal(in[i:i+len(seq)], seq) {
			return i
		}
	}
	return -1
}
