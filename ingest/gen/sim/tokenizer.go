package sim

import (
	"strings"
)

// Token ids of the simulated tokenizer. Ids below ByteBase are special or
// reserved; ByteBase+b is the byte b. Ids from ByteBase+256 up to VocabSize
// are valid for the model but decode to nothing.
const (
	PadID        = 0
	BOSID        = 1 // added in front of text by Encode with special tokens
	EOSID        = 2 // ends a "stop" output; the model's only EOS id
	IMStartID    = 3 // <|im_start|>
	IMEndID      = 4 // <|im_end|>
	SystemID     = 5
	UserID       = 6
	AssistantID  = 7
	ToolID       = 8
	DeveloperID  = 9
	FunctionID   = 10
	ThinkStartID = 11 // <think>; not special: always decoded
	ThinkEndID   = 12 // </think>; not special: always decoded
	// Tool tokens (see tools.go): the tools block of a prompt, and a tool
	// call in Qwen's markup (not special, as in Qwen's tokenizer) and in
	// Kimi-K2's (special: dropped when skipping special tokens).
	ToolsStartID        = 13 // <tools>
	ToolsEndID          = 14 // </tools>
	ToolCallStartID     = 15 // <tool_call>
	ToolCallEndID       = 16 // </tool_call>
	KimiSectionBeginID  = 17 // <|tool_calls_section_begin|>
	KimiSectionEndID    = 18 // <|tool_calls_section_end|>
	KimiCallBeginID     = 19 // <|tool_call_begin|>
	KimiArgumentBeginID = 20 // <|tool_call_argument_begin|>
	KimiCallEndID       = 21 // <|tool_call_end|>

	ByteBase  = 256
	VocabSize = 151936

	// TokenizerMaxLength is the default tokenizer model_max_length reported by
	// /v1/tokenize: HF's VERY_LARGE_INTEGER sentinel, written as its exact
	// decimal digits (int(1e30)). It does not fit an int64.
	TokenizerMaxLength = "1000000000000000019884624838656"
)

// tokenNames maps the named tokens to their text form.
var tokenNames = [...]string{
	PadID:        "<|pad|>",
	BOSID:        "<|bos|>",
	EOSID:        "<|eos|>",
	IMStartID:    "<|im_start|>",
	IMEndID:      "<|im_end|>",
	SystemID:     "<|system|>",
	UserID:       "<|user|>",
	AssistantID:  "<|assistant|>",
	ToolID:       "<|tool|>",
	DeveloperID:  "<|developer|>",
	FunctionID:   "<|function|>",
	ThinkStartID: "<think>",
	ThinkEndID:   "</think>",

	ToolsStartID:        "<tools>",
	ToolsEndID:          "</tools>",
	ToolCallStartID:     "<tool_call>",
	ToolCallEndID:       "</tool_call>",
	KimiSectionBeginID:  "<|tool_calls_section_begin|>",
	KimiSectionEndID:    "<|tool_calls_section_end|>",
	KimiCallBeginID:     "<|tool_call_begin|>",
	KimiArgumentBeginID: "<|tool_call_argument_begin|>",
	KimiCallEndID:       "<|tool_call_end|>",
}

// roleTokens maps a chat role to its template token.
var roleTokens = map[string]int{
	"system":    SystemID,
	"user":      UserID,
	"assistant": AssistantID,
	"tool":      ToolID,
	"developer": DeveloperID,
	"function":  FunctionID,
}

// isSpecial reports whether id is a special token, which decoding drops when
// skipping special tokens. The think markers, <tools> and </tools> and
// Qwen's tool-call markers are ordinary added tokens.
func isSpecial(id int) bool {
	return id >= 0 && id < ByteBase && (id < ThinkStartID || id > ToolCallEndID)
}

// Encode tokenizes text. Named tokens written out in the text (such as
// "<|im_start|>" or "<think>") become their ids, every other byte b becomes
// ByteBase+b. With addSpecial, BOSID is prepended, as SGLang's tokenizer does
// for /generate text.
func Encode(text string, addSpecial bool) []int {
	ids := make([]int, 0, len(text)+1)
	if addSpecial {
		ids = append(ids, BOSID)
	}
	return appendEncoded(ids, text)
}

// appendEncoded appends the ids of text (without BOS) to ids.
func appendEncoded(ids []int, text string) []int {
	for i := 0; i < len(text); i++ {
		if text[i] == '<' {
			if id, n := matchName(text[i:]); n > 0 {
				ids = append(ids, id)
				i += n - 1
				continue
			}
		}
		ids = append(ids, ByteBase+int(text[i]))
	}
	return ids
}

// matchName returns the named token that s starts with and its length, or
// n == 0 if there is none.
func matchName(s string) (id, n int) {
	for id, name := range tokenNames[:] {
		if strings.HasPrefix(s, name) {
			return id, len(name)
		}
	}
	return 0, 0
}

// Decode turns ids back into text. Byte tokens become their bytes, named
// tokens their names (special ones are dropped when skipSpecial is true),
// and other ids nothing. Decode(Encode(s, false), false) == s for every s.
func Decode(ids []int, skipSpecial bool) string {
	var b []byte
	for _, id := range ids {
		b = appendToken(b, id, skipSpecial)
	}
	return string(b)
}

// appendToken appends the text of one token to b.
func appendToken(b []byte, id int, skipSpecial bool) []byte {
	switch {
	case id >= ByteBase && id < ByteBase+256:
		return append(b, byte(id-ByteBase))
	case id >= 0 && id < len(tokenNames) && tokenNames[id] != "":
		if skipSpecial && isSpecial(id) {
			return b
		}
		return append(b, tokenNames[id]...)
	}
	return b
}

// chatMessage is one message of a chat prompt after parsing.
type chatMessage struct {
	role    string
	content string
	// toolCalls are an assistant message's tool_calls (read only with
	// Config.ToolCalls), rendered after its content in the model's markup.
	toolCalls []toolCall
}

// chatTemplate holds the options of one template rendering.
type chatTemplate struct {
	addGenerationPrompt  bool
	continueFinalMessage bool
	disableThinking      bool // enable_thinking=false on a reasoning model
	reasoningModel       bool
	// tools are the request's tools, one compact JSON line each, rendered
	// in a <tools> block at the end of the system message (one is added
	// in front when there is none); format is the model's call markup.
	tools  [][]byte
	format toolFormat
}

// applyChatTemplate renders messages into prompt ids:
//
//	BOS {IMStart role content IMEnd}... [IMStart Assistant [<think></think>]]
//
// With continueFinalMessage and a final assistant message, that message is
// left open (no IMEnd) and no generation prompt follows. The empty think
// block follows the generation prompt only for a reasoning model with
// thinking disabled, as Qwen3-style templates do. As they do too, a
// reasoning model's assistant message before the last user message is
// rendered without its reasoning: only what follows its last </think>,
// leading newlines trimmed (so the regenerated turns of a conversation,
// sent back as /generate's text, do not bring their thinking along).
func applyChatTemplate(msgs []chatMessage, t chatTemplate) []int {
	n := 1
	lastUser := -1
	for i, m := range msgs {
		n += 3 + len(m.content)
		if m.role == "user" {
			lastUser = i
		}
	}
	ids := make([]int, 0, n+4)
	ids = append(ids, BOSID)
	if len(t.tools) > 0 && (len(msgs) == 0 || msgs[0].role != "system") {
		ids = appendToolsBlock(append(ids, IMStartID, SystemID), t.tools, "")
		ids = append(ids, IMEndID)
	}
	calls := 0 // tool calls rendered so far (Kimi numbers them)
	for i, m := range msgs {
		ids = append(ids, IMStartID, roleTokens[m.role])
		if i == 0 && m.role == "system" && len(t.tools) > 0 {
			ids = append(appendToolsBlock(ids, t.tools, m.content), IMEndID)
			continue
		}
		content := m.content
		if t.reasoningModel && m.role == "assistant" && i < lastUser {
			if k := strings.LastIndex(content, tokenNames[ThinkEndID]); k >= 0 {
				content = strings.TrimLeft(content[k+len(tokenNames[ThinkEndID]):], "\n")
			}
		}
		ids = appendEncoded(ids, content)
		if len(m.toolCalls) > 0 {
			if content != "" {
				ids = append(ids, ByteBase+'\n', ByteBase+'\n')
			}
			ids = appendEncoded(ids, t.format.markup(m.toolCalls, calls))
			calls += len(m.toolCalls)
		}
		if t.continueFinalMessage && i == len(msgs)-1 && m.role == "assistant" {
			return ids
		}
		ids = append(ids, IMEndID)
	}
	if t.addGenerationPrompt {
		ids = append(ids, IMStartID, AssistantID)
		if t.reasoningModel && t.disableThinking {
			ids = append(ids, ThinkStartID, ThinkEndID)
		}
	}
	return ids
}

// endsWithGenerationPrompt reports whether prompt ends with the assistant
// generation prompt, which makes a reasoning model think first.
func endsWithGenerationPrompt(prompt []int) bool {
	n := len(prompt)
	return n >= 2 && prompt[n-2] == IMStartID && prompt[n-1] == AssistantID
}

// asksAnswer reports whether prompt ends with the assistant generation
// prompt, with or without the empty think block of disabled thinking.
func asksAnswer(prompt []int) bool {
	n := len(prompt)
	if n >= 2 && prompt[n-2] == ThinkStartID && prompt[n-1] == ThinkEndID {
		prompt = prompt[:n-2]
	}
	return endsWithGenerationPrompt(prompt)
}
