package ingest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"gendex/store"
)

// Errors Normalize returns for lines that cannot be indexed.
var (
	ErrNotObject = errors.New("line is not a JSON object")
	ErrNoID      = errors.New("line has no id (want a string or number in \"id\", or \"custom_id\", or a server's \"meta_info.id\" or \"request_id\"; or give --id PATH)")
)

// noIDAt is ErrNoID (errors.Is matches it) when an id path was given.
type noIDAt struct{ path []string }

func (e noIDAt) Error() string {
	return fmt.Sprintf("line has no id at %s (the --id path; want a non-empty string or a number there)", strings.Join(e.path, "."))
}

func (noIDAt) Is(target error) bool { return target == ErrNoID }

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
	status, statusCode, body, message           span
	promptDetails, completionDetails            span
	sentTS, finishedTS, typ, code               span
	object, requestID, output, stopReason       span
	inputTokens, outputTokens                   span
	turn, reason, detail                        span
	model, simulated, redo                      span
	// Speculative decoding: spec_verify_ct, and the accepted and proposed
	// draft counts under any of their names (SGLang's recent ones, its
	// earlier ones, a fork's; an object has one naming); turns (a
	// conversation's answers) and sglext may hold more of them.
	specVerify, specAccepted, specProposed, turns, ext span
}

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
	case "redo":
		f.redo = sp
	case "turns":
		f.turns = sp
	case "sglext":
		f.ext = sp
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

// answer reports whether the object holds an answer's parts where the
// built-in shapes keep them: a count, a usage object, choices, SGLang's
// meta_info or a finish reason.
func (f *fields) answer() bool {
	return f.completion.ok() || f.usage.ok() || f.choices.ok() || f.metaInfo.ok() || f.finish.ok() || f.outputIDs.ok()
}

// Normalize reads one JSONL line that belongs to stage and fills rec with
// what the index keeps; it returns the stage the record belongs in (a
// response line that reports a failed request goes to store.Errors).
// rec's location fields (File, Offset, Length, Line, Sum) are left alone.
// A count the line does not carry is store.Unknown, never 0. A prompt line
// without an id returns ErrNoID with the rest of rec filled in, and so
// does an answer with no id of its own (of a shape that carries none, or
// whose id is "" or null), which the indexer knows by its file and line.
//
// The id is "custom_id" when the line has one, else "id": a non-empty
// string, or a number kept as written (17, 1e2). A line of any stage but
// Prompts that has neither takes the server's request id, SGLang's
// "meta_info.id" or DashScope's "request_id", if it has one.
func Normalize(line []byte, stage store.Stage, rec *store.Record) (store.Stage, error) {
	st, info, err := normalize(line, stage, nil, rec)
	if err == nil && info.lineID {
		err = ErrNoID
	}
	return st, err
}

// lineInfo is what normalize tells the indexer beyond the record.
type lineInfo struct {
	// serverID names the field the id was taken from when it is a server's
	// request id ("meta_info.id", "request_id"), which no prompt carries.
	serverID string
	// chunk reports an OpenAI stream chunk ("object":
	// "chat.completion.chunk"): the lines of one id in one file are parts of
	// one response, to be merged into one record.
	chunk bool
	// model is the line's top-level "model" value as written (a JSON
	// string, or nil), and simulated its "simulated": true, for the
	// file's Makers.
	model     []byte
	simulated bool
	// redo is the line's "redo": true: an answer asked again (gen --redo)
	// that replaces the earlier answer of its id.
	redo bool
	// emptyID says the line's id is empty or null: an answer with no id
	// (known by its file and line, as lineID says).
	emptyID bool
	// countsOff says why the line's counts were made unknown: they state
	// a total no reading of them adds up to ("" when they do, or state
	// none).
	countsOff string
	// other says the line is of a shape read by other (a batch API's or a
	// local server's), form which; lineID that it has no id (it is known
	// by its file and line); partial that it is a stream's event before
	// the last.
	other, lineID, partial bool
	form                   form
}

// normalize is Normalize with the id read from path when path is not nil
// (with the same rule for its value, and no other place tried). An
// answer's finish reason is gendex's (store.FinishReason), whatever the
// word its shape writes.
func normalize(line []byte, stage store.Stage, path IDPath, rec *store.Record) (store.Stage, lineInfo, error) {
	var f fields
	return normalizeFields(line, stage, path, rec, &f)
}

// normalizeFields is normalize that also leaves in f the fields of the
// line's top-level object (when it is one), for ReadAnswer to read the
// rest of the line from without scanning it again.
func normalizeFields(line []byte, stage store.Stage, path IDPath, rec *store.Record, f *fields) (store.Stage, lineInfo, error) {
	st, info, err := readLine(line, stage, path, rec, f)
	if err == nil && (st == store.Raw || st == store.Turns) {
		rec.Finish = store.FinishReason(rec.Finish)
	}
	return st, info, err
}

// readLine is normalize, with the finish reason as the line writes it.
func readLine(line []byte, stage store.Stage, path IDPath, rec *store.Record, f *fields) (store.Stage, lineInfo, error) {
	var info lineInfo
	*rec = store.Record{
		File: rec.File, Offset: rec.Offset, Length: rec.Length, Line: rec.Line, Sum: rec.Sum,
		PromptTokens: store.Unknown, CompletionTokens: store.Unknown,
		CachedTokens: store.Unknown, ReasoningTokens: store.Unknown,
	}
	b := line
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		end, err := skipValue(b, i, 0)
		if err != nil {
			return stage, info, err
		}
		if j := skipSpace(b, end); j < len(b) {
			return stage, info, errAt(b, j, " after the value")
		}
		return stage, info, ErrNotObject
	}
	*f = fields{}
	var end int
	var err error
	var at span
	idPath := path.idPath()
	if idPath == nil {
		end, err = readObject(b, i, f)
	} else {
		end, at, err = readObjectKey(b, i, f, idPath[0])
	}
	if err != nil {
		return stage, info, err
	}
	if j := skipSpace(b, end); j < len(b) {
		return stage, info, errAt(b, j, " after the object")
	}

	meta, hasMeta := sub(b, f.metaInfo)
	var id string
	var ok bool
	if idPath != nil {
		id, ok = idOf(b, lookup(b, at, idPath[1:]))
	} else {
		id, ok = idOf(b, f.customID)
		if !ok {
			id, ok = idOf(b, f.id)
		}
		if !ok && stage != store.Prompts {
			if id, ok = idOf(b, meta.id); ok {
				info.serverID = "meta_info.id"
			} else if id, ok = idOf(b, f.requestID); ok {
				info.serverID = "request_id"
			}
		}
	}
	if !ok && stage != store.Prompts {
		switch {
		case idPath != nil:
			return stage, info, noIDAt{idPath}
		case stage != store.Raw:
			return stage, info, ErrNoID
		case path.fields(): // a shape the user described: known by its line
			info.lineID = true
		default:
			if st, ok := other(b, span{s: i, e: end}, rec, &info); ok {
				info.model, info.simulated = val(b, f.model), string(val(b, f.simulated)) == "true"
				return st, info, nil
			}
			if !f.noID(b) || !f.answer() {
				return stage, info, ErrNoID
			}
			// An answer whose id is "" or null has none: it is known by
			// its line, as the answers of a shape without ids are.
			info.lineID, info.emptyID = true, true
		}
	}
	rec.ID = id

	switch stage {
	case store.Prompts:
		rec.Shape = store.ShapePrompt
		if n, ok := arrayLen(b, f.inputIDs); ok {
			rec.PromptTokens = n
		}
		if !ok { // the caller may give it an id from its line number
			return stage, info, ErrNoID
		}
		return stage, info, nil
	case store.Tokenized:
		rec.Shape = store.ShapeTokenized
		if n, ok := arrayLen(b, f.inputIDs); ok {
			rec.PromptTokens = n
		}
		return stage, info, nil
	case store.Errors:
		errorRecord(b, f, rec)
		return store.Errors, info, nil
	case store.Excluded:
		rec.Shape = store.ShapeExcluded
		rec.Finish, rec.Message = str(b, f.reason), str(b, f.detail)
		if rec.Finish == "" {
			return stage, info, errors.New(`excluded line has no "reason"`)
		}
		return stage, info, nil
	case store.Turns:
		n, ok := decodeCount(val(b, f.turn))
		if !ok || n < 1 {
			return stage, info, errors.New(`turn line has no "turn" number (want 1 or more)`)
		}
		rec.ID = TurnID(rec.ID, int(n))
		// the counts are read below, as for any answer
	}

	// A response line. Batch output nests the response one level down, in
	// response.body; old vLLM run-batch output has the completion itself at
	// response (no status_code, no body).
	var body fields
	var bodyAt span // the object body was read from
	hasBody := false
	if rf, ok := sub(b, f.response); ok {
		if code, ok := decodeCount(val(b, rf.statusCode)); ok && code >= 400 {
			errorRecord(b, f, rec)
			if bf, ok := sub(b, rf.body); ok {
				if ef, ok := sub(b, bf.errorV); ok {
					rec.Message = str(b, ef.message)
				}
			}
			rec.Finish = "http " + strconv.FormatInt(code, 10)
			return store.Errors, info, nil
		}
		body, hasBody = sub(b, rf.body)
		bodyAt = rf.body
		if !rf.body.ok() && (rf.usage.ok() || rf.choices.ok()) {
			body, bodyAt, hasBody = rf, f.response, true
		}
	}
	top := span{s: i, e: end}
	if f.errorV.ok() && !isNull(b, f.errorV) && !hasBody && !f.completion.ok() && !f.metaInfo.ok() && !f.usage.ok() {
		errorRecord(b, f, rec)
		return store.Errors, info, nil
	}
	// A Responses API object (alone, or a Batch line's body) that failed
	// or was cancelled holds no answer.
	response, responseAt := responseOf(b, f, top, &body, bodyAt)
	if r := response; r != nil {
		if st := str(b, r.status); st == "failed" || st == "cancelled" {
			errorRecord(b, r, rec)
			if rec.Finish == "error" {
				rec.Finish = st
			}
			if rec.Message == "" {
				rec.Message = "the response's status is " + st
			}
			return store.Errors, info, nil
		}
	}

	usage, hasUsage := sub(b, f.usage)
	var bodyUsage fields
	hasBodyUsage := false
	if hasBody {
		bodyUsage, hasBodyUsage = sub(b, body.usage)
	}

	// Counts: each from the first source that has it, in this order.
	// A usage object may name them input_tokens and output_tokens
	// (DashScope, Anthropic), after the OpenAI names.
	type source struct {
		f     *fields
		at    span // the object f was read from
		ok    bool
		shape store.Shape
		usage bool
	}
	sources := [...]source{
		{f, top, true, store.ShapeFlat, false},
		{&meta, f.metaInfo, hasMeta, store.ShapeSGLang, false},
		{&usage, f.usage, hasUsage, store.ShapeOpenAI, true},
		{&bodyUsage, body.usage, hasBodyUsage, store.ShapeBatch, true},
	}
	var counted span // the usage object the completion count came from
	for _, s := range sources {
		if !s.ok {
			continue
		}
		if rec.CompletionTokens < 0 {
			n, ok := decodeCount(val(b, s.f.completion))
			if !ok && s.usage {
				n, ok = decodeCount(val(b, s.f.outputTokens))
			}
			if ok {
				rec.CompletionTokens = n
				rec.Shape = s.shape
				if s.usage {
					counted = s.at
				}
			} else if s.usage && otherUsage(b, s.at, rec) {
				rec.Shape = s.shape
			}
		}
		known(b, &rec.PromptTokens, s.f.prompt)
		if s.usage {
			known(b, &rec.PromptTokens, s.f.inputTokens)
		}
		known(b, &rec.CachedTokens, s.f.cached)
		if rec.CachedTokens < 0 && s.f.promptDetails.ok() {
			d, _ := sub(b, s.f.promptDetails)
			known(b, &rec.CachedTokens, d.cached)
		}
		known(b, &rec.ReasoningTokens, s.f.reasoning)
		if rec.ReasoningTokens < 0 && s.f.completionDetails.ok() {
			d, _ := sub(b, s.f.completionDetails)
			known(b, &rec.ReasoningTokens, d.reasoning)
		}
		if s.usage && s.f.outputTokens.ok() { // the Responses API's names
			known(b, &rec.CachedTokens, get(b, get(b, s.at, "input_tokens_details"), "cached_tokens"))
			known(b, &rec.ReasoningTokens, get(b, get(b, s.at, "output_tokens_details"), "reasoning_tokens"))
		}
	}
	if counted.ok() {
		if t, ok := decodeCount(val(b, get(b, counted, "total_tokens"))); ok {
			info.countsOff = reconcile(rec, t)
		}
	}
	if rec.CompletionTokens < 0 {
		if n, ok := arrayLen(b, f.outputIDs); ok {
			rec.CompletionTokens = n
			rec.Shape = store.ShapeIDsOnly
		}
	}
	// No count anywhere (every count above sets the shape with it): the
	// shape is the envelope's.
	if rec.Shape == store.ShapeUnknown {
		switch {
		case hasMeta:
			rec.Shape = store.ShapeSGLang
		case hasUsage:
			rec.Shape = store.ShapeOpenAI
		case hasBody:
			rec.Shape = store.ShapeBatch
		}
	}

	// Finish reason: flat string, SGLang object, the first choice's,
	// DashScope's output.finish_reason, or Anthropic's stop_reason.
	rec.Finish = finishOf(b, f.finish)
	if rec.Finish == "" && hasMeta {
		rec.Finish = finishOf(b, meta.finish)
	}
	if rec.Finish == "" {
		rec.Finish = firstChoiceFinish(b, f.choices)
	}
	if rec.Finish == "" && hasBody {
		rec.Finish = firstChoiceFinish(b, body.choices)
	}
	if rec.Finish == "" && f.output.ok() {
		if o, ok := sub(b, f.output); ok {
			rec.Finish = finishOf(b, o.finish)
		}
	}
	if rec.Finish == "" {
		rec.Finish = str(b, f.stopReason)
	}
	if rec.Finish == "" && response != nil {
		rec.Finish = responseFinish(b, response, responseAt)
	}
	info.chunk = string(val(b, f.object)) == `"chat.completion.chunk"`
	info.model, info.simulated = val(b, f.model), string(val(b, f.simulated)) == "true"
	info.redo = string(val(b, f.redo)) == "true"
	specCounts(b, f, &meta, hasMeta, rec)
	if stage == store.Raw {
		if path.fields() {
			if path.apply(b, span{s: i, e: end}, rec) {
				return store.Errors, info, nil
			}
		} else if rec.Shape == store.ShapeUnknown {
			// No count and no envelope of a built-in shape: one of the
			// others, or none.
			if st, ok := other(b, span{s: i, e: end}, rec, &info); ok {
				return st, info, nil
			}
		}
	}

	// The record's own time.
	if t, ok := rfc3339(b, f.finishedAt); ok {
		rec.Time = t
	} else if t, ok := unixSeconds(b, meta.sentTS); hasMeta && ok {
		rec.Time = t
	} else if t, ok := unixSeconds(b, meta.finishedTS); hasMeta && ok {
		rec.Time = t
	} else if t, ok := unixSeconds(b, f.created); ok {
		rec.Time = t
	} else if t, ok := unixSeconds(b, body.created); hasBody && ok {
		rec.Time = t
	} else if t, ok := unixSeconds(b, get(b, responseAt, "created_at")); response != nil && ok { // the Responses API's
		rec.Time = t
	}
	rec.OwnTime = rec.Time != 0
	if stage == store.Turns {
		return store.Turns, info, nil
	}
	return store.Raw, info, nil
}

// TurnID is the key of one turn of a multi-turn conversation in the turns
// stage: the conversation's id, '#' and the turn's number (from 1). The
// number is always last, so two conversations never share a key.
func TurnID(id string, turn int) string { return id + "#" + strconv.Itoa(turn) }
