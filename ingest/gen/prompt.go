package gen

import (
	"encoding/json"
	"errors"
	"fmt"

	"gendex/ingest/gen/sglang"
)

// Prompt is one line of a prompts file, ready to be sent.
type Prompt struct {
	ID   string
	Line int64

	// Exactly one of these is set.
	InputIDs []int
	Text     string
	Messages []sglang.Message

	// Sampling holds the line's own settings (max_new_tokens, or a
	// sampling_params object); they override the run's.
	Sampling sglang.SamplingParams
}

type promptLine struct {
	ID             json.RawMessage   `json:"id"`
	InputIDs       []int             `json:"input_ids"`
	Text           *string           `json:"text"`
	Messages       []json.RawMessage `json:"messages"`
	Conversations  []json.RawMessage `json:"conversations"`
	MaxNewTokens   *int              `json:"max_new_tokens"`
	SamplingParams json.RawMessage   `json:"sampling_params"`
}

// chatTurn is a message in OpenAI form (role/content) or ShareGPT form
// (from/value).
type chatTurn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	From    string          `json:"from"`
	Value   string          `json:"value"`
}

var shareGPTRoles = map[string]string{"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "system": "system", "tool": "tool"}

// ParsePrompt reads one prompt line. id is the id the index knows it by
// (the line's own, or its line id when it has none). Prompt shapes:
// {"input_ids":[...]}, {"text":"..."}, {"messages":[{"role","content"}]},
// {"conversations":[{"from","value"}|{"role","content"}]} (trailing
// assistant turns are dropped: the answer to the last user turn is asked
// for). A line may carry "max_new_tokens" or "sampling_params".
func ParsePrompt(line []byte, id string, lineNo int64) (*Prompt, error) {
	var pl promptLine
	if err := json.Unmarshal(line, &pl); err != nil {
		return nil, fmt.Errorf("prompt line: %v", err)
	}
	p := &Prompt{ID: id, Line: lineNo}
	n := 0
	if pl.InputIDs != nil {
		if len(pl.InputIDs) == 0 {
			return nil, errors.New("prompt has an empty input_ids list")
		}
		p.InputIDs = pl.InputIDs
		n++
	}
	if pl.Text != nil {
		p.Text = *pl.Text
		n++
	}
	if pl.Messages != nil {
		msgs, err := turns(pl.Messages, false)
		if err != nil {
			return nil, fmt.Errorf("messages: %w", err)
		}
		p.Messages = msgs
		n++
	}
	if pl.Conversations != nil {
		msgs, err := turns(pl.Conversations, true)
		if err != nil {
			return nil, fmt.Errorf("conversations: %w", err)
		}
		p.Messages = msgs
		n++
	}
	switch {
	case n == 0:
		return nil, errors.New("prompt has none of input_ids, text, messages or conversations")
	case n > 1:
		return nil, errors.New("prompt has more than one of input_ids, text, messages and conversations")
	}
	if len(pl.SamplingParams) > 0 && string(pl.SamplingParams) != "null" {
		sp, err := sglang.ParseSampling(pl.SamplingParams)
		if err != nil {
			return nil, err
		}
		p.Sampling = sp
	}
	if pl.MaxNewTokens != nil {
		if *pl.MaxNewTokens < 0 {
			return nil, fmt.Errorf("max_new_tokens %d is negative", *pl.MaxNewTokens)
		}
		p.Sampling.MaxNewTokens = pl.MaxNewTokens
	}
	return p, nil
}

func turns(raw []json.RawMessage, dropTrailingAssistant bool) ([]sglang.Message, error) {
	var out []sglang.Message
	for i, r := range raw {
		var t chatTurn
		if err := json.Unmarshal(r, &t); err != nil {
			return nil, fmt.Errorf("turn %d: %v", i+1, err)
		}
		m := sglang.Message{Role: t.Role}
		if t.From != "" {
			role, ok := shareGPTRoles[t.From]
			if !ok {
				return nil, fmt.Errorf("turn %d: unknown speaker %q (want human, gpt or system)", i+1, t.From)
			}
			m.Role, m.Content = role, t.Value
		} else {
			if m.Role == "" {
				return nil, fmt.Errorf("turn %d has no role", i+1)
			}
			c, err := contentText(t.Content)
			if err != nil {
				return nil, fmt.Errorf("turn %d: %w", i+1, err)
			}
			m.Content = c
		}
		out = append(out, m)
	}
	if dropTrailingAssistant {
		for len(out) > 0 && out[len(out)-1].Role == "assistant" {
			out = out[:len(out)-1]
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no turns to answer")
	}
	return out, nil
}

// contentText reads a message content: a string, or OpenAI's list of
// {"type":"text","text":...} parts (text parts only).
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
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
