package ingest

import "gendex/store"

// The table of line shapes: one look at a line's top-level keys, found in
// the one scan of its object, decides which reader reads it, and that
// reader alone reads it. Each row is a rule on those keys, a reader and an
// example line (kindOf holds the rules, checked in one place; lineKind.read
// names each row's reader). The last
// row, readAny, reads any line: a row hands it a line it cannot read after
// all (an id that is "", counts that are none).
// (The shapes README names, and where export finds their text, are the
// table of forms in shapes.go; a row here may read several of them.)

// lineKind is a row of lineShapes.
type lineKind uint8

const (
	lineFlat  lineKind = iota // gendex's own answers, and any flat line like them
	lineNoID                  // no id of a built-in shape: a batch API's or a local server's line
	lineStage                 // a line of a stage that holds no answer: a prompt, a record, an error, an exclusion
	lineAny                   // every other line
	numLineKinds
)

// A lineShape is one row of the table: its rule is kindOf's case for it,
// its reader lineKind.read's.
type lineShape struct {
	name    string
	example string      // a line the row reads (TestLineShapes), of stage
	stage   store.Stage // the stage of example
}

// read is row k's reader: it reads the line whose top-level object at top
// was scanned into f (at: the span of the id path's first key's value,
// when one is given) into rec, with what the indexer needs in info, and
// returns the record's stage. (A switch of direct calls, not a func in
// each row: through a func value the compiler cannot see that f and info
// stay on the caller's stack, and put them on the heap, 1.5 KB a line.)
func (k lineKind) read(b []byte, top, at span, stage store.Stage, path IDPath, rec *store.Record, f *fields, info *lineInfo) (store.Stage, error) {
	switch k {
	case lineFlat:
		return readFlat(b, top, at, stage, path, rec, f, info)
	case lineNoID:
		return readNoID(b, top, at, stage, path, rec, f, info)
	case lineStage:
		return readStage(b, top, at, stage, path, rec, f, info)
	}
	return readAny(b, top, at, stage, path, rec, f, info, false)
}

var lineShapes = [numLineKinds]lineShape{
	lineFlat: {
		name: "flat: an id and the counts or output ids at the top level, no envelope (gen's own lines)",
		example: `{"id":"G-0000001","output_ids":[321,359,353],"text":"Again","prompt_tokens":8,"completion_tokens":3,` +
			`"cached_tokens":0,"reasoning_tokens":0,"finish_reason":"length","matched_stop":null,"e2e_latency":0.01,` +
			`"finished_at":"2026-12-05T11:20:38.969Z","server":"http://127.0.0.1:30000","model":"m","simulated":true}`,
		stage: store.Raw,
	},
	lineNoID: {
		name:    "no id where a built-in shape keeps one: a batch API's or a local server's (other.go), else an answer known by its line (rules.go)",
		example: `{"model":"llama3","created_at":"2026-01-02T03:04:05Z","response":"Hi.","done":true,"done_reason":"stop","prompt_eval_count":26,"eval_count":3}`,
		stage:   store.Raw,
	},
	lineStage: {
		name:    "a line of a stage that holds no answer (prompts, tokenized, errors, excluded): its id and what the stage keeps",
		example: `{"id":"G-0000001","input_ids":[1,2,3],"loss_mask":[0,0,1]}`,
		stage:   store.Tokenized,
	},
	lineAny: {
		name:    "any other: the envelopes of the built-in shapes (meta_info, usage, choices, response), a file read with --id or --map, a stage's line with no id of its own, and the rules for a shape not seen before (rules.go)",
		stage:   store.Raw,
		example: `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":2}}`,
	},
}

// kindOf is the table's rules: the row that reads a line of stage whose
// top-level keys are f's (path: the file's --id or --map, nil for none).
func kindOf(b []byte, f *fields, stage store.Stage, path IDPath) lineKind {
	if path != nil {
		return lineAny
	}
	switch stage {
	case store.Raw, store.Turns:
	default:
		return lineStage
	}
	// An envelope, or a key a built-in reader reads beyond the flat ones.
	envelope := f.customID.ok() || f.metaInfo.ok() || f.usage.ok() || f.choices.ok() || f.response.ok() ||
		f.errorV.ok() || f.output.ok() || f.object.ok() || f.status.ok() || f.stopReason.ok()
	switch {
	case !envelope && f.id.ok() && (b[f.id.s] == '"' || b[f.id.s] == '-' || b[f.id.s] >= '0' && b[f.id.s] <= '9') &&
		(f.completion.ok() || f.outputIDs.ok()):
		return lineFlat
	case stage == store.Raw && !f.customID.ok() && !f.id.ok() && !f.metaInfo.ok() && !f.requestID.ok():
		return lineNoID
	}
	return lineAny
}

// readFlat reads a flat line: its id, the counts at the top level (else
// the length of output_ids), its finish reason, maker and time; a line
// with no answer that reports its request failed is an error (rules.go).
// A line it cannot read so (an id that is "", counts that are none) is
// readAny's.
func readFlat(b []byte, top, at span, stage store.Stage, path IDPath, rec *store.Record, f *fields, info *lineInfo) (store.Stage, error) {
	id, ok := idOf(b, f.id)
	if !ok {
		return readAny(b, top, at, stage, path, rec, f, info, false)
	}
	rec.ID = id
	if st, done, err := stageRecord(b, f, stage, true, rec); done {
		return st, err
	}
	if n, ok := decodeCount(val(b, f.completion)); ok {
		rec.CompletionTokens, rec.Shape = n, store.ShapeFlat
	} else if n, ok := arrayLen(b, f.outputIDs); ok {
		rec.CompletionTokens, rec.Shape = n, store.ShapeIDsOnly
	} else {
		return readAny(b, top, at, stage, path, rec, f, info, false)
	}
	sourceCounts(b, f, top, false, rec)
	if stage == store.Raw && noReply(b, f, rec) && failedStatus(b, top, rec) {
		return store.Errors, nil
	}
	rec.Finish = finishOf(b, f.finish)
	if stage == store.Raw {
		rec.ToolStop = toolStopReason(b, f.toolStop)
	}
	info.model, info.simulated, info.provenance = val(b, f.model), string(val(b, f.simulated)) == "true", val(b, f.provenance)
	info.redo = string(val(b, f.redo)) == "true"
	specCounts(b, f, nil, false, rec)
	if t, ok := rfc3339(b, f.finishedAt); ok {
		rec.Time = t
	} else if t, ok := unixSeconds(b, f.created); ok {
		rec.Time = t
	}
	rec.OwnTime = rec.Time != 0
	if stage == store.Turns {
		return store.Turns, nil
	}
	return store.Raw, nil
}

// readStage reads a line of a stage that holds no answer: its id
// (custom_id, else id) and what its stage keeps (stageRecord). A line with
// neither id is readAny's, which knows the other places of one.
func readStage(b []byte, top, at span, stage store.Stage, path IDPath, rec *store.Record, f *fields, info *lineInfo) (store.Stage, error) {
	id, ok := idOf(b, f.customID)
	if !ok {
		id, ok = idOf(b, f.id)
	}
	if !ok && stage != store.Prompts {
		return readAny(b, top, at, stage, path, rec, f, info, false)
	}
	rec.ID = id
	st, _, err := stageRecord(b, f, stage, ok, rec)
	return st, err
}

// readNoID reads a response line with no id where a built-in shape keeps
// one: as one of other's shapes, else as readAny reads it (an answer known
// by its line, or no answer).
func readNoID(b []byte, top, at span, stage store.Stage, path IDPath, rec *store.Record, f *fields, info *lineInfo) (store.Stage, error) {
	if st, ok := other(b, top, rec, info); ok {
		info.model, info.simulated = val(b, f.model), string(val(b, f.simulated)) == "true"
		return st, nil
	}
	return readAny(b, top, at, stage, path, rec, f, info, true)
}
