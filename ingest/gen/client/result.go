package client

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
	"unicode/utf8"
)

// API names the endpoint that produced a Result.
type API string

const (
	APIGenerate    API = "generate"    // POST /generate
	APIChat        API = "chat"        // POST /v1/chat/completions
	APICompletions API = "completions" // POST /v1/completions
	// APIAuto is not an endpoint: it asks gen to use the one the server
	// offers (Flavor.API).
	APIAuto API = "auto"
)

// Result is one finished generation in gendex's flat, self-describing
// shape. A nil pointer (or nil OutputIDs) means the server did not send the
// value; it is never reported as 0.
type Result struct {
	API API    // endpoint used; decides whether reasoning_content is written
	RID string // request id sent; not written by AppendJSONL

	// OutputIDs are the generated token ids exactly as /generate returned
	// them: they include the matched EOS or stop token. Nil when absent
	// (servers before v0.5.0, and the OpenAI endpoints).
	OutputIDs []int
	// Text is the generated text (for chat, the message content without
	// the reasoning). Nil when absent (/generate with --skip-tokenizer-init,
	// or a chat message whose content is null).
	Text *string
	// ToolCalls are the model's calls: the chat message's tool_calls, or
	// those /parse_function_call found in a /generate output (whose Text
	// is then the text around them). Nil when it made none.
	ToolCalls []ToolCall
	// ReasoningContent is the chat message's separated reasoning; nil when
	// the server sent null (no --reasoning-parser) or for other endpoints.
	ReasoningContent *string
	// PromptIDs are the exact prompt token ids sent, when the client
	// computed them itself (chat messages tokenized by /v1/tokenize and sent
	// to /generate); nil otherwise. Set by the caller, never by the client.
	PromptIDs []int

	PromptTokens     *int
	CompletionTokens *int // includes the EOS/stop token
	CachedTokens     *int
	ReasoningTokens  *int

	// Spec holds the speculative decoding fields of a server that runs a
	// drafter (nil when it sent none: no speculative decoding, or no
	// verify step).
	Spec *Spec

	// FinishReason is "stop", "length", "tool_calls" or "" when unknown.
	// (An abort is returned as an error, never as a Result.)
	FinishReason string
	// MatchedStop is the token id (int) or stop string (string) that ended
	// generation, or nil.
	MatchedStop any

	E2ELatency float64   // seconds: the server's e2e_latency if given, else measured by the client
	FinishedAt time.Time // when the full answer was read, UTC
	Server     string    // base URL of the server that answered
	// Model is the model the server serves (its /v1/models id, or --model);
	// Simulated marks an answer made by gendex's simulator, so no reader
	// takes it for a real model's.
	Model     string
	Simulated bool
	// Provenance is how the answer was made (Client.Provenance), written
	// as the line's "provenance" object; nil: none is written.
	Provenance []byte
	// MixValues are the values this answer's record drew from gen --mix,
	// as sent (a JSON object), written as "mix_values"; nil: none.
	MixValues []byte
}

// AppendJSONL appends r as one JSON line with id and returns the extended
// buffer: {"id":ID,FIELDS}\n with FIELDS as AppendFields writes them. It
// does not allocate when dst has room.
func (r *Result) AppendJSONL(dst []byte, id string) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, id)
	dst = append(dst, ',')
	dst = r.AppendFields(dst)
	return append(dst, "}\n"...)
}

// AppendFields appends r's fields, without braces, in this order:
// output_ids, text, tool_calls (only when the model made calls),
// reasoning_content (chat only, null when absent),
// prompt_ids (only when set), prompt_tokens, completion_tokens,
// cached_tokens, reasoning_tokens, spec_verify_ct, spec_accept_length,
// spec_accepted_drafts, spec_proposed_drafts (each only when the server
// sent it), finish_reason, matched_stop,
// e2e_latency, finished_at (RFC 3339, milliseconds, UTC), server, model,
// simulated (only when true). A count,
// output_ids or text that is absent is left out rather than written as 0 or
// null, as is an empty finish_reason, zero finished_at or empty server;
// matched_stop and e2e_latency are always written, so the result is never
// empty. Strings are escaped as encoding/json does with
// SetEscapeHTML(false), so the fields decode back to the same values.
func (r *Result) AppendFields(dst []byte) []byte {
	if r.OutputIDs != nil {
		dst = append(dst, `"output_ids":`...)
		dst = appendInts(dst, r.OutputIDs)
		dst = append(dst, ',')
	}
	if r.Text != nil {
		dst = append(dst, `"text":`...)
		dst = appendString(dst, *r.Text)
		dst = append(dst, ',')
	}
	if r.ToolCalls != nil {
		dst = append(dst, `"tool_calls":`...)
		dst = appendToolCalls(dst, r.ToolCalls)
		dst = append(dst, ',')
	}
	if r.API == APIChat {
		dst = append(dst, `"reasoning_content":`...)
		if r.ReasoningContent != nil {
			dst = appendString(dst, *r.ReasoningContent)
		} else {
			dst = append(dst, "null"...)
		}
		dst = append(dst, ',')
	}
	if r.PromptIDs != nil {
		dst = append(dst, `"prompt_ids":`...)
		dst = appendInts(dst, r.PromptIDs)
		dst = append(dst, ',')
	}
	dst = appendCount(dst, `"prompt_tokens":`, r.PromptTokens)
	dst = appendCount(dst, `"completion_tokens":`, r.CompletionTokens)
	dst = appendCount(dst, `"cached_tokens":`, r.CachedTokens)
	dst = appendCount(dst, `"reasoning_tokens":`, r.ReasoningTokens)
	if sp := r.Spec; sp != nil {
		dst = appendCount(dst, `"spec_verify_ct":`, sp.VerifyCt)
		if sp.AcceptLength != nil && !math.IsNaN(*sp.AcceptLength) && !math.IsInf(*sp.AcceptLength, 0) {
			dst = append(dst, `"spec_accept_length":`...)
			dst = appendFloat(dst, *sp.AcceptLength)
			dst = append(dst, ',')
		}
		dst = appendCount(dst, `"spec_accepted_drafts":`, sp.AcceptedDrafts)
		dst = appendCount(dst, `"spec_proposed_drafts":`, sp.ProposedDrafts)
	}
	if r.FinishReason != "" {
		dst = append(dst, `"finish_reason":`...)
		dst = appendString(dst, r.FinishReason)
		dst = append(dst, ',')
	}
	dst = append(dst, `"matched_stop":`...)
	dst = appendMatched(dst, r.MatchedStop)
	dst = append(dst, `,"e2e_latency":`...)
	dst = appendFloat(dst, r.E2ELatency)
	if !r.FinishedAt.IsZero() {
		dst = append(dst, `,"finished_at":"`...)
		dst = r.FinishedAt.UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z07:00")
		dst = append(dst, '"')
	}
	if r.Server != "" {
		dst = append(dst, `,"server":`...)
		dst = appendString(dst, r.Server)
	}
	dst = AppendMaker(dst, r.Model, r.Simulated, r.Provenance)
	return AppendMixValues(dst, r.MixValues)
}

// AppendMixValues appends `,"mix_values":VALUES` when values (a JSON
// object) is set.
func AppendMixValues(dst, values []byte) []byte {
	if len(values) > 0 {
		dst = append(append(dst, `,"mix_values":`...), values...)
	}
	return dst
}

// AppendMaker appends what made an answer: `,"model":MODEL` when model is
// set, `,"simulated":true` when simulated, and `,"provenance":PROV` when
// prov (a JSON object) is set.
func AppendMaker(dst []byte, model string, simulated bool, prov []byte) []byte {
	if model != "" {
		dst = append(dst, `,"model":`...)
		dst = appendString(dst, model)
	}
	if simulated {
		dst = append(dst, `,"simulated":true`...)
	}
	if len(prov) > 0 {
		dst = append(append(dst, `,"provenance":`...), prov...)
	}
	return dst
}

// AppendJSONString appends s as a JSON string, escaped as AppendJSONL
// escapes strings.
func AppendJSONString(dst []byte, s string) []byte { return appendString(dst, s) }

func appendInts(dst []byte, ids []int) []byte {
	dst = append(dst, '[')
	for i, v := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, int64(v), 10)
	}
	return append(dst, ']')
}

func appendCount(dst []byte, key string, v *int) []byte {
	if v == nil {
		return dst
	}
	dst = append(dst, key...)
	dst = strconv.AppendInt(dst, int64(*v), 10)
	return append(dst, ',')
}

// appendMatched writes a matched stop: a token id, a string, or null.
func appendMatched(dst []byte, v any) []byte {
	switch m := v.(type) {
	case int:
		return strconv.AppendInt(dst, int64(m), 10)
	case int64:
		return strconv.AppendInt(dst, m, 10)
	case float64:
		return appendFloat(dst, m)
	case string:
		return appendString(dst, m)
	case json.Number:
		if _, err := strconv.ParseFloat(string(m), 64); err == nil {
			return append(dst, m...)
		}
	}
	return append(dst, "null"...)
}

// appendFloat writes f as a JSON number (null for NaN or ±Inf, which JSON
// cannot hold).
func appendFloat(dst []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		return strconv.AppendFloat(dst, f, 'e', -1, 64)
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

// appendString writes s as a JSON string the way encoding/json does with
// SetEscapeHTML(false): '"', '\\' and control characters are escaped
// (\b \f \n \r \t short, others as \u00XX), invalid UTF-8 bytes become
// \ufffd, and U+2028/U+2029 are escaped for JavaScript; everything else,
// including '<', '>' and '&', is copied.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1:
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\ufffd`...)
			case r == '\u2028' || r == '\u2029':
				dst = append(dst, s[start:i]...)
				dst = append(dst, `\u202`...)
				dst = append(dst, hexDigits[r&0xf])
			default:
				i += size
				continue
			}
			i += size
			start = i
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
