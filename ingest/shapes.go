package ingest

import (
	"errors"
	"fmt"
	"strings"

	"gendex/store"
)

// The one place that knows the answer shapes: for each, where its id,
// counts, finish reason, time and text are (README's "Formats it reads"
// is this table, checked by TestFormatsTable), and the paths export reads
// its text, reasoning and token ids from (ReadAnswer). The normalizer
// reads the counts of the first eleven (the built-in shapes) on its hot
// path; the others only when a line has no id or no count where the
// built-in shapes keep them (see other.go). Whatever the shape, a finish
// reason is mapped onto gendex's (store.FinishReason), and counts that
// state a total are read the way that adds up to it (reconcile).

// form is one answer shape.
type form uint8

const (
	fFlat form = iota
	fSGLang
	fOpenAI
	fChunk
	fDashScope
	fAnthropic
	fBatch
	fBatchOld
	fResponses
	fCohere
	fIDsOnly
	fAnthropicBatch
	fBedrock
	fVertex
	fGemini
	fOllama
	fLlamaCpp
	fTGI
	fMindIE
	fMapped
	numForms
)

// formDoc is what gendex knows of one shape.
type formDoc struct {
	name                         string // as README and export's messages name it
	id, counts, finish, at, text string // README's columns, in markdown
	// textAt and reasoningAt are the paths of the answer's text and
	// reasoning, tried in order: a string, or a list of parts whose text
	// parts are joined (Anthropic's thinking blocks and Gemini's thought
	// parts are reasoning).
	textAt, reasoningAt [][]string
	// emptyLast: a stream's last line carries the counts but an empty text
	// (the text is in the events before it).
	emptyLast bool
}

func paths(ps ...string) [][]string {
	out := make([][]string, len(ps))
	for i, p := range ps {
		out[i] = strings.Split(p, ".")
	}
	return out
}

// The text of the built-in shapes: each line is read at its own places,
// in this order.
var (
	builtinText = paths("text", "choices.0.message.content", "choices.0.text",
		"response.body.choices.0.message.content", "response.body.choices.0.text",
		"response.choices.0.message.content", "response.choices.0.text",
		"output.text", "output.choices.0.message.content", "content")
	builtinReasoning = paths("reasoning_content", "choices.0.message.reasoning_content",
		"response.body.choices.0.message.reasoning_content", "response.choices.0.message.reasoning_content")
)

var forms = [numForms]formDoc{
	fFlat: {name: "gendex / seed \"new\" flat", id: "`id`", counts: "`completion_tokens`, `prompt_tokens`, `cached_tokens`, `reasoning_tokens`",
		finish: "`finish_reason`", at: "`finished_at` (RFC 3339)", text: "`text`, `reasoning_content`; `output_ids`, `prompt_ids`",
		textAt: builtinText, reasoningAt: builtinReasoning},
	fSGLang: {name: "SGLang `/generate`", id: "`id`, else the server's `meta_info.id`", counts: "`meta_info.*`",
		finish: "`meta_info.finish_reason.type`", at: "`meta_info.response_sent_to_client_ts`", text: "`text`; `output_ids`",
		textAt: builtinText, reasoningAt: builtinReasoning},
	fOpenAI: {name: "OpenAI chat/completions (seed \"old\")", id: "`id` (`\"\"` or null: none, the line)", counts: "`usage.*`, `usage.prompt_tokens_details.cached_tokens`, `usage.completion_tokens_details.reasoning_tokens`",
		finish: "`choices[0].finish_reason`", at: "`created`",
		text:   "`choices[0].message.content` (a string or text parts), `choices[0].message.reasoning_content`; or `choices[0].text`",
		textAt: builtinText, reasoningAt: builtinReasoning},
	fChunk: {name: "OpenAI stream chunks (`chat.completion.chunk`)", id: "`id`: all chunks of one id in one file are **one** record",
		counts: "the chunk with `usage`", finish: "the chunk that has one", at: "`created`",
		text: "none on one line (each chunk holds a piece): export excludes it as `bad_answer`"},
	fDashScope: {name: "DashScope native", id: "the server's `request_id`", counts: "`usage.input_tokens`, `usage.output_tokens`",
		finish: "`output.finish_reason`", text: "`output.text`, or `output.choices[0].message.content`",
		textAt: builtinText, reasoningAt: builtinReasoning},
	fAnthropic: {name: "Anthropic-style message", id: "`id`", counts: "`usage.input_tokens`, `usage.output_tokens`",
		finish: "`stop_reason`", text: "`content`: its text blocks (thinking blocks: reasoning)",
		textAt: builtinText, reasoningAt: builtinReasoning},
	fBatch: {name: "OpenAI Batch / vLLM run-batch", id: "`custom_id`", counts: "`response.body.usage.*`",
		finish: "`response.body.choices[0].finish_reason`", at: "`response.body.created`",
		text:   "`response.body.choices[0].message.content` or `.text`",
		textAt: builtinText, reasoningAt: builtinReasoning},
	fBatchOld: {name: "old vLLM run-batch (`response` is the completion)", id: "`custom_id`", counts: "`response.usage.*`",
		finish: "`response.choices[0].finish_reason`", at: "`response.created`", text: "`response.choices[0].message.content` or `.text`",
		textAt: builtinText, reasoningAt: builtinReasoning},
	fResponses: {name: "Responses API (`/v1/responses`), alone or as a Batch line's `response.body`", id: "`id`; in a Batch line `custom_id`",
		counts: "`usage.input_tokens`, `usage.output_tokens`, `input_tokens_details.cached_tokens`, `output_tokens_details.reasoning_tokens`",
		finish: "`status`: `completed`, or `incomplete` with `incomplete_details.reason` (`max_output_tokens`: length); `failed`, `cancelled`: an error record (`error.message`)",
		at:     "`created_at`", text: "`output`: its `message` items' text parts (`reasoning` items: reasoning)",
		textAt: paths("output", "response.body.output")},
	fCohere: {name: "Cohere v2 chat", id: "`id`", counts: "`usage.tokens.input_tokens`, `usage.tokens.output_tokens`, else `usage.billed_units.*`",
		finish: "`finish_reason` (`COMPLETE`, `MAX_TOKENS`, ...)", text: "`message.content`: its text parts (thinking parts: reasoning)",
		textAt: paths("message.content")},
	fIDsOnly: {name: "ids only", id: "`id`", counts: "`len(output_ids)`", text: "`output_ids` (the ids format only)",
		textAt: builtinText, reasoningAt: builtinReasoning},
	fAnthropicBatch: {name: "Anthropic Message Batches results", id: "`custom_id`",
		counts: "`result.message.usage`: prompt `input_tokens` + `cache_creation_input_tokens` + `cache_read_input_tokens`, `output_tokens`, cached `cache_read_input_tokens`",
		finish: "`result.message.stop_reason`; `result.type` `errored`, `canceled`, `expired`: an error record (`result.error.error.message`)",
		text:   "`result.message.content`: its text blocks (thinking blocks: reasoning)",
		textAt: paths("result.message.content")},
	fBedrock: {name: "AWS Bedrock batch inference (`modelOutput` by model family)", id: "`recordId`",
		counts: "in `modelOutput`: Claude `usage.input_tokens`, `usage.output_tokens`; Converse and Nova `usage.inputTokens`, `usage.outputTokens`; Titan `inputTextTokenCount`, `results[0].tokenCount`; Llama `prompt_token_count`, `generation_token_count`",
		finish: "`stop_reason`, `stopReason` or `results[0].completionReason` in `modelOutput`; `error` (`errorCode`, `errorMessage`): an error record",
		text:   "in `modelOutput`: `content` text blocks, `output.message.content`, `results[0].outputText` or `generation`",
		textAt: paths("modelOutput.content", "modelOutput.output.message.content", "modelOutput.results.0.outputText", "modelOutput.generation")},
	fVertex: {name: "Vertex AI / Gemini batch prediction", id: "Gemini API: `key`; Vertex AI: none (the line: see below)",
		counts: "`response.usageMetadata`: prompt `promptTokenCount` + `toolUsePromptTokenCount`, completion `candidatesTokenCount` + `thoughtsTokenCount` (or without them, where `totalTokenCount` says they are inside), reasoning `thoughtsTokenCount`, cached `cachedContentTokenCount`",
		finish: "`response.candidates[0].finishReason`; a non-empty `status`, or `error`: an error record", at: "`processed_time` (RFC 3339)",
		text:   "`response.candidates[0].content.parts`: its text parts (thought parts: reasoning)",
		textAt: paths("response.candidates.0.content.parts")},
	fGemini: {name: "Gemini API `generateContent` (a response of its own)", id: "`responseId`, else none (the line)",
		counts: "`usageMetadata`, as in a batch line's `response`", finish: "`candidates[0].finishReason`",
		text: "`candidates[0].content.parts`: its text parts (thought parts: reasoning)", textAt: paths("candidates.0.content.parts")},
	fOllama: {name: "Ollama `/api/generate`, `/api/chat`", id: "none (the line)", counts: "`prompt_eval_count`, `eval_count`",
		finish: "`done_reason`; a stream's lines before `\"done\": true` are its events (its last may have no text)", at: "`created_at` (RFC 3339)",
		text: "`response` or `message.content`; `thinking` or `message.thinking`", textAt: paths("response", "message.content"),
		reasoningAt: paths("thinking", "message.thinking"), emptyLast: true},
	fLlamaCpp: {name: "llama.cpp server `/completion`", id: "none (the line)", counts: "`tokens_evaluated`, `tokens_predicted`, cached `timings.cache_n` (not `tokens_cached`: the slot's whole context)",
		finish: "`stop_type`, or older builds' `stopped_limit`, `stopped_eos`, `stopped_word`; a stream's lines with `\"stop\": false` are its events", text: "`content`",
		textAt: paths("content"), emptyLast: true},
	fTGI: {name: "TGI `/generate`, `/generate_stream`", id: "none (the line)", counts: "`details.generated_tokens` (no prompt count)",
		finish: "`details.finish_reason`; a stream's `token` events with no `generated_text` come before its last", text: "`generated_text`",
		textAt: paths("generated_text")},
	fMindIE: {name: "MindIE `/infer` (native; its TGI-compatible routes are TGI's)", id: "none (the line)", counts: "`details.generated_tokens` (no prompt count)",
		finish: "`details.finish_reason`; a stream's `token` events (`prefill_time`, `decode_time`) with no `generated_text` come before its last",
		text:   "`generated_text`", textAt: paths("generated_text")},
	fMapped: {name: "any other, described with `ingest --map`", id: "`--id PATH` or `id=PATH`, else the built-in rules, else the line",
		counts: "`prompt_tokens=PATH`, `completion_tokens=PATH`, `cached_tokens=PATH`, `reasoning_tokens=PATH`",
		finish: "`finish_reason=PATH`; `error=PATH` (a value other than null, false or \"\"): an error record", text: "`text=PATH`, `reasoning=PATH`"},
}

// FormatsTable is README's table of the shapes gendex reads (section
// "Formats it reads"), one row per shape.
func FormatsTable() string {
	var b strings.Builder
	b.WriteString("| shape | id | counts | finish reason | own time | text (export) |\n|---|---|---|---|---|---|\n")
	for _, f := range forms {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", f.name, f.id, f.counts, f.finish, f.at, f.text)
	}
	return b.String()
}

// Answer is what export reads of one answer line (ReadAnswer).
type Answer struct {
	Shape string // the shape's name, as README's table names it
	// TextRaw is the JSON string that holds the whole text, when one
	// string does (decode it with DecodeString); else Text is the text
	// joined from its parts. Both are nil when the line has no text where
	// its shape keeps one; then NoText says where that is, or why.
	TextRaw   []byte
	Text      *string
	NoText    string
	Reasoning string
	// OutputIDs and PromptIDs are raw JSON arrays; nil when absent.
	OutputIDs, PromptIDs []byte
	// ToolCalls is the raw JSON value of the line's top-level
	// "tool_calls" (gen's answers with calls), nil when it has none.
	ToolCalls []byte
	// Turns is the raw JSON array "turns" of a conversation line (gen
	// --turns all: one answer object per turn), nil when it has none.
	Turns []byte
	// Finish, PromptTokens and CompletionTokens are the index's reading
	// (store.Unknown when unknown).
	Finish                         string
	PromptTokens, CompletionTokens int64
}

var errNoAnswer = errors.New("not a JSON object")

// ReadAnswer reads an answer line of any shape ingest reads, with the
// file's mapping (nil: none): its shape, text, reasoning, token ids,
// finish reason and counts. An error says what is not an answer in it.
func ReadAnswer(line []byte, m IDPath) (Answer, error) {
	var rec store.Record
	a, _, err := ReadAnswerRecord(line, m, &rec)
	return a, err
}

// ReadAnswerRecord is ReadAnswer that also leaves in rec the line's index
// record, read in the same pass, and returns as recErr what Normalize
// returns for the line (with m nil): one read of an answer for both its
// record and its parts (gen --export decides a record from the line it
// has just written, before it is indexed).
func ReadAnswerRecord(line []byte, m IDPath, rec *store.Record) (a Answer, recErr, err error) {
	var f fields
	_, info, err := normalizeFields(line, store.Raw, m, rec, &f)
	recErr = err
	if err == nil && info.lineID {
		recErr = ErrNoID
	}
	if err != nil && !errors.Is(err, ErrNoID) {
		return Answer{}, recErr, err
	}
	b := line
	i := skipSpace(b, 0)
	// The normalizer read the object whole (the line, or a list's one
	// object), with nothing but space after it: its fields are those of
	// the line, scanned once.
	end := len(b)
	for end > i && isSpace(b[end-1]) {
		end--
	}
	top := span{s: i, e: end}
	if i < len(b) && b[i] == '[' {
		top, _ = onlyObject(b)
	}
	if !top.ok() || b[top.s] != '{' {
		return Answer{}, recErr, errNoAnswer
	}
	if info.nested.ok() { // the answer is an object in the line: its parts are there
		var in store.Record
		a, _, err = readAnswerInner(line[info.nested.s:info.nested.e], nil, &in)
		a.Shape += " (nested at " + info.nestedPath + ")"
		a.Finish, a.PromptTokens, a.CompletionTokens = rec.Finish, rec.PromptTokens, rec.CompletionTokens
		return a, recErr, err
	}
	fm := formOf(b, top, &f, rec, &info, m)
	a = Answer{Shape: forms[fm].name, Finish: rec.Finish, PromptTokens: rec.PromptTokens, CompletionTokens: rec.CompletionTokens}
	if fm == fFlat && !m.fields() && !f.completion.ok() && !f.outputIDs.ok() && !f.turns.ok() && !f.isAnswer(b) && !namesOf(b, top).answer.ok() {
		// Answers nested in the line, and none at its top level: its
		// text (an input document) is none of them.
		var nf nestedFind
		if findNested(b, top, 0, false, "", &nf); nf.n > 1 {
			a.NoText = "several answers are nested in the line (the first at " + nf.path + ") and none is at its top level, whose text is not one: say which with ingest --map text=PATH"
			return a, recErr, nil
		}
	}
	if v := f.turns; v.ok() && !isNull(b, v) {
		a.Turns = val(b, v)
	}
	if v := f.outputIDs; v.ok() && !isNull(b, v) {
		a.OutputIDs = val(b, v)
	}
	if v := f.promptIDs; v.ok() && !isNull(b, v) {
		a.PromptIDs = val(b, v)
	}
	if v := f.toolCalls; v.ok() {
		a.ToolCalls = val(b, v)
	}
	textAt, reasoningAt := forms[fm].textAt, forms[fm].reasoningAt
	if fm == fFlat && !f.completion.ok() && !f.outputIDs.ok() && !m.fields() {
		// No count of its own beside its text: a field named as the
		// answer ("text_output", "generation") is its text before any
		// "text" (which may be the input).
		if key := answerKeyOf(b, top); key != "" {
			textAt = append([][]string{{key}}, textAt...)
		}
	}
	if fm == fMapped {
		textAt, reasoningAt = [][]string{m.paths[mText]}, nil
		if m.paths[mReasoning] != nil {
			reasoningAt = [][]string{m.paths[mReasoning]}
		}
	}
	var reasoning strings.Builder
	if err := readText(b, top, &f, textAt, &a, &reasoning); err != nil {
		return a, recErr, err
	}
	if a.TextRaw == nil && a.Text == nil && fm != fMapped && fm != fChunk {
		// None where the shape keeps it: a field named as the answer
		// ("response" beside a usage object) is.
		if key := answerKeyOf(b, top); key != "" {
			if err := readText(b, top, &f, [][]string{{key}}, &a, &reasoning); err != nil {
				return a, recErr, err
			}
		}
	}
	for _, p := range reasoningAt {
		v := walkTop(b, top, &f, p)
		if !v.ok() || isNull(b, v) {
			continue
		}
		s, ok := decodeString(val(b, v))
		if !ok {
			return a, recErr, fmt.Errorf("%q is not a string", strings.Join(p, "."))
		}
		reasoning.WriteString(s)
		break
	}
	a.Reasoning = reasoning.String()
	switch {
	case fm == fChunk:
		a.TextRaw, a.Text = nil, nil
		a.NoText = "an OpenAI stream chunk: each chunk holds a piece of the text, and export reads one line per answer"
	case forms[fm].emptyLast && (a.TextRaw == nil && a.Text == nil || string(a.TextRaw) == `""`) && rec.CompletionTokens > 0:
		a.TextRaw = nil
		a.NoText = "the last event of a stream: its text is in the events before it, and export reads one line per answer"
	case a.TextRaw == nil && a.Text == nil:
		var at []string
		for _, p := range textAt {
			at = append(at, strings.Join(p, "."))
		}
		if len(at) > 3 {
			at = append(at[:3], "...")
		}
		a.NoText = "no text where the shape keeps it (" + strings.Join(at, ", ") + ")"
	}
	return a, recErr, nil
}

// joinParts joins the text parts of a list (OpenAI content parts,
// Anthropic content blocks, Gemini parts; a string element is text too);
// thinking blocks and thought parts go to reasoning. ok is false when no
// part is text.
func joinParts(b []byte, list span, reasoning *strings.Builder) (string, bool) {
	var text strings.Builder
	found := false
	eachElement(b, list, func(e span) bool {
		switch b[e.s] {
		case '"':
			s, _ := decodeString(val(b, e))
			text.WriteString(s)
			found = true
		case '{':
			typ := str(b, get(b, e, "type"))
			switch {
			case typ == "thinking":
				reasoning.WriteString(str(b, get(b, e, "thinking")))
			case typ == "message": // a Responses API output item
				if s, ok := joinParts(b, get(b, e, "content"), reasoning); ok {
					text.WriteString(s)
					found = true
				}
			case typ == "reasoning": // its summary and its text, both reasoning
				for _, k := range [...]string{"summary", "content"} {
					eachElement(b, get(b, e, k), func(p span) bool {
						reasoning.WriteString(str(b, get(b, p, "text")))
						return true
					})
				}
			case string(val(b, get(b, e, "thought"))) == "true":
				reasoning.WriteString(str(b, get(b, e, "text")))
			case typ == "" || typ == "text" || typ == "output_text":
				if t := get(b, e, "text"); t.ok() && b[t.s] == '"' {
					text.WriteString(str(b, t))
					found = true
				}
			}
		}
		return true
	})
	return text.String(), found
}

// formOf tells a response line's shape: the one the normalizer read it
// by, else from its envelope.
func formOf(b []byte, top span, f *fields, rec *store.Record, info *lineInfo, m IDPath) form {
	switch {
	case m.fields() && m.paths[mText] != nil:
		return fMapped
	case info.other:
		return info.form
	case info.chunk:
		return fChunk
	}
	switch rec.Shape {
	case store.ShapeSGLang:
		return fSGLang
	case store.ShapeIDsOnly:
		return fIDsOnly
	case store.ShapeBatch:
		if r := getTop(b, top, f, "response"); get(b, r, "body").ok() {
			if str(b, get(b, get(b, r, "body"), "object")) == "response" {
				return fResponses
			}
			return fBatch
		}
		return fBatchOld
	case store.ShapeOpenAI:
		switch {
		case str(b, getTop(b, top, f, "object")) == "response":
			return fResponses
		case isObject(b, getTop(b, top, f, "message")) && isObject(b, getTop(b, top, f, "usage")) &&
			(get(b, getTop(b, top, f, "usage"), "tokens").ok() || get(b, getTop(b, top, f, "usage"), "billed_units").ok()):
			return fCohere
		case getTop(b, top, f, "choices").ok():
			return fOpenAI
		case getTop(b, top, f, "output").ok():
			return fDashScope
		case getTop(b, top, f, "content").ok():
			return fAnthropic
		}
		return fOpenAI
	}
	if getTop(b, top, f, "choices").ok() {
		return fOpenAI
	}
	return fFlat
}

// getTop is get on a line's top-level object at top, whose fields the
// normalizer read into f: a key among them is found without scanning the
// line again (any other is looked for in the line).
func getTop(b []byte, top span, f *fields, key string) span {
	switch key {
	case "text":
		return f.text
	case "choices":
		return f.choices
	case "response":
		return f.response
	case "output":
		return f.output
	case "content":
		return f.content
	case "reasoning_content":
		return f.reasoningContent
	case "output_ids":
		return f.outputIDs
	case "prompt_ids":
		return f.promptIDs
	case "object":
		return f.object
	case "message":
		return f.message
	case "usage":
		return f.usage
	case "turns":
		return f.turns
	}
	return get(b, top, key)
}

// walkTop is walk from the top-level object along path (at least one
// key), its first key found by getTop.
func walkTop(b []byte, top span, f *fields, path []string) span {
	return walk(b, getTop(b, top, f, path[0]), path[1:])
}

// readAnswerInner is ReadAnswerRecord, called through a func value (a
// nested answer's parts): a direct call would put every line's fields on
// the heap (see readInner).
var readAnswerInner func(line []byte, m IDPath, rec *store.Record) (Answer, error, error)

func init() { readAnswerInner = ReadAnswerRecord }

// readText sets a's text from the first of paths that holds one: a
// string, or a list of parts (joinParts; thinking parts go to
// reasoning). A value of another kind is an error.
func readText(b []byte, top span, f *fields, paths [][]string, a *Answer, reasoning *strings.Builder) error {
	for _, p := range paths {
		v := walkTop(b, top, f, p)
		if !v.ok() || isNull(b, v) {
			continue
		}
		switch b[v.s] {
		case '"':
			a.TextRaw = val(b, v)
		case '[':
			if s, ok := joinParts(b, v, reasoning); ok {
				a.Text = &s
			}
		default:
			return fmt.Errorf("%q is not a string", strings.Join(p, "."))
		}
		return nil
	}
	return nil
}
