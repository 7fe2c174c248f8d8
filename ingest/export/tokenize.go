package export

import (
	"context"

	"gendex/ingest/gen/client"
)

// ServerTokenizer tokenizes with an SGLang server's /v1/tokenize: chat
// messages through the chat template (as gen's /generate path does), text
// with add_special_tokens true, as /generate tokenizes a "text" prompt.
type ServerTokenizer struct{ C *client.Client }

// TokenizeMessages returns the ids the chat endpoint would see.
func (t ServerTokenizer) TokenizeMessages(ctx context.Context, msgs []client.Message) ([]int, error) {
	return t.C.TokenizeMessages(ctx, msgs)
}

// TokenizeText returns the ids /generate sees for text.
func (t ServerTokenizer) TokenizeText(ctx context.Context, text string) ([]int, error) {
	return t.C.TokenizeText(ctx, text)
}
