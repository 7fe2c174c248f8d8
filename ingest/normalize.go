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
	// provenance is the line's "provenance" object as written (gen's: the
	// sampling it sent and the server that answered), or nil.
	provenance []byte
	// redo is the line's "redo": true: an answer asked again (gen --redo)
	// that replaces the earlier answer of its id.
	redo bool
	// emptyID says the line's id is empty or null: an answer with no id
	// (known by its file and line, as lineID says).
	emptyID bool
	// nested is where the line's answer is when it is nested in the line
	// (findNested), for ReadAnswer; nestedPath names it.
	nested     span
	nestedPath string
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
		rec.Finish = answerFinish(rec.Finish)
	}
	return st, info, err
}

// answerFinish is gendex's finish reason for an answer's as its line
// writes it (store.FinishReason); a request's lifecycle written there
// (notAFinish) is none.
func answerFinish(written string) string {
	switch written {
	case "", store.FinishStop, store.FinishLength: // the common cases, without a lookup
		return written
	}
	if notAFinish(written) {
		return ""
	}
	return store.FinishReason(written)
}

// readLine is normalize, with the finish reason as the line writes it. It
// reads the line's top-level object in one scan, tells its shape from the
// keys found (kindOf) and reads it with that shape's reader alone (the
// table lineShapes, lineshape.go).
func readLine(line []byte, stage store.Stage, path IDPath, rec *store.Record, f *fields) (store.Stage, lineInfo, error) {
	var info lineInfo
	*rec = store.Record{
		File: rec.File, Offset: rec.Offset, Length: rec.Length, Line: rec.Line, Sum: rec.Sum,
		PromptTokens: store.Unknown, CompletionTokens: store.Unknown,
		CachedTokens: store.Unknown, ReasoningTokens: store.Unknown,
	}
	top, at, err := readTop(line, f, path.idPath())
	if err == ErrNotObject && stage == store.Raw {
		top, at, err = readOnly(line, f, path.idPath())
	}
	if err != nil {
		return stage, info, err
	}
	st, err := kindOf(line, f, stage, path).read(line, top, at, stage, path, rec, f, &info)
	return st, info, err
}

// readAny is the reader of a line of any shape (the table's last row): in
// its steps, each below: the id, what the stage keeps, a failed request,
// the counts, the finish reason, a shape of other's or the user's, and the
// record's own time. triedOther says other found none of its shapes in
// the line already.
func readAny(b []byte, top, at span, stage store.Stage, path IDPath, rec *store.Record, f *fields, info *lineInfo, triedOther bool) (store.Stage, error) {
	l := lineScan{f: f, top: top, triedOther: triedOther}
	var nested nestedFind
	idPath := path.idPath()
	l.meta, l.hasMeta = sub(b, f.metaInfo)
	id, ok := l.id(b, stage, idPath, at, info)
	if !ok && stage != store.Prompts {
		if st, done, err := l.withoutID(b, stage, path, idPath, rec, info, &nested); done {
			return st, err
		}
	}
	rec.ID = id
	if st, done, err := stageRecord(b, f, stage, ok, rec); done {
		return st, err
	}
	if l.failed(b, rec) {
		return store.Errors, nil
	}
	info.countsOff = l.counts(b, rec)
	if stage == store.Raw && !path.fields() && (noReply(b, f, rec) && failedStatus(b, l.top, rec) || failedByName(b, l.top, f, rec)) {
		return store.Errors, nil
	}
	rec.Finish = l.finishReason(b)
	if stage == store.Raw {
		rec.ToolStop = toolStopReason(b, f.toolStop)
	}
	info.chunk = string(val(b, f.object)) == `"chat.completion.chunk"`
	info.model, info.simulated, info.provenance = val(b, f.model), string(val(b, f.simulated)) == "true", val(b, f.provenance)
	info.redo = string(val(b, f.redo)) == "true"
	specCounts(b, f, &l.meta, l.hasMeta, rec)
	if stage == store.Raw {
		if path.fields() {
			if path.apply(b, l.top, rec) {
				return store.Errors, nil
			}
		} else if rec.Shape == store.ShapeUnknown && !triedOther {
			// No count and no envelope of a built-in shape: one of the
			// others, or none.
			if st, ok := other(b, l.top, rec, info); ok {
				return st, nil
			}
		}
		if !path.fields() && rec.Shape == store.ShapeUnknown {
			if st, done := l.byName(b, rec, info, &nested); done {
				return st, nil
			}
		}
	}
	if t, ok := l.ownTime(b); ok {
		rec.Time = t
	}
	rec.OwnTime = rec.Time != 0
	if stage == store.Turns {
		return store.Turns, nil
	}
	return store.Raw, nil
}

// A lineScan is one line being read by readAny: its top-level object's
// fields and span, and the objects found in them. (The line's bytes are
// each method's b: kept here, they would take f to the heap with them.)
type lineScan struct {
	f   *fields // the top-level object's
	top span    // the top-level object
	// meta is SGLang's meta_info.
	meta    fields
	hasMeta bool
	// body is the answer a Batch line nests in response.body (or old vLLM
	// run-batch output at response), read from bodyAt.
	body    fields
	bodyAt  span
	hasBody bool
	// hasResponse says the line holds a Responses API object, read from
	// responseAt: the line itself (responseTop) or its Batch body. (Not a
	// pointer: l would then point into itself and escape to the heap.)
	hasResponse, responseTop bool
	responseAt               span
	// usage is the top-level usage object.
	usage    fields
	hasUsage bool
	// triedOther says other found none of its shapes in the line.
	triedOther bool
	// names is what the names of the top-level keys say, read once
	// (hasNames). (The line's nested answer is readAny's nested: it holds a
	// string, which would take f to the heap with it.)
	names    topNames
	hasNames bool
}

// responseFields is the fields of the line's Responses API object.
func (l *lineScan) responseFields() *fields {
	if l.responseTop {
		return l.f
	}
	return &l.body
}

// readTop reads the line's top-level object into f, and returns its span
// and the span of idPath's first key's value (when idPath is given). A
// line that is one valid value but no object is ErrNotObject.
func readTop(b []byte, f *fields, idPath []string) (top, at span, err error) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		end, err := skipValue(b, i, 0)
		if err != nil {
			return top, at, err
		}
		if j := skipSpace(b, end); j < len(b) {
			return top, at, errAt(b, j, " after the value")
		}
		return top, at, ErrNotObject
	}
	*f = fields{}
	var end int
	if idPath == nil {
		end, err = readObject(b, i, f)
	} else {
		end, at, err = readObjectKey(b, i, f, idPath[0])
	}
	if err != nil {
		return top, at, err
	}
	if j := skipSpace(b, end); j < len(b) {
		return top, at, errAt(b, j, " after the object")
	}
	return span{s: i, e: end}, at, nil
}

// id is the line's id: at idPath when one is given (at is its first key's
// value), else custom_id, id, or (but for a prompt) the server's request
// id, which info.serverID then names.
func (l *lineScan) id(b []byte, stage store.Stage, idPath []string, at span, info *lineInfo) (string, bool) {
	f := l.f
	if idPath != nil {
		return idOf(b, lookup(b, at, idPath[1:]))
	}
	id, ok := idOf(b, f.customID)
	if !ok {
		id, ok = idOf(b, f.id)
	}
	if !ok && stage != store.Prompts {
		if id, ok = idOf(b, l.meta.id); ok {
			info.serverID = "meta_info.id"
		} else if id, ok = idOf(b, f.requestID); ok {
			info.serverID = "request_id"
		}
	}
	return id, ok
}

// withoutID decides what becomes of a line of a stage but Prompts that has
// no id: an error, a record known by its line (info.lineID), or a line of
// other's shapes, read whole (done, with its stage).
func (l *lineScan) withoutID(b []byte, stage store.Stage, path IDPath, idPath []string, rec *store.Record, info *lineInfo, nested *nestedFind) (st store.Stage, done bool, err error) {
	f := l.f
	switch {
	case idPath != nil:
		return stage, true, noIDAt{idPath}
	case stage != store.Raw:
		return stage, true, ErrNoID
	case path.fields(): // a shape the user described: known by its line
		info.lineID = true
	default:
		if !l.triedOther {
			if st, ok := other(b, l.top, rec, info); ok {
				info.model, info.simulated, info.provenance = val(b, f.model), string(val(b, f.simulated)) == "true", val(b, f.provenance)
				return st, true, nil
			}
		}
		// An answer with no id (none at a known place, or "" or null) is
		// known by its line, as the answers of a shape without ids are;
		// so is a body that reports its request failed. A stream's event
		// is none: with no id to merge it by, it is a piece of an answer.
		if isStreamEvent(b, f) || !l.answerLike(b, nested) && !(noReply(b, f, rec) && failedStatus(b, l.top, rec)) {
			return stage, true, ErrNoID
		}
		info.lineID, info.emptyID = true, f.noID(b)
	}
	return stage, false, nil
}

// stageRecord fills what a line of a stage that is no answer keeps
// (prompts, tokenized prompts, errors, exclusions) and is done; a turn
// gets its key and is read on as an answer; a line of any stage but
// prompts that names its sample is keyed by its unit (unitOf). hasID says the line has an
// id of its own.
func stageRecord(b []byte, f *fields, stage store.Stage, hasID bool, rec *store.Record) (st store.Stage, done bool, err error) {
	if hasID && stage != store.Prompts {
		unitOf(b, f, rec) // a sample's answer is its unit's
	}
	switch stage {
	case store.Prompts:
		rec.Shape = store.ShapePrompt
		if n, ok := arrayLen(b, f.inputIDs); ok {
			rec.PromptTokens = n
		}
		if !hasID { // the caller may give it an id from its line number
			return stage, true, ErrNoID
		}
		return stage, true, nil
	case store.Tokenized:
		rec.Shape = store.ShapeTokenized
		if n, ok := arrayLen(b, f.inputIDs); ok {
			rec.PromptTokens = n
		}
		rec.From, rec.HasFrom = ParseAnswerSum(val(b, f.answerSum))
		return stage, true, nil
	case store.Errors:
		errorRecord(b, f, rec)
		return store.Errors, true, nil
	case store.Excluded:
		rec.Shape = store.ShapeExcluded
		rec.Finish, rec.Message = str(b, f.reason), str(b, f.detail)
		if rec.Finish == "" {
			return stage, true, errors.New(`excluded line has no "reason"`)
		}
		if t, ok := rfc3339(b, f.excludedAt); ok { // so an index tells one made before its answer (store.Tx.Add)
			rec.Time, rec.OwnTime = t, true
		}
		rec.From, rec.HasFrom = ParseAnswerSum(val(b, f.answerSum))
		return stage, true, nil
	case store.Turns:
		n, ok := decodeCount(val(b, f.turn))
		if !ok || n < 1 {
			return stage, true, errors.New(`turn line has no "turn" number (want 1 or more)`)
		}
		rec.ID = TurnID(rec.ID, int(n))
		// the counts are read next, as for any answer
	}
	return stage, false, nil
}

// failed reads a response line's envelopes (a Batch line's response and
// its body, a Responses API object) into l and reports whether the line
// is a failed request, rec then filled as its error.
func (l *lineScan) failed(b []byte, rec *store.Record) bool {
	f := l.f
	// Batch output nests the response one level down, in response.body;
	// old vLLM run-batch output has the completion itself at response (no
	// status_code, no body).
	if rf, ok := sub(b, f.response); ok {
		if code, ok := decodeCount(val(b, rf.statusCode)); ok && code >= 400 {
			errorRecord(b, f, rec)
			if bf, ok := sub(b, rf.body); ok {
				if ef, ok := sub(b, bf.errorV); ok {
					rec.Message = str(b, ef.message)
				}
			}
			rec.Finish = "http " + strconv.FormatInt(code, 10)
			return true
		}
		l.body, l.hasBody = sub(b, rf.body)
		l.bodyAt = rf.body
		if !rf.body.ok() && (rf.usage.ok() || rf.choices.ok()) {
			l.body, l.bodyAt, l.hasBody = rf, f.response, true
		}
	}
	if f.errorV.ok() && !isNull(b, f.errorV) && !l.hasBody && !f.completion.ok() && !f.metaInfo.ok() && !f.usage.ok() {
		errorRecord(b, f, rec)
		return true
	}
	// A Responses API object (alone, or a Batch line's body) that failed
	// or was cancelled holds no answer.
	r, at := responseOf(b, f, l.top, &l.body, l.bodyAt)
	if r != nil {
		l.hasResponse, l.responseTop, l.responseAt = true, r == f, at
		if st := str(b, r.status); st == "failed" || st == "cancelled" {
			errorRecord(b, r, rec)
			if rec.Finish == "error" {
				rec.Finish = st
			}
			if rec.Message == "" {
				rec.Message = "the response's status is " + st
			}
			return true
		}
	}
	return false
}

// counts fills rec's counts and shape, each count from the first source
// that has it: the top level, meta_info, usage, a Batch body's usage;
// then output_ids' length; with no count anywhere, the shape is the
// envelope's. It returns why the counts were made unknown (see
// lineInfo.countsOff).
func (l *lineScan) counts(b []byte, rec *store.Record) (countsOff string) {
	f := l.f
	usageAt := f.usage
	l.usage, l.hasUsage = sub(b, usageAt)
	if !l.hasUsage && f.choices.ok() {
		usageAt = choiceUsage(b, f.choices)
		l.usage, l.hasUsage = sub(b, usageAt)
	}
	var bodyUsage fields
	hasBodyUsage := false
	if l.hasBody {
		bodyUsage, hasBodyUsage = sub(b, l.body.usage)
	}

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
		{f, l.top, true, store.ShapeFlat, false},
		{&l.meta, f.metaInfo, l.hasMeta, store.ShapeSGLang, false},
		{&l.usage, usageAt, l.hasUsage, store.ShapeOpenAI, true},
		{&bodyUsage, l.body.usage, hasBodyUsage, store.ShapeBatch, true},
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
		sourceCounts(b, s.f, s.at, s.usage, rec)
	}
	if counted.ok() {
		if t, ok := decodeCount(val(b, get(b, counted, "total_tokens"))); ok {
			countsOff = reconcile(rec, t)
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
		case l.hasMeta:
			rec.Shape = store.ShapeSGLang
		case l.hasUsage:
			rec.Shape = store.ShapeOpenAI
		case l.hasBody:
			rec.Shape = store.ShapeBatch
		}
	}
	return countsOff
}

// sourceCounts fills the prompt, cached and reasoning counts rec does not
// have yet from one source of counts, the object f read from at (usage:
// a usage object, which may use the Responses API's names).
func sourceCounts(b []byte, f *fields, at span, usage bool, rec *store.Record) {
	known(b, &rec.PromptTokens, f.prompt)
	if usage {
		known(b, &rec.PromptTokens, f.inputTokens)
	}
	known(b, &rec.CachedTokens, f.cached)
	if rec.CachedTokens < 0 && f.promptDetails.ok() {
		d, _ := sub(b, f.promptDetails)
		known(b, &rec.CachedTokens, d.cached)
	}
	known(b, &rec.ReasoningTokens, f.reasoning)
	if rec.ReasoningTokens < 0 && f.completionDetails.ok() {
		d, _ := sub(b, f.completionDetails)
		known(b, &rec.ReasoningTokens, d.reasoning)
	}
	if usage && f.outputTokens.ok() { // the Responses API's names
		known(b, &rec.CachedTokens, get(b, get(b, at, "input_tokens_details"), "cached_tokens"))
		known(b, &rec.ReasoningTokens, get(b, get(b, at, "output_tokens_details"), "reasoning_tokens"))
	}
}

// finishReason is the answer's finish reason as the line writes it: a
// flat string, SGLang's object, the first choice's (top level, then a
// Batch body's), DashScope's output.finish_reason, Anthropic's
// stop_reason, or a Responses API object's.
func (l *lineScan) finishReason(b []byte) string {
	f := l.f
	if r := finishOf(b, f.finish); r != "" {
		return r
	}
	if l.hasMeta {
		if r := finishOf(b, l.meta.finish); r != "" {
			return r
		}
	}
	if r := firstChoiceFinish(b, f.choices); r != "" {
		return r
	}
	if l.hasBody {
		if r := firstChoiceFinish(b, l.body.choices); r != "" {
			return r
		}
	}
	if f.output.ok() {
		if o, ok := sub(b, f.output); ok {
			if r := finishOf(b, o.finish); r != "" {
				return r
			}
		}
	}
	if r := str(b, f.stopReason); r != "" {
		return r
	}
	if l.hasResponse {
		return responseFinish(b, l.responseFields(), l.responseAt)
	}
	return ""
}

// ownTime is the record's own time, if the line has one: finished_at,
// SGLang's response_sent_to_client_ts or request_finished_ts, created (top
// level, then a Batch body's), or a Responses API object's created_at.
func (l *lineScan) ownTime(b []byte) (int64, bool) {
	f, meta := l.f, &l.meta
	if t, ok := rfc3339(b, f.finishedAt); ok {
		return t, true
	} else if t, ok := unixSeconds(b, meta.sentTS); l.hasMeta && ok {
		return t, true
	} else if t, ok := unixSeconds(b, meta.finishedTS); l.hasMeta && ok {
		return t, true
	} else if t, ok := unixSeconds(b, f.created); ok {
		return t, true
	} else if t, ok := unixSeconds(b, l.body.created); l.hasBody && ok {
		return t, true
	} else if t, ok := unixSeconds(b, get(b, l.responseAt, "created_at")); l.hasResponse && ok { // the Responses API's
		return t, true
	}
	return 0, false
}

// TurnID is the key of one turn of a multi-turn conversation in the turns
// stage: the conversation's id, '#' and the turn's number (from 1). The
// number is always last, so two conversations never share a key.
func TurnID(id string, turn int) string { return id + "#" + strconv.Itoa(turn) }
