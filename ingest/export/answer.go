package export

import (
	"encoding/json"
	"errors"
	"fmt"

	"gendex/ingest"
	"gendex/ingest/gen/client"
	"gendex/store"
)

// turn is what export reads of one answer: a flat answer line, or one
// element Ti of a conversation line's "turns".
type turn struct {
	text      *string // nil: the answer has none, or it is in textRaw
	textRaw   []byte  // the JSON string "text", decoded when it is needed
	reasoning string  // "" when absent or null
	outputIDs []byte  // the raw JSON array; nil when absent
	promptIDs []byte  // the raw JSON array gen sent as the prompt; nil when absent
	finish    string
	// Token counts, or store.Unknown.
	promptTokens, completionTokens int64
	// toolCalls are the model's calls (the raw JSON list of the answer's
	// "tool_calls"); nil when it made none.
	toolCalls []byte
	// step is a tool conversation step's "user_turn" and "results"
	// (gen's toolturns.go); nil for any other answer.
	step *toolStep
	// shape is the answer line's shape (README's name for it), and noText
	// where that shape keeps the text this answer lacks, or why it has
	// none (a flat answer's; see ingest.ReadAnswer).
	shape, noText string
}

// hasText reports whether the answer has a text, or calls (whose content
// may be null: "" then).
func (t *turn) hasText() bool { return t.text != nil || t.textRaw != nil || t.toolCalls != nil }

// content returns the answer's text ("" when it has none).
func (t *turn) content() string {
	if t.text == nil && t.textRaw != nil {
		s, _ := ingest.DecodeString(t.textRaw)
		t.text = &s
	}
	if t.text == nil {
		return ""
	}
	return *t.text
}

// answer is a raw line: one turn, or the turns of a conversation line
// (contract: {"id", "turns": [T1..Tk], ...}).
type answer struct {
	turns        []turn
	conversation bool
}

var answerKeys = []string{"turns", "output_ids", "text", "reasoning_content", "prompt_ids", "finish_reason",
	"prompt_tokens", "completion_tokens", "tool_calls", "user_turn", "results"}

// The positions of answerKeys.
const (
	kTurns = iota
	kOutputIDs
	kText
	kReasoning
	kPromptIDs
	kFinish
	kPromptTokens
	kCompletionTokens
	kToolCalls
	kUserTurn
	kResults
	nAnswerKeys
)

// parseAnswer reads an answer line, of any shape ingest reads (m is its
// file's mapping, nil for none). rec is its index record, whose
// normalized finish reason and counts stand for the line's own. pre, when
// not nil, is ingest.ReadAnswer's reading of the line, made already.
func parseAnswer(line []byte, rec *store.Record, m ingest.IDPath, pre *ingest.Answer) (answer, error) {
	var r ingest.Answer
	var err error
	if pre != nil {
		r = *pre
	} else {
		r, err = ingest.ReadAnswer(line, m)
	}
	turns := r.Turns
	if err != nil {
		// A conversation line is read turn by turn: ReadAnswer's
		// reading of it as one answer does not count.
		var o [nAnswerKeys][]byte
		if gerr := getFields(line, answerKeys, o[:]); gerr != nil {
			return answer{}, gerr
		}
		if turns = o[kTurns]; isNull(turns) {
			return answer{}, err
		}
	}
	if turns != nil {
		return parseTurns(turns)
	}
	a := answer{turns: []turn{{text: r.Text, textRaw: r.TextRaw, reasoning: r.Reasoning, outputIDs: r.OutputIDs,
		promptIDs: r.PromptIDs, shape: r.Shape, noText: r.NoText}}}
	t := &a.turns[0]
	// The calls are the ones ReadAnswer found in its one scan of the line:
	// reading them again was a second scan of every answer.
	if t.toolCalls, err = toolCallsOf(r.ToolCalls); err != nil {
		return answer{}, err
	}
	t.finish = rec.Finish
	t.promptTokens, t.completionTokens = rec.PromptTokens, rec.CompletionTokens
	return a, nil
}

// parseTurns reads the turns of a conversation line (its raw "turns").
func parseTurns(ts []byte) (answer, error) {
	a := answer{conversation: true}
	err := ingest.EachElement(ts, func(v []byte) error {
		var to [nAnswerKeys][]byte
		if err := getFields(v, answerKeys, to[:]); err != nil {
			return fmt.Errorf("turn %d: %v", len(a.turns)+1, err)
		}
		var t turn
		if err := t.read(&to); err != nil {
			return fmt.Errorf("turn %d: %v", len(a.turns)+1, err)
		}
		a.turns = append(a.turns, t)
		return nil
	})
	if err != nil {
		return a, fmt.Errorf(`"turns": %v`, err)
	}
	if len(a.turns) == 0 {
		return a, errors.New(`"turns" is empty`)
	}
	return a, nil
}

// read reads one turn of a conversation line (gendex's own: gen --turns
// all): output_ids, text, reasoning_content, prompt_ids, its finish
// reason and counts.
func (t *turn) read(o *[nAnswerKeys][]byte) error {
	*t = turn{promptTokens: store.Unknown, completionTokens: store.Unknown, shape: "gendex conversation turn", noText: "no \"text\" in the turn"}
	if v := o[kOutputIDs]; !isNull(v) {
		t.outputIDs = v
	}
	if v := o[kPromptIDs]; !isNull(v) {
		t.promptIDs = v
	}
	if v := o[kToolCalls]; !isNull(v) {
		t.toolCalls = v
	}
	if v := o[kUserTurn]; !isNull(v) {
		s, err := readStep(v, o[kResults])
		if err != nil {
			return err
		}
		t.step = s
	}
	if v := o[kText]; !isNull(v) {
		if v[0] != '"' {
			return errors.New(`"text" is not a string`)
		}
		t.textRaw = v
	}
	if v := o[kReasoning]; !isNull(v) {
		s, ok := ingest.DecodeString(v)
		if !ok {
			return errors.New(`"reasoning_content" is not a string`)
		}
		t.reasoning = s
	}
	if s, ok := ingest.DecodeString(o[kFinish]); ok {
		t.finish = s
	}
	if n, ok := ingest.DecodeCount(o[kPromptTokens]); ok {
		t.promptTokens = n
	}
	if n, ok := ingest.DecodeCount(o[kCompletionTokens]); ok {
		t.completionTokens = n
	}
	return nil
}

// message is one chat turn, in SpecForge's role/content form (with
// reasoning_content on an assistant turn under --reasoning keep).
type message = client.Message

// prompt is a prompt line: exactly one of ids, text or messages is set.
type prompt struct {
	ids      []byte // the raw JSON array of input_ids
	text     *string
	messages []message // every turn as given, ShareGPT mapped to role/content
	// tools are a chat prompt's tools, wrapped (nil: none; ingest/tools.go).
	tools json.RawMessage
}

var promptKeys = []string{"input_ids", "text", "messages", "conversations", "tools"}

// parse reads a prompt line into p ({"input_ids"}, {"text"},
// {"messages"}, {"conversations"}; ShareGPT from/value and OpenAI content
// parts too).
func (p *prompt) parse(line []byte) error {
	*p = prompt{}
	var o [5][]byte
	if err := getFields(line, promptKeys, o[:]); err != nil {
		return err
	}
	turns := o[2]
	if isNull(turns) {
		turns = o[3]
	}
	switch {
	case !isNull(o[0]):
		p.ids = o[0] // checked where it is used
	case !isNull(o[1]):
		s, ok := ingest.DecodeString(o[1])
		if !ok {
			return errors.New(`"text" is not a string`)
		}
		p.text = &s
	case !isNull(turns):
		var raw []json.RawMessage
		if err := ingest.EachElement(turns, func(v []byte) error { raw = append(raw, v); return nil }); err != nil {
			return err
		}
		ts, tools, err := ingest.ParseChat(raw, o[4])
		if err != nil {
			return err
		}
		p.tools = tools
		for _, t := range ts {
			p.messages = append(p.messages, message{Role: t.Role, Content: t.Content, ToolCalls: t.ToolCalls, ToolCallID: t.ToolCallID, Name: t.Name})
		}
		if p.userTurns() == 0 {
			return errors.New("no user turn")
		}
	default:
		return errors.New("none of input_ids, text, messages or conversations")
	}
	return nil
}

func (p *prompt) userTurns() int {
	n := 0
	for _, m := range p.messages {
		if m.Role == "user" {
			n++
		}
	}
	return n
}

// upToLastUser returns the prompt's turns up to and including its last
// user turn, as given: what a single answer line answers. A prompt with
// tools is sent up to its last turn that is not the assistant's (a tool
// result answers within the conversation: gen's setTools).
func (p *prompt) upToLastUser() []message {
	last := -1
	for i, m := range p.messages {
		if m.Role == "user" || p.tools != nil && m.Role != "assistant" {
			last = i
		}
	}
	return p.messages[:last+1]
}

// interleave returns the conversation of a multi-turn answer: the prompt's
// turns up to its last user turn without its original assistant turns,
// with assistant(i) after user turn i (from 0). It is the history gen
// sends (contract, gen --turns all).
func (p *prompt) interleave(assistant func(i int) message) []message {
	var out []message
	u := 0
	for _, m := range p.upToLastUser() {
		switch m.Role {
		case "assistant":
		case "user":
			out = append(out, m, assistant(u))
			u++
		default:
			out = append(out, m)
		}
	}
	return out
}
