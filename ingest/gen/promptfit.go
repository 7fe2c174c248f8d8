package gen

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"gendex/ingest/gen/client"
)

// A prompt that cannot fit in the server's context is refused before it
// is sent, as a prompt gen cannot read is: its final error names its file
// and line, what it has and what fits, and no request carries it (the
// server would answer 400). What it has is counted by the server's
// tokenizer where gen has one at hand (the token ids it sends; /v1/tokenize
// of a text, or of chat messages with their tools), else bounded from its
// bytes (at least one token per maxTokenBytes bytes). A prompt whose bytes
// show it fits (at most one token per byte, and room for the chat
// template) is never counted.

// maxTokenBytes bounds the bytes of a token, on average over a prompt,
// when no tokenizer can count it: real text is 3 to 5 bytes a token, and
// no tokenizer's longest tokens (runs of spaces or of '=') come near it
// over a whole prompt.
const maxTokenBytes = 32

// chatSlack bounds the tokens a chat template adds to the messages' own
// text: a role header and end of turn per message, and chatTemplateSlack
// once (a default system prompt, the tools' instructions).
const (
	chatSlack         = 16
	chatTemplateSlack = 512
)

// promptFits returns nil when prompt p, sent to s as ids (nil when it is
// sent as text or messages), leaves room in s's context (its length less
// clipMargin), or when that is unknown; otherwise a Permanent error that
// names p's file and line, what it has and what fits. textTokens is a text
// prompt's tokens when it counted them by the server's tokenizer (0: not
// counted), for clipping max_new_tokens.
func (a *asker) promptFits(ctx context.Context, s *server, c *client.Client, p *Prompt, ids []int) (textTokens int, err error) {
	ctxLen := int(s.ctxLen.Load())
	room := ctxLen - clipMargin
	if ctxLen <= 0 {
		return 0, nil
	}
	var n, size int
	counted, textOnly := true, false
	switch {
	case ids != nil:
		n = len(ids)
	case p.Messages == nil:
		if size = len(p.Text); size+textSlack <= room {
			return 0, nil
		}
		t, err := a.countWith(&s.countTokens, "count "+s.name, func() ([]int, error) { return c.TokenizeText(ctx, p.Text) },
			"gen: %s has no /v1/tokenize: text prompts are not clipped to its context length, and one too long for it is found from its bytes alone (at least a token per %d bytes)", s.name, maxTokenBytes)
		if err != nil {
			return 0, err
		}
		n, counted, textTokens = len(t), t != nil, len(t)
	default:
		if size = chatBytes(p); size+chatSlack*len(p.Messages)+chatTemplateSlack <= room {
			return 0, nil
		}
		t, err := a.countWith(&s.countChat, "count chat "+s.name, func() ([]int, error) { return c.TokenizeChat(ctx, p.Messages, p.Tools) },
			"gen: %s has no /v1/tokenize with messages: a chat prompt too long for its context is found by counting its messages' text alone (its template's tokens aside)", s.name)
		if err != nil {
			return 0, err
		}
		n, counted = len(t), t != nil
		if t == nil { // its messages' text alone (llama.cpp tokenizes text): fewer than with the template
			if t, err = a.countWith(&s.countTokens, "count "+s.name, func() ([]int, error) { return c.TokenizeText(ctx, chatText(p)) },
				"gen: %s has no /v1/tokenize: a prompt too long for its context is found from its bytes alone (at least a token per %d bytes)", s.name, maxTokenBytes); err != nil {
				return 0, err
			}
			n, counted, textOnly = len(t), t != nil, true
		}
	}
	if !counted {
		n = size / maxTokenBytes
	}
	if n <= room {
		return textTokens, nil
	}
	has := fmt.Sprintf("%d tokens (by the server's tokenizer)", n)
	switch {
	case p.InputIDs != nil:
		has = fmt.Sprintf("%d token ids", n)
	case !counted:
		has = fmt.Sprintf("at least %d tokens (its %d bytes, a token per %d at most: the server has no tokenizer gen can ask)", n, size, maxTokenBytes)
	case textOnly:
		has = fmt.Sprintf("at least %d tokens (its messages' text by the server's tokenizer, without the chat template)", n)
	}
	return 0, &client.Error{Kind: client.Permanent, Server: s.name, Op: "gen", Err: errTooLong, Message: fmt.Sprintf(
		"%s:%d: the prompt is %s; the server's context is %d tokens, so a prompt of at most %d fits (%d kept for the answer): not sent",
		p.Path, p.Line, has, ctxLen, room, clipMargin)}
}

// errTooLong is a prompt refused before it was sent: it cannot fit in the
// server's context (promptFits).
var errTooLong = errors.New("the prompt does not fit in the server's context")

// chatText is a chat prompt's messages' text, joined as they come.
func chatText(p *Prompt) string {
	var b strings.Builder
	for _, m := range p.Messages {
		b.WriteString(m.Content)
		b.WriteString(m.ReasoningContent)
		for _, c := range m.ToolCalls {
			b.WriteString(c.Function.Name)
			b.WriteString(c.Function.Arguments)
		}
	}
	return b.String()
}

// countWith counts by call, a request to an endpoint the server may lack,
// unless state says it lacks it (see optional): nil ids then.
func (a *asker) countWith(state *atomic.Int32, key string, call func() ([]int, error), format string, args ...any) ([]int, error) {
	if state.Load() < 0 {
		return nil, nil
	}
	return a.optional(state, key, call, format, args...)
}

// chatBytes is the size of a chat prompt's own text: its messages'
// contents, reasoning, calls and names, and its tools.
func chatBytes(p *Prompt) int {
	n := len(p.Tools)
	for _, m := range p.Messages {
		n += len(m.Content) + len(m.ReasoningContent) + len(m.Name) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Function.Name) + len(c.Function.Arguments)
		}
	}
	return n
}
