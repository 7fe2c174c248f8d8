package gen

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"gendex/ingest"
	"gendex/ingest/gen/client"
)

// Prompt is one line of a prompts file, ready to be sent.
type Prompt struct {
	ID   string
	Line int64

	// Exactly one of these is set.
	InputIDs []int
	Text     string
	Messages []client.Message

	// Sampling holds the line's own settings (max_new_tokens, or a
	// sampling_params object); they override the run's.
	Sampling client.SamplingParams

	// Turns is the number of user turns of a chat prompt (k); 0 for the
	// other shapes. Messages is what --turns last sends; a chat prompt
	// with Turns >= 2 under --turns all is asked turn by turn instead
	// (TurnMessages).
	Turns int
	// Raw is the prompt's line and Path its file, kept under --export
	// to decide the answer's record.
	Raw  []byte
	Path string
	// chat is the conversation without its original assistant turns:
	// system, user and other turns in their order.
	chat []client.Message
	// Tools are the tools of a chat prompt that uses them (its line's
	// "tools", wrapped; tools.go), nil for none.
	Tools json.RawMessage
	// open are the data's calls left without a recorded result, at its
	// end (a set whose data ends at the assistant's call; toolturns.go).
	open []client.ToolCall
	// mix is the record's draw from the run's --mix (mix.go), the same
	// on each of its turns and steps; nil without one.
	mix drawn
	// Sample is which of its prompt's Samples answers this is (0 to
	// Samples-1), Samples 0 or 1 for one answer per prompt (samples.go).
	Sample, Samples int
}

type promptLine struct {
	ID             json.RawMessage   `json:"id"`
	InputIDs       []int             `json:"input_ids"`
	Text           *string           `json:"text"`
	Messages       []json.RawMessage `json:"messages"`
	Conversations  []json.RawMessage `json:"conversations"`
	MaxNewTokens   *int              `json:"max_new_tokens"`
	SamplingParams json.RawMessage   `json:"sampling_params"`
	Tools          json.RawMessage   `json:"tools"`
}

// ParsePrompt reads one prompt line. id is the id the index knows it by
// (the line's own, or its line id when it has none). Prompt shapes:
// {"input_ids":[...]}, {"text":"..."}, {"messages":[{"role","content"}]},
// {"conversations":[{"from","value"}|{"role","content"}]} (trailing
// assistant turns are dropped: the answer to the last user turn is asked
// for). A line may carry "max_new_tokens" or "sampling_params".
func ParsePrompt(line []byte, id string, lineNo int64) (*Prompt, error) {
	if ids, ok := idsPrompt(line); ok {
		return &Prompt{ID: id, Line: lineNo, InputIDs: ids}, nil
	}
	return parsePromptJSON(line, id, lineNo)
}

// parsePromptJSON is ParsePrompt for any prompt line, with encoding/json.
func parsePromptJSON(line []byte, id string, lineNo int64) (*Prompt, error) {
	var pl promptLine
	if err := json.Unmarshal(line, &pl); err != nil {
		return nil, fmt.Errorf("prompt line: %v", err)
	}
	return pl.prompt(id, lineNo)
}

// prompt is the Prompt the line pl holds (see ParsePrompt).
func (pl *promptLine) prompt(id string, lineNo int64) (*Prompt, error) {
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
		msgs, err := turns(pl.Messages, pl.Tools)
		if err != nil {
			return nil, fmt.Errorf("messages: %w", err)
		}
		p.setChat(msgs, false) // never fails: nothing is dropped
		n++
	}
	if pl.Conversations != nil {
		msgs, err := turns(pl.Conversations, pl.Tools)
		if err != nil {
			return nil, fmt.Errorf("conversations: %w", err)
		}
		if err := p.setChat(msgs, true); err != nil {
			return nil, fmt.Errorf("conversations: %w", err)
		}
		n++
	}
	switch {
	case n == 0:
		return nil, errNoPrompt
	case n > 1:
		return nil, errManyPrompts
	}
	if err := p.setTools(pl.Tools); err != nil {
		return nil, err
	}
	if len(pl.SamplingParams) > 0 && string(pl.SamplingParams) != "null" {
		sp, err := client.ParseSampling(pl.SamplingParams)
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

// setChat sets the chat prompt's messages: Messages as --turns last sends
// them (a conversations list without its trailing assistant turns), and the
// conversation without any assistant turn, with its number of user turns.
func (p *Prompt) setChat(msgs []client.Message, dropTrailingAssistant bool) error {
	p.Messages = msgs
	p.open = openCalls(msgs)
	if dropTrailingAssistant {
		for len(p.Messages) > 0 && p.Messages[len(p.Messages)-1].Role == "assistant" {
			p.Messages = p.Messages[:len(p.Messages)-1]
		}
		if len(p.Messages) == 0 {
			return errors.New("no turns to answer")
		}
	}
	for _, m := range msgs {
		switch m.Role {
		case "assistant":
		case "user":
			p.Turns++
			fallthrough
		default:
			p.chat = append(p.chat, m)
		}
	}
	return nil
}

// openCalls returns the calls of msgs (paired: ingest.PairTools) left
// without a result at its end; a call is answered before the conversation
// goes on, so only the last calls can be open.
func openCalls(msgs []client.Message) []client.ToolCall {
	var open []client.ToolCall
	for _, m := range msgs {
		switch {
		case len(m.ToolCalls) > 0:
			open = slices.Clone(m.ToolCalls)
		case m.Role == "tool":
			open = slices.DeleteFunc(open, func(c client.ToolCall) bool { return c.ID == m.ToolCallID })
		default:
			open = nil
		}
	}
	return open
}

// TurnMessages returns the messages of turn i (1..Turns) of a conversation
// asked turn by turn: its system and other turns and user turns 1..i in
// their order, with answers[j-1] as the assistant's answer right after
// user turn j, for j < i. The original assistant turns are never in it;
// the turns after user turn i are left out.
func (p *Prompt) TurnMessages(i int, answers []string) []client.Message {
	out := make([]client.Message, 0, len(p.chat)+i)
	u := 0
	for _, m := range p.chat {
		out = append(out, m)
		if m.Role != "user" {
			continue
		}
		if u++; u == i {
			break
		}
		out = append(out, client.Message{Role: "assistant", Content: answers[u-1]})
	}
	return out
}

// turns reads a chat prompt's turns, with its line's tools
// (ingest.ParseChat), as messages.
func turns(raw []json.RawMessage, tools json.RawMessage) ([]client.Message, error) {
	ts, _, err := ingest.ParseChat(raw, tools)
	if err != nil {
		return nil, err
	}
	if len(ts) == 0 {
		return nil, errors.New("no turns to answer")
	}
	out := make([]client.Message, len(ts))
	for i, t := range ts {
		out[i] = client.Message{Role: t.Role, Content: t.Content, ToolCalls: t.ToolCalls, ToolCallID: t.ToolCallID, Name: t.Name}
	}
	return out, nil
}
