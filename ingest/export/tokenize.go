package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"gendex/ingest/gen/sglang"
)

// ServerTokenizer tokenizes with an SGLang server's /v1/tokenize: chat
// messages through the client's TokenizeMessages (the chat template, as
// gen's /generate path uses it), text with add_special_tokens true, as
// /generate tokenizes a "text" prompt.
type ServerTokenizer struct{ C *sglang.Client }

// TokenizeMessages returns the ids the chat endpoint would see.
func (t ServerTokenizer) TokenizeMessages(ctx context.Context, msgs []sglang.Message) ([]int, error) {
	return t.C.TokenizeMessages(ctx, msgs)
}

// TokenizeText returns the ids /generate sees for text. (The sglang client
// has CountTokens, which returns the count only; this is the same call
// keeping the ids.)
func (t ServerTokenizer) TokenizeText(ctx context.Context, text string) ([]int, error) {
	body := map[string]any{"prompt": text, "add_special_tokens": true}
	if t.C.Model != "" {
		body["model"] = t.C.Model
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.C.BaseURL+"/v1/tokenize", &buf)
	if err != nil {
		return nil, fmt.Errorf("POST /v1/tokenize at %s: %v", t.C.Server(), err)
	}
	req.Header.Set("Content-Type", "application/json")
	if t.C.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+t.C.APIKey)
	}
	hc := t.C.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("POST /v1/tokenize at %s: %v", t.C.Server(), err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("POST /v1/tokenize at %s: %v", t.C.Server(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("POST /v1/tokenize at %s: HTTP %d: %s (does the server have /v1/tokenize? SGLang has it since v0.5.3.post1)",
			t.C.Server(), resp.StatusCode, bytes.TrimSpace(data[:min(len(data), 300)]))
	}
	var out struct {
		Tokens []int `json:"tokens"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.Tokens == nil {
		return nil, fmt.Errorf("POST /v1/tokenize at %s: the answer has no flat \"tokens\" list", t.C.Server())
	}
	return out.Tokens, nil
}
