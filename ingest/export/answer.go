package export

import (
	"encoding/json"
	"errors"
	"fmt"

	"gendex/ingest/gen/sglang"
	"gendex/store"
)

// turn is what export reads of one answer: a flat answer line, or one
// element Ti of a conversation line's "turns".
type turn struct {
	text      *string // nil: the answer has none
	reasoning string  // "" when absent or null
	outputIDs []byte  // the raw JSON array; nil when absent
	promptIDs []byte  // the raw JSON array gen sent as the prompt; nil when absent
	finish    string
	// Token counts, or store.Unknown.
	promptTokens, completionTokens int64
}

// answer is a raw line: one turn, or the turns of a conversation line
// (contract: {"id", "turns": [T1..Tk], ...}).
type answer struct {
	turns        []turn
	conversation bool
}

var answerKeys = []string{"turns", "output_ids", "text", "reasoning_content", "prompt_ids", "finish_reason",
	"prompt_tokens", "completion_tokens", "choices", "response", "meta_info"}

// parseAnswer reads an answer line. rec is its index record, whose
// normalized finish reason and counts stand for a flat line's own (they
// are read from any shape ingest knows).
func parseAnswer(line []byte, rec *store.Record) (answer, error) {
	o, err := parseObject(line, answerKeys...)
	if err != nil {
		return answer{}, err
	}
	if ts := o["turns"]; !isNull(ts) {
		a := answer{conversation: true}
		err := elements(ts, func(v []byte) error {
			to, err := parseObject(v, answerKeys...)
			if err != nil {
				return fmt.Errorf("turn %d: %v", len(a.turns)+1, err)
			}
			t, err := readTurn(to)
			if err != nil {
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
	t, err := readTurn(o)
	if err != nil {
		return answer{}, err
	}
	t.finish = rec.Finish
	t.promptTokens, t.completionTokens = rec.PromptTokens, rec.CompletionTokens
	return answer{turns: []turn{t}}, nil
}

// readTurn reads one answer object: gendex's flat line or SGLang's
// /generate (output_ids, text), or OpenAI's choices[0] (message.content,
// message.reasoning_content, or text), also inside a Batch line's
// response.body.
func readTurn(o object) (turn, error) {
	t := turn{promptTokens: store.Unknown, completionTokens: store.Unknown}
	if v := o["output_ids"]; !isNull(v) {
		t.outputIDs = v
	}
	if v := o["prompt_ids"]; !isNull(v) {
		t.promptIDs = v
	}
	if v := o["text"]; !isNull(v) {
		s, ok := str(v)
		if !ok {
			return t, errors.New(`"text" is not a string`)
		}
		t.text = &s
	}
	if v := o["reasoning_content"]; !isNull(v) {
		s, ok := str(v)
		if !ok {
			return t, errors.New(`"reasoning_content" is not a string`)
		}
		t.reasoning = s
	}
	if s, ok := str(o["finish_reason"]); ok {
		t.finish = s
	}
	if n, ok := count(o["prompt_tokens"]); ok {
		t.promptTokens = n
	}
	if n, ok := count(o["completion_tokens"]); ok {
		t.completionTokens = n
	}
	choices := o["choices"]
	if isNull(choices) && !isNull(o["response"]) {
		if r, err := parseObject(o["response"], "body", "choices"); err == nil {
			choices = r["choices"]
			if body, err := parseObject(r["body"], "choices"); err == nil && !isNull(body["choices"]) {
				choices = body["choices"]
			}
		}
	}
	if t.text == nil && !isNull(choices) {
		var first []byte
		elements(choices, func(v []byte) error {
			if first == nil {
				first = v
			}
			return nil
		})
		c, err := parseObject(first, "message", "text", "finish_reason")
		if err != nil {
			return t, fmt.Errorf(`"choices"[0]: %v`, err)
		}
		if s, ok := str(c["text"]); ok {
			t.text = &s
		}
		if m, err := parseObject(c["message"], "content", "reasoning_content"); err == nil {
			if s, ok := str(m["content"]); ok {
				t.text = &s
			}
			if s, ok := str(m["reasoning_content"]); ok {
				t.reasoning = s
			}
		}
	}
	return t, nil
}

// message is one chat turn, in SpecForge's role/content form (with
// reasoning_content on an assistant turn under --reasoning keep).
type message = sglang.Message

// prompt is a prompt line: exactly one of ids, text or messages is set.
type prompt struct {
	ids      []byte // the raw JSON array of input_ids
	text     *string
	messages []message // every turn as given, ShareGPT mapped to role/content
}

var shareGPTRoles = map[string]string{"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant",
	"system": "system", "tool": "tool", "function": "tool", "observation": "tool"}

// parsePrompt reads a prompt line ({"input_ids"}, {"text"}, {"messages"},
// {"conversations"}; ShareGPT from/value and OpenAI content parts too).
func parsePrompt(line []byte) (*prompt, error) {
	o, err := parseObject(line, "input_ids", "text", "messages", "conversations")
	if err != nil {
		return nil, err
	}
	p := &prompt{}
	turns := o["messages"]
	if isNull(turns) {
		turns = o["conversations"]
	}
	switch {
	case !isNull(o["input_ids"]):
		if _, _, ok := appendIDs(nil, o["input_ids"]); !ok {
			return nil, errors.New(`"input_ids" is not a list of token ids`)
		}
		p.ids = o["input_ids"]
	case !isNull(o["text"]):
		s, ok := str(o["text"])
		if !ok {
			return nil, errors.New(`"text" is not a string`)
		}
		p.text = &s
	case !isNull(turns):
		err := elements(turns, func(v []byte) error {
			var t struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
				From    string          `json:"from"`
				Value   string          `json:"value"`
			}
			n := len(p.messages) + 1
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("turn %d: %v", n, err)
			}
			if t.From != "" {
				role, ok := shareGPTRoles[t.From]
				if !ok {
					return fmt.Errorf("turn %d: unknown speaker %q (want human, gpt or system)", n, t.From)
				}
				p.messages = append(p.messages, message{Role: role, Content: t.Value})
				return nil
			}
			if t.Role == "" {
				return fmt.Errorf("turn %d has no role", n)
			}
			c, err := contentText(t.Content)
			if err != nil {
				return fmt.Errorf("turn %d: %v", n, err)
			}
			p.messages = append(p.messages, message{Role: t.Role, Content: c})
			return nil
		})
		if err != nil {
			return nil, err
		}
		if p.userTurns() == 0 {
			return nil, errors.New("no user turn")
		}
	default:
		return nil, errors.New("none of input_ids, text, messages or conversations")
	}
	return p, nil
}

// contentText reads a message content: a string, or OpenAI's list of
// {"type":"text","text":...} parts, joined.
func contentText(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("content is neither a string nor a list of parts")
	}
	out := ""
	for _, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("content part of type %q is not supported (text only)", p.Type)
		}
		out += p.Text
	}
	return out, nil
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
// user turn, as given: what a single answer line answers.
func (p *prompt) upToLastUser() []message {
	last := -1
	for i, m := range p.messages {
		if m.Role == "user" {
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
