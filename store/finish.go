package store

import "strings"

// The finish reasons an answer's Record.Finish holds: each provider's own
// word for one of these (Anthropic's "max_tokens", Gemini's "MAX_TOKENS",
// llama.cpp's "limit", the Responses API's "max_output_tokens", Cohere's
// "COMPLETE", ...) is mapped onto it when the line is read
// (FinishReason); a word with no mapping is kept as written.
const (
	FinishStop      = "stop"           // the model ended the answer, or a stop sequence did
	FinishLength    = "length"         // the token limit (or the context) cut it off
	FinishToolCalls = "tool_calls"     // the model called a tool
	FinishFilter    = "content_filter" // a safety or content filter ended it
)

// finishWords maps the providers' words, lower-cased, onto gendex's.
var finishWords = map[string]string{
	"stop": FinishStop, "end_turn": FinishStop, "stop_sequence": FinishStop, "eos": FinishStop,
	"eos_token": FinishStop, "word": FinishStop, "finish": FinishStop, "complete": FinishStop,
	"completed": FinishStop, "stop_criteria_met": FinishStop,

	"length": FinishLength, "max_tokens": FinishLength, "max_output_tokens": FinishLength,
	"limit": FinishLength, "model_length": FinishLength, "max_length": FinishLength,

	"tool_calls": FinishToolCalls, "tool_call": FinishToolCalls, "tool_use": FinishToolCalls,
	"function_call": FinishToolCalls,

	"content_filter": FinishFilter, "content_filtered": FinishFilter, "safety": FinishFilter,
	"recitation": FinishFilter, "blocklist": FinishFilter, "prohibited_content": FinishFilter,
	"spii": FinishFilter, "guardrail_intervened": FinishFilter, "refusal": FinishFilter,
}

// FinishReason maps a finish reason as a provider wrote it onto gendex's
// (FinishStop, FinishLength, ...); one it does not know is returned as
// written, never dropped.
func FinishReason(written string) string {
	switch written {
	case "", FinishStop, FinishLength: // the common cases, without a lookup
		return written
	}
	if r, ok := finishWords[written]; ok {
		return r
	}
	if r, ok := finishWords[strings.ToLower(written)]; ok {
		return r
	}
	return written
}

// Truncated reports whether a finish reason, as written or mapped, says
// the token limit cut the answer off.
func Truncated(finish string) bool { return FinishReason(finish) == FinishLength }

// Finishes is s.Finish with every reason mapped by FinishReason (an index
// written before the mapping holds the providers' words), so a reason is
// counted once whichever word its records were indexed with.
func (s *Stats) Finishes() map[string]uint64 {
	var out map[string]uint64
	for k, n := range s.Finish {
		if out == nil {
			out = make(map[string]uint64, len(s.Finish))
		}
		out[FinishReason(k)] += n
	}
	return out
}

// TruncatedCount is the number of records whose finish reason is
// FinishLength, under any provider's word for it.
func (s *Stats) TruncatedCount() uint64 {
	var n uint64
	for k, c := range s.Finish {
		if Truncated(k) {
			n += c
		}
	}
	return n
}

// Truncated is the number of the dataset's answers cut at the token limit
// (Stats.TruncatedCount of its raw stage).
func (s Summary) Truncated() uint64 {
	r := s.Stage(Raw)
	return r.TruncatedCount()
}
