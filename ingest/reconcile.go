package ingest

import (
	"fmt"

	"gendex/store"
)

// reconcile makes rec's counts the reading of them that adds up to the
// total its line states: the reasoning tokens inside the completion count
// (OpenAI's and DeepSeek's way) or beside it (then the completion count
// takes them: gendex counts every token generated), the cached tokens
// inside the prompt count or beside it (then the prompt takes them). When
// no reading adds up, the prompt, completion and reasoning counts are
// unknown and the returned text says why; "" when one does, or when the
// prompt or completion count is unknown (nothing to check).
func reconcile(rec *store.Record, total int64) string {
	p, c := rec.PromptTokens, rec.CompletionTokens
	if p < 0 || c < 0 {
		return ""
	}
	r, ca := max(rec.ReasoningTokens, 0), max(rec.CachedTokens, 0)
	switch {
	case p+c == total && r <= c:
		return ""
	case r > 0 && p+c+r == total:
		rec.CompletionTokens = c + r
		return ""
	case ca > 0 && p+ca+c == total && r <= c:
		rec.PromptTokens = p + ca
		return ""
	case ca > 0 && r > 0 && p+ca+c+r == total:
		rec.PromptTokens, rec.CompletionTokens = p+ca, c+r
		return ""
	}
	msg := fmt.Sprintf("prompt %d + completion %d", p, c)
	if r > 0 {
		msg += fmt.Sprintf(" (+ reasoning %d)", r)
	}
	if ca > 0 {
		msg += fmt.Sprintf(" (+ cached %d)", ca)
	}
	rec.PromptTokens, rec.CompletionTokens, rec.ReasoningTokens = store.Unknown, store.Unknown, store.Unknown
	return fmt.Sprintf("%s is not the total %d the line states, however its counts are read", msg, total)
}

// responseOf returns the Responses API object of a line, and its span:
// the line itself (top), or its Batch body; nil when it has none.
func responseOf(b []byte, top *fields, topAt span, body *fields, bodyAt span) (*fields, span) {
	switch {
	case isResponse(b, top):
		return top, topAt
	case isResponse(b, body):
		return body, bodyAt
	}
	return nil, span{}
}

// isResponse reports whether fl is a Responses API object: its "object"
// says so, or it has a status string beside a list of output items
// (objects with a "type"; a list of strings beside a status is another
// tool's answer and its lifecycle).
func isResponse(b []byte, fl *fields) bool {
	if !isString(b, fl.status) {
		return false
	}
	if string(val(b, fl.object)) == `"response"` {
		return true
	}
	items := false
	eachElement(b, fl.output, func(e span) bool {
		items = isObject(b, e) && get(b, e, "type").ok()
		return false
	})
	return items
}

// responseFinish is a Responses API object's finish reason: stop for a
// "completed" one, an incomplete one's incomplete_details.reason ("max_output_tokens",
// "content_filter"), or its status as written.
func responseFinish(b []byte, fl *fields, at span) string {
	switch st := str(b, fl.status); st {
	case "completed": // the generation ended by itself (not a lifecycle word here: notAFinish)
		return store.FinishStop
	case "incomplete":
		if r := str(b, get(b, get(b, at, "incomplete_details"), "reason")); r != "" {
			return r
		}
		return st
	default:
		return st
	}
}

// otherUsage reads the counts a usage object keeps under names of its
// own: Cohere's usage.tokens, else its usage.billed_units (each with
// input_tokens and output_tokens). It reports whether it found a
// completion count.
func otherUsage(b []byte, u span, rec *store.Record) bool {
	for _, key := range [...]string{"tokens", "billed_units"} {
		t, ok := sub(b, get(b, u, key))
		if !ok {
			continue
		}
		if n, ok := decodeCount(val(b, t.outputTokens)); ok {
			rec.CompletionTokens = n
			known(b, &rec.PromptTokens, t.inputTokens)
			return true
		}
	}
	return false
}
