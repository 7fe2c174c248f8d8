package ingest

import (
	"strconv"

	"gendex/store"
)

// The rules for a response line of a shape not seen before, where no row
// of the table of shapes (shapes.go) decides: what makes a line an answer,
// what makes it an error, and where a count may also be. Each is a rule of
// the line's structure, not a list of the tools that write it.

// isAnswer is the rule of what makes a line an answer: it holds a reply
// where replies are kept, that is
//
//   - an envelope of one: choices (a list of them, or null), a usage
//     object or SGLang's meta_info object; or
//   - a reply's text at its top level (text, content or a message) with
//     something said of that reply there: its count, its token ids or why
//     it ended (completion_tokens, output_ids, finish_reason, stop_reason).
//
// A count alone is none (a benchmark's summary line states a total over a
// whole run), and so is a text alone (a log line that quotes a reply).
// An answer with no id is known by its file and line.
func (f *fields) isAnswer(b []byte) bool {
	if f.choices.ok() || isObject(b, f.usage) || isObject(b, f.metaInfo) {
		return true
	}
	text := isString(b, f.text) || f.content.ok() && !isNull(b, f.content) || isObject(b, f.message)
	said := f.completion.ok() || f.outputIDs.ok() || f.finish.ok() && !isNull(b, f.finish) || f.stopReason.ok() && !isNull(b, f.stopReason)
	return text && said
}

// noReply says the line holds no reply: its choices are absent, null or
// an empty list, and it states no count above 0.
func noReply(b []byte, f *fields, rec *store.Record) bool {
	if rec.CompletionTokens > 0 {
		return false
	}
	c := f.choices
	return !c.ok() || isNull(b, c) || b[c.s] == '[' && b[skipSpace(b, c.s+1)] == ']'
}

// statusFields are the keys a body reports its own status in: a numeric
// code and a message.
type statusFields struct{ code, message span }

func (s *statusFields) set(b []byte, key []byte, sp span) {
	switch string(key) {
	case "status_code", "code", "error_code", "status":
		if _, ok := decodeCount(val(b, sp)); ok {
			s.code = sp
		}
	case "message", "msg", "status_msg", "error_msg", "errmsg":
		if isString(b, sp) {
			s.message = sp
		}
	}
}

// failedStatus is the rule of what makes a line that holds no reply
// (noReply) an error although it came with HTTP 200: an object of its own
// status, the line itself or an object directly in it, with a numeric
// code that is neither 0 nor of the 2xx (success) and a message that is
// not empty. It fills rec as the error: the message, and as its finish
// "http N" for an HTTP status (400-599), else "code N".
func failedStatus(b []byte, top span, rec *store.Record) bool {
	var found statusFields
	check := func(sp span) bool {
		var s statusFields
		_, _ = eachField(b, sp.s, 1, func(k []byte, escaped bool, vs, ve, n int) error {
			if escaped {
				k = []byte(decodeKey(k, true))
			}
			s.set(b, k, span{vs, ve, n})
			return nil
		})
		code, ok := decodeCount(val(b, s.code))
		if !ok || code == 0 || code >= 200 && code < 300 || str(b, s.message) == "" {
			return false
		}
		found = s
		return true
	}
	if !check(top) {
		hit := false
		_, _ = eachField(b, top.s, 1, func(_ []byte, _ bool, vs, ve, n int) error {
			if !hit && b[vs] == '{' {
				hit = check(span{vs, ve, n})
			}
			return nil
		})
		if !hit {
			return false
		}
	}
	code, _ := decodeCount(val(b, found.code))
	*rec = store.Record{File: rec.File, Offset: rec.Offset, Length: rec.Length, Line: rec.Line, Sum: rec.Sum, ID: rec.ID,
		PromptTokens: store.Unknown, CompletionTokens: store.Unknown, CachedTokens: store.Unknown, ReasoningTokens: store.Unknown,
		Shape: store.ShapeError, Message: str(b, found.message)}
	if code >= 400 && code < 600 {
		rec.Finish = "http " + strconv.FormatInt(code, 10)
	} else {
		rec.Finish = "code " + strconv.FormatInt(code, 10)
	}
	return true
}

// choiceUsage is the rule of where else a count may be: a usage object
// inside a choice (the first that has one), as some providers' final
// stream chunks carry it, is the line's usage when it has none of its own.
func choiceUsage(b []byte, choices span) span {
	var at span
	if !choices.ok() || b[choices.s] != '[' {
		return at
	}
	eachElement(b, choices, func(e span) bool {
		if u := get(b, e, "usage"); isObject(b, u) {
			at = u
			return false
		}
		return true
	})
	return at
}
