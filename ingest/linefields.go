package ingest

// The fields of a line that the normalizer reads: one span per key it
// knows, collected in one scan of an object, and the lookups of the
// objects nested in it.

// span is a value's bytes; e == 0 means absent. n is, for an array read
// by readObject, 1 + its length (0: not counted).
type span struct{ s, e, n int }

func (sp span) ok() bool { return sp.e > sp.s }

// fields are the spans of the keys the normalizer reads, from one object.
type fields struct {
	id, customID                                span
	completion, prompt, cached, reasoning       span
	finish, finishedAt, created                 span
	metaInfo, usage, choices, response, errorV  span
	outputIDs, inputIDs, text, messages, convos span
	promptIDs, content, reasoningContent        span // for ReadAnswer
	toolCalls                                   span // for ReadAnswer
	delta                                       span // a stream event's piece of an answer
	errorNamed                                  span // another key named as an error (response_errors), that holds one
	status, statusCode, body, message           span
	promptDetails, completionDetails            span
	sentTS, finishedTS, typ, code               span
	object, requestID, output, stopReason       span
	inputTokens, outputTokens                   span
	turn, reason, detail, excludedAt            span
	model, simulated, redo, provenance          span
	toolStop                                    span // gen's "tool_stop" {"reason", "step", "detail"}
	answerSum                                   span // a record's or exclusion's answer (answersum.go)
	sample, samples                             span // a unit's sample and its prompt's count (sample.go)
	// Speculative decoding: spec_verify_ct, and the accepted and proposed
	// draft counts under any of their names (SGLang's recent ones, its
	// earlier ones, a fork's; an object has one naming); turns (a
	// conversation's answers) and sglext may hold more of them.
	specVerify, specAccepted, specProposed, turns, ext span
}

// set keeps sp as the value of the top-level key, when it is one the
// readers read. It must be one piece: one switch over every key is one
// comparison tree, on the path of every key of every line; split, a key
// would go through several.
func (f *fields) set(key []byte, sp span) {
	switch string(key) { // no allocation: the compiler turns this into a comparison
	case "id":
		f.id = sp
	case "custom_id":
		f.customID = sp
	case "completion_tokens":
		f.completion = sp
	case "prompt_tokens":
		f.prompt = sp
	case "cached_tokens":
		f.cached = sp
	case "reasoning_tokens":
		f.reasoning = sp
	case "finish_reason":
		f.finish = sp
	case "finished_at":
		f.finishedAt = sp
	case "created":
		f.created = sp
	case "meta_info":
		f.metaInfo = sp
	case "usage":
		f.usage = sp
	case "choices":
		f.choices = sp
	case "response":
		f.response = sp
	case "error":
		f.errorV = sp
	case "output_ids":
		f.outputIDs = sp
	case "input_ids":
		f.inputIDs = sp
	case "prompt_ids":
		f.promptIDs = sp
	case "content":
		f.content = sp
	case "reasoning_content":
		f.reasoningContent = sp
	case "tool_calls":
		f.toolCalls = sp
	case "delta":
		f.delta = sp
	case "text":
		f.text = sp
	case "messages":
		f.messages = sp
	case "conversations":
		f.convos = sp
	case "status":
		f.status = sp
	case "status_code":
		f.statusCode = sp
	case "body":
		f.body = sp
	case "message":
		f.message = sp
	case "prompt_tokens_details":
		f.promptDetails = sp
	case "completion_tokens_details":
		f.completionDetails = sp
	case "response_sent_to_client_ts":
		f.sentTS = sp
	case "request_finished_ts":
		f.finishedTS = sp
	case "type":
		f.typ = sp
	case "code":
		f.code = sp
	case "object":
		f.object = sp
	case "request_id":
		f.requestID = sp
	case "output":
		f.output = sp
	case "stop_reason":
		f.stopReason = sp
	case "input_tokens":
		f.inputTokens = sp
	case "output_tokens":
		f.outputTokens = sp
	case "turn":
		f.turn = sp
	case "reason":
		f.reason = sp
	case "detail":
		f.detail = sp
	case "excluded_at":
		f.excludedAt = sp
	case "spec_verify_ct":
		f.specVerify = sp
	case "spec_accepted_drafts", "spec_accept_token_num", "spec_num_correct_drafts":
		f.specAccepted = sp
	case "spec_proposed_drafts", "spec_draft_token_num", "spec_num_proposed_drafts":
		f.specProposed = sp
	case "model":
		f.model = sp
	case "simulated":
		f.simulated = sp
	case "provenance":
		f.provenance = sp
	case "redo":
		f.redo = sp
	case "tool_stop":
		f.toolStop = sp
	case AnswerSumKey:
		f.answerSum = sp
	case "turns":
		f.turns = sp
	case "sample":
		f.sample = sp
	case "samples":
		f.samples = sp
	case "sglext":
		f.ext = sp
	default:
		if !f.errorNamed.ok() && hasErrorWord(key) {
			f.errorNamed = sp
		}
	}
}

// readObject collects the fields of the object at b[i] (b[i] must be '{')
// and returns the object's end.
func readObject(b []byte, i int, f *fields) (int, error) {
	return eachField(b, i, 1, func(key []byte, escaped bool, vs, ve, n int) error {
		if escaped {
			f.set([]byte(decodeKey(key, true)), span{vs, ve, n})
		} else {
			f.set(key, span{vs, ve, n})
		}
		return nil
	})
}

// readObjectKey is readObject that also returns the span of key's value
// (the last one, as for every field), for an id path's first key.
func readObjectKey(b []byte, i int, f *fields, key string) (int, span, error) {
	var at span
	end, err := eachField(b, i, 1, func(k []byte, escaped bool, vs, ve, n int) error {
		if escaped {
			k = []byte(decodeKey(k, true))
		}
		f.set(k, span{vs, ve, n})
		if string(k) == key {
			at = span{vs, ve, n}
		}
		return nil
	})
	return end, at, err
}

// lookup follows rest from the value at sp, one object key at a time, and
// returns the span of the value it names (absent when a key is missing or
// a value on the way is not an object). The line was validated already.
func lookup(b []byte, sp span, rest []string) span {
	for _, key := range rest {
		if !sp.ok() || b[sp.s] != '{' {
			return span{}
		}
		var at span
		_, _ = eachField(b, sp.s, 1, func(k []byte, escaped bool, vs, ve, n int) error {
			if escaped {
				k = []byte(decodeKey(k, true))
			}
			if string(k) == key {
				at = span{vs, ve, n}
			}
			return nil
		})
		sp = at
	}
	return sp
}

// sub reads the object spanned by sp (if it is one) into a fresh fields.
func sub(b []byte, sp span) (fields, bool) {
	var f fields
	if !sp.ok() || b[sp.s] != '{' {
		return f, false
	}
	// The outer scan validated it; errors cannot happen here.
	_, _ = readObject(b, sp.s, &f)
	return f, true
}

func isNull(b []byte, sp span) bool { return sp.ok() && b[sp.s] == 'n' }

// noID reports whether the object names an id, in "custom_id" or "id",
// that is no id: "" or null (a Hugging Face TGI chat answer's "id": "").
func (f *fields) noID(b []byte) bool {
	empty := func(sp span) bool { return isNull(b, sp) || string(val(b, sp)) == `""` }
	return empty(f.customID) || empty(f.id)
}

// hasErrorWord says key may be named as an error: it holds "rror" (error,
// errors, Error, response_errors). A cheap look, on every key no case
// names; isErrorName decides.
func hasErrorWord(key []byte) bool {
	for i := 0; i+4 <= len(key); i++ {
		if key[i] == 'r' && key[i+1] == 'r' && key[i+2] == 'o' && key[i+3] == 'r' {
			return true
		}
	}
	return false
}
