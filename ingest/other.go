package ingest

import (
	"strconv"

	"gendex/store"
)

// The shapes of batch APIs and local servers (forms fAnthropicBatch to
// fMindIE). The normalizer looks for them only when a response line has
// no id by the built-in rules, or no count and no envelope of a built-in
// shape: a line of a built-in shape never comes here.

// ofields are the top-level keys that tell these shapes apart.
type ofields struct {
	result, recordID, modelOutput, errorV, request, response, status   span
	processed, key, done, doneReason, createdAt, promptEval, evalCount span
	message, predicted, evaluated, stopType, stop, content, timings    span
	generated, details, token, prefill, decode                         span
	stoppedLimit, stoppedEOS, stoppedWord                              span
	candidates, usageMetadata, responseID                              span
}

func (o *ofields) set(key []byte, sp span) {
	switch string(key) {
	case "result":
		o.result = sp
	case "recordId":
		o.recordID = sp
	case "modelOutput":
		o.modelOutput = sp
	case "error":
		o.errorV = sp
	case "request":
		o.request = sp
	case "response":
		o.response = sp
	case "status":
		o.status = sp
	case "processed_time":
		o.processed = sp
	case "key":
		o.key = sp
	case "done":
		o.done = sp
	case "done_reason":
		o.doneReason = sp
	case "created_at":
		o.createdAt = sp
	case "prompt_eval_count":
		o.promptEval = sp
	case "eval_count":
		o.evalCount = sp
	case "message":
		o.message = sp
	case "tokens_predicted":
		o.predicted = sp
	case "tokens_evaluated":
		o.evaluated = sp
	case "stop_type":
		o.stopType = sp
	case "stop":
		o.stop = sp
	case "content":
		o.content = sp
	case "timings":
		o.timings = sp
	case "generated_text":
		o.generated = sp
	case "details":
		o.details = sp
	case "token":
		o.token = sp
	case "prefill_time":
		o.prefill = sp
	case "decode_time":
		o.decode = sp
	case "stopped_limit":
		o.stoppedLimit = sp
	case "stopped_eos":
		o.stoppedEOS = sp
	case "stopped_word":
		o.stoppedWord = sp
	case "candidates":
		o.candidates = sp
	case "usageMetadata":
		o.usageMetadata = sp
	case "responseId":
		o.responseID = sp
	}
}

func isObject(b []byte, sp span) bool { return sp.ok() && b[sp.s] == '{' }
func isString(b []byte, sp span) bool { return sp.ok() && b[sp.s] == '"' }

// other reads a response line of one of these shapes into rec (its id,
// when the line has one, already in rec.ID) and returns its stage; ok is
// false when the line is none of them, with rec as it was. info.form is
// the shape; info.lineID says the line has no id of its own (the caller
// names it by its file and line); info.partial that it is a stream's
// event before the last (no record of its own when it has no id; with an
// id it is a chunk, merged into its record).
func other(b []byte, top span, rec *store.Record, info *lineInfo) (store.Stage, bool) {
	var o ofields
	_, _ = eachField(b, top.s, 1, func(k []byte, escaped bool, vs, ve, n int) error {
		if escaped {
			k = []byte(decodeKey(k, true))
		}
		o.set(k, span{vs, ve, n})
		return nil
	})
	fm, ok := o.form(b)
	if !ok {
		return 0, false
	}
	keep := *rec
	*rec = store.Record{File: keep.File, Offset: keep.Offset, Length: keep.Length, Line: keep.Line, Sum: keep.Sum, ID: keep.ID,
		PromptTokens: store.Unknown, CompletionTokens: store.Unknown, CachedTokens: store.Unknown, ReasoningTokens: store.Unknown}
	info.other, info.form = true, fm
	if rec.ID == "" {
		switch fm {
		case fBedrock:
			rec.ID, _ = idOf(b, o.recordID)
		case fVertex:
			rec.ID, _ = idOf(b, o.key)
		case fGemini:
			rec.ID, _ = idOf(b, o.responseID)
		}
		info.lineID = rec.ID == ""
	}
	stage := store.Raw
	switch fm {
	case fAnthropicBatch:
		stage = o.anthropicBatch(b, rec)
	case fBedrock:
		stage = o.bedrock(b, rec)
	case fVertex:
		stage = o.vertex(b, rec, info)
	case fGemini:
		rec.Shape = store.ShapeOpenAI
		geminiResponse(b, top, rec, info)
	case fOllama:
		o.ollama(b, rec, info)
	case fLlamaCpp:
		o.llamaCpp(b, rec, info)
	case fTGI, fMindIE:
		o.tgi(b, rec, info)
	}
	switch fm {
	case fOllama, fLlamaCpp, fTGI, fMindIE:
		// A stream's lines with one id are one record, with the counts
		// and finish reason of its last (the merge keeps what a later
		// line carries).
		info.chunk = !info.lineID
	}
	if rec.CompletionTokens < 0 && stage == store.Raw && rec.Shape != store.ShapeError && !info.partial && !countsByName(b, top, rec) {
		rec.Shape = store.ShapeUnknown // no count where the shape keeps it, nor where a name says (byname.go)
	}
	return stage, true
}

// anthropicBatch reads an Anthropic Message Batches result line: a
// succeeded message's counts and stop reason, an errored request's error,
// or a request the batch never ran; it returns the line's stage.
func (o *ofields) anthropicBatch(b []byte, rec *store.Record) store.Stage {
	stage := store.Raw
	rec.Shape = store.ShapeBatch
	switch typ := str(b, get(b, o.result, "type")); typ {
	case "succeeded":
		msg := get(b, o.result, "message")
		anthropicUsage(b, get(b, msg, "usage"), rec)
		rec.Finish = str(b, get(b, msg, "stop_reason"))
	case "errored":
		e := get(b, o.result, "error")
		if inner := get(b, e, "error"); isObject(b, inner) { // an error response
			e = inner
		}
		stage, rec.Shape, rec.Finish, rec.Message = store.Errors, store.ShapeError, str(b, get(b, e, "type")), str(b, get(b, e, "message"))
		if rec.Finish == "" {
			rec.Finish = "errored"
		}
	default: // canceled, expired: never ran
		stage, rec.Shape, rec.Finish = store.Errors, store.ShapeError, typ
		rec.Message = "the batch ended before this request ran (result.type " + typ + ")"
	}
	return stage
}

// bedrock reads an Amazon Bedrock batch output line: its modelOutput's
// counts and stop reason in the model family's own names, or its error;
// it returns the line's stage.
func (o *ofields) bedrock(b []byte, rec *store.Record) store.Stage {
	stage := store.Raw
	rec.Shape = store.ShapeBatch
	if !isObject(b, o.modelOutput) {
		stage, rec.Shape, rec.Finish = store.Errors, store.ShapeError, "error"
		if c, ok := decodeCount(val(b, get(b, o.errorV, "errorCode"))); ok {
			rec.Finish = "http " + strconv.FormatInt(c, 10)
		} else if c := str(b, get(b, o.errorV, "errorCode")); c != "" {
			rec.Finish = c
		}
		rec.Message = str(b, get(b, o.errorV, "errorMessage"))
		return stage
	}
	mo := o.modelOutput
	u := get(b, mo, "usage")
	switch {
	case get(b, u, "input_tokens").ok() || get(b, u, "output_tokens").ok(): // Claude
		anthropicUsage(b, u, rec)
		rec.Finish = str(b, get(b, mo, "stop_reason"))
	case get(b, u, "inputTokens").ok() || get(b, u, "outputTokens").ok(): // Converse, Nova
		known(b, &rec.PromptTokens, get(b, u, "inputTokens"))
		known(b, &rec.CompletionTokens, get(b, u, "outputTokens"))
		rec.Finish = str(b, get(b, mo, "stopReason"))
	case get(b, mo, "inputTextTokenCount").ok(): // Titan
		r0 := walk(b, mo, []string{"results", "0"})
		known(b, &rec.PromptTokens, get(b, mo, "inputTextTokenCount"))
		known(b, &rec.CompletionTokens, get(b, r0, "tokenCount"))
		rec.Finish = str(b, get(b, r0, "completionReason"))
	default: // Llama
		known(b, &rec.PromptTokens, get(b, mo, "prompt_token_count"))
		known(b, &rec.CompletionTokens, get(b, mo, "generation_token_count"))
		rec.Finish = str(b, get(b, mo, "stop_reason"))
	}
	return stage
}

// vertex reads a Vertex AI (or Gemini API) batch prediction line: its
// processed time, then its error or its response; it returns the line's
// stage.
func (o *ofields) vertex(b []byte, rec *store.Record, info *lineInfo) store.Stage {
	stage := store.Raw
	rec.Shape = store.ShapeBatch
	if t, ok := rfc3339(b, o.processed); ok {
		rec.Time, rec.OwnTime = t, true
	}
	e := o.errorV
	if !isObject(b, e) && isObject(b, o.status) { // the Gemini API's google.rpc.Status
		e = o.status
	}
	switch {
	case str(b, o.status) != "":
		stage, rec.Shape, rec.Finish, rec.Message = store.Errors, store.ShapeError, "error", str(b, o.status)
	case isObject(b, e):
		stage, rec.Shape, rec.Finish, rec.Message = store.Errors, store.ShapeError, str(b, get(b, e, "status")), str(b, get(b, e, "message"))
		if rec.Finish == "" {
			rec.Finish = "error"
		}
	default:
		geminiResponse(b, o.response, rec, info)
	}
	return stage
}

// ollama reads an Ollama answer (or stream line): its counts, done
// reason and time.
func (o *ofields) ollama(b []byte, rec *store.Record, info *lineInfo) {
	rec.Shape = store.ShapeFlat
	if string(val(b, o.done)) == "false" {
		info.partial = true
	}
	known(b, &rec.PromptTokens, o.promptEval)
	known(b, &rec.CompletionTokens, o.evalCount)
	rec.Finish = str(b, o.doneReason)
	if t, ok := rfc3339(b, o.createdAt); ok {
		rec.Time, rec.OwnTime = t, true
	}
}

// llamaCpp reads a llama.cpp /completion answer (or stream line): its
// counts and stop reason (older builds: a boolean per reason).
func (o *ofields) llamaCpp(b []byte, rec *store.Record, info *lineInfo) {
	rec.Shape = store.ShapeFlat
	if string(val(b, o.stop)) == "false" {
		info.partial = true
	}
	known(b, &rec.PromptTokens, o.evaluated)
	known(b, &rec.CompletionTokens, o.predicted)
	known(b, &rec.CachedTokens, get(b, o.timings, "cache_n"))
	rec.Finish = str(b, o.stopType)
	switch { // older builds: a boolean for each reason
	case rec.Finish != "":
	case string(val(b, o.stoppedLimit)) == "true":
		rec.Finish = store.FinishLength
	case string(val(b, o.stoppedEOS)) == "true", string(val(b, o.stoppedWord)) == "true":
		rec.Finish = store.FinishStop
	}
}

// tgi reads a Hugging Face TGI (or MindIE) answer (or stream line): its
// generated tokens and finish reason.
func (o *ofields) tgi(b []byte, rec *store.Record, info *lineInfo) {
	rec.Shape = store.ShapeFlat
	if o.token.ok() && !isString(b, o.generated) {
		info.partial = true
	}
	known(b, &rec.CompletionTokens, get(b, o.details, "generated_tokens"))
	rec.Finish = str(b, get(b, o.details, "finish_reason"))
}

// form tells the shape from the keys; ok is false for none.
func (o *ofields) form(b []byte) (form, bool) {
	switch {
	case isObject(b, o.result) && get(b, o.result, "type").ok():
		return fAnthropicBatch, true
	case o.recordID.ok() && (isObject(b, o.modelOutput) || isObject(b, o.errorV)), isObject(b, o.modelOutput):
		return fBedrock, true
	case isObject(b, o.request) && (isObject(b, o.response) || isString(b, o.status) || o.processed.ok()),
		o.key.ok() && (isObject(b, o.response) || isObject(b, o.errorV) || isObject(b, o.status)):
		return fVertex, true
	case o.done.ok() && (isString(b, o.response) || isObject(b, o.message)),
		string(val(b, o.done)) == "true" && (o.evalCount.ok() || o.doneReason.ok()): // a stream's last, with no text
		return fOllama, true
	case o.predicted.ok() || o.stopType.ok() || o.stoppedEOS.ok() || (isString(b, o.content) && o.stop.ok() && o.timings.ok()):
		return fLlamaCpp, true
	case (o.prefill.ok() || o.decode.ok()) && (o.token.ok() || o.generated.ok()):
		return fMindIE, true
	case isString(b, o.generated) || isObject(b, o.details) && get(b, o.details, "generated_tokens").ok(),
		isObject(b, o.token) && o.generated.ok():
		return fTGI, true
	case o.candidates.ok() && isObject(b, o.usageMetadata):
		return fGemini, true
	}
	return 0, false
}

// anthropicUsage reads an Anthropic usage object: the prompt is
// input_tokens and the cache's tokens written and read (input_tokens
// leaves both out), the cached tokens those read.
func anthropicUsage(b []byte, u span, rec *store.Record) {
	known(b, &rec.CompletionTokens, get(b, u, "output_tokens"))
	in, ok := decodeCount(val(b, get(b, u, "input_tokens")))
	if !ok {
		return
	}
	read, okRead := decodeCount(val(b, get(b, u, "cache_read_input_tokens")))
	written, okWritten := decodeCount(val(b, get(b, u, "cache_creation_input_tokens")))
	if !okRead {
		read = 0
	}
	if !okWritten {
		written = 0
	}
	rec.PromptTokens = in + read + written
	if okRead {
		rec.CachedTokens = read
	}
}

// geminiResponse reads a Gemini GenerateContentResponse (a batch line's
// response, or a line of its own): the prompt is promptTokenCount and
// toolUsePromptTokenCount, the completion candidatesTokenCount and, as
// Gemini counts them apart, thoughtsTokenCount; where the line states
// totalTokenCount, the reading of them that adds up to it (reconcile).
func geminiResponse(b []byte, resp span, rec *store.Record, info *lineInfo) {
	u := get(b, resp, "usageMetadata")
	known(b, &rec.PromptTokens, get(b, u, "promptTokenCount"))
	if n, ok := decodeCount(val(b, get(b, u, "toolUsePromptTokenCount"))); ok && rec.PromptTokens >= 0 {
		rec.PromptTokens += n
	}
	known(b, &rec.CachedTokens, get(b, u, "cachedContentTokenCount"))
	known(b, &rec.ReasoningTokens, get(b, u, "thoughtsTokenCount"))
	if n, ok := decodeCount(val(b, get(b, u, "candidatesTokenCount"))); ok {
		rec.CompletionTokens = n
		if t, ok := decodeCount(val(b, get(b, u, "totalTokenCount"))); ok && rec.PromptTokens >= 0 {
			info.countsOff = reconcile(rec, t)
		} else {
			rec.CompletionTokens = n + max(rec.ReasoningTokens, 0)
		}
	}
	rec.Finish = str(b, walk(b, resp, []string{"candidates", "0", "finishReason"}))
}
