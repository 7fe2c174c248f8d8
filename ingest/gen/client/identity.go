package client

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"
)

// identityTimeout bounds the request that reads a server's identity: a
// server that does not answer it in time has an unknown identity.
const identityTimeout = 5 * time.Second

// sglangIdentityKeys are the ServerArgs of SGLang's /get_server_info that
// change what its answers are: its version, the model and tokenizer, the
// chat template, the parsers that split reasoning and tool calls from the
// text, the numbers' types, and the speculative decoding settings.
var sglangIdentityKeys = []string{"version", "model_path", "tokenizer_path", "chat_template", "reasoning_parser",
	"tool_call_parser", "dtype", "quantization", "kv_cache_dtype", "speculative_algorithm",
	"speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens"}

// ServerIdentity reads what the server says of itself beyond /v1/models,
// by its flavor: SGLang's /get_server_info (the keys of
// sglangIdentityKeys it sets), vLLM's /version, llama.cpp's /props (its
// model path, build and the chat template's SHA-256, the first 16 hex
// digits). A key the server does not tell is left out; a server that
// answers none of it gives nil. It never fails the caller: an identity
// is a record, not a requirement. serverInfo is the body it read of
// SGLang's /get_server_info or llama.cpp's /props (nil: none), for what
// else gen reads there (the capacity the server states) without asking
// again.
func (c *Client) ServerIdentity(ctx context.Context) (ident map[string]any, serverInfo []byte) {
	ctx, cancel := context.WithTimeout(ctx, identityTimeout)
	defer cancel()
	out := map[string]any{}
	switch c.Flavor {
	case FlavorSGLang:
		var body json.RawMessage
		var info map[string]json.RawMessage
		if _, err := c.call(ctx, http.MethodGet, "/get_server_info", nil, &body); err != nil || json.Unmarshal(body, &info) != nil {
			return nil, nil
		}
		serverInfo = body
		for _, k := range sglangIdentityKeys {
			var v any
			if raw, ok := info[k]; ok && json.Unmarshal(raw, &v) == nil && v != nil && v != "" {
				out[k] = v
			}
		}
	case FlavorVLLM:
		var v struct {
			Version string `json:"version"`
		}
		if _, err := c.call(ctx, http.MethodGet, "/version", nil, &v); err != nil || v.Version == "" {
			return nil, nil
		}
		out["version"] = v.Version
	case FlavorLlamaCpp:
		var body json.RawMessage
		var p struct {
			ModelPath    string `json:"model_path"`
			BuildInfo    string `json:"build_info"`
			ChatTemplate string `json:"chat_template"`
		}
		if _, err := c.call(ctx, http.MethodGet, "/props", nil, &body); err != nil || json.Unmarshal(body, &p) != nil {
			return nil, nil
		}
		serverInfo = body
		if p.ModelPath != "" {
			out["model_path"] = p.ModelPath
		}
		if p.BuildInfo != "" {
			out["version"] = p.BuildInfo
		}
		if p.ChatTemplate != "" {
			sum := sha256.Sum256([]byte(p.ChatTemplate))
			out["chat_template_sha256"] = hex.EncodeToString(sum[:8])
		}
	}
	if len(out) == 0 {
		return nil, serverInfo
	}
	return out, serverInfo
}
