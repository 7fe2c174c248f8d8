package client

import (
	"context"
	"encoding/json"
)

// Template is what one request asks of the server's chat template beyond
// its messages: kwargs (chat_template_kwargs, such as enable_thinking) and
// a reasoning effort (reasoning_effort). The zero value asks nothing of
// its own: the Client's ChatTemplateKwargs apply.
type Template struct {
	Kwargs map[string]any
	Effort string
}

// Extra is the chat body fields t adds beside the kwargs:
// reasoning_effort when set (ChatRequest.Extra), nil for none.
func (t Template) Extra() map[string]any {
	if t.Effort == "" {
		return nil
	}
	return map[string]any{"reasoning_effort": t.Effort}
}

// TokenizeChatAs is TokenizeChat with t's kwargs (over the Client's) and
// reasoning effort, as the chat endpoint would render the messages with
// them: SGLang's /v1/tokenize takes reasoning_effort beside the messages;
// vLLM's /tokenize takes kwargs only, so there it goes among them.
func (c *Client) TokenizeChatAs(ctx context.Context, messages []Message, tools json.RawMessage, t Template) ([]int, error) {
	return c.tokenizeMessages(ctx, messages, tools, t)
}
