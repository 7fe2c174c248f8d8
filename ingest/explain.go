package ingest

import (
	"fmt"
	"strconv"
	"strings"

	"gendex/store"
)

// Explain says how the indexer reads a file's first lines (`gendex ingest
// --explain`): for each line the rule and shape that read it, and for
// each field its value and where in the line it came from, or why it is
// unknown, or why the line is skipped. It reads each line as the indexer
// does (chunk.add, then ReadAnswerRecord for the text) and writes
// nothing.
//
// Where a value comes from is asked of the reading itself, not kept by
// it: each value of the line (a string, a number, true or false, a list
// of numbers) is changed in a copy of the line, and the copy is read
// again (explainsrc.go). A field whose value changes as the line's value did
// (the string's mark found in it, the number one more or less) was read
// from there; a field that changes otherwise was decided by it (a type,
// a status). So the answer is right whatever rules read the line, and
// the indexer's reading carries nothing for it.

// ExplainedFields are the fields Explain reports, in its order.
var ExplainedFields = [numExplained]string{"id", "text", "prompt_tokens", "completion_tokens", "cached_tokens",
	"reasoning_tokens", "finish_reason", "error", "reasoning"}

const (
	xID = iota
	xText
	xPrompt
	xCompletion
	xCached
	xReasoningTokens
	xFinish
	xError
	xReasoning
	numExplained
)

// mappedOf is the Mapping field of each explained field.
var mappedOf = [numExplained]int{xID: mID, xText: mText, xPrompt: mPrompt, xCompletion: mCompletion, xCached: mCached,
	xReasoningTokens: mReasoningTokens, xFinish: mFinish, xError: mError, xReasoning: mReasoning}

// LineReport is how one line reads.
type LineReport struct {
	File string `json:"file"`
	Line int64  `json:"line"`
	// Rule is the row of the table of line shapes that read the line
	// (lineshape.go), and Shape the answer shape (shapes.go's names;
	// empty for a line of a stage that holds no answer).
	Rule  string `json:"rule,omitempty"`
	Shape string `json:"shape,omitempty"`
	// Stage is where its record goes: the file's stage, or errors for a
	// failed request.
	Stage string `json:"stage,omitempty"`
	// Skipped says why the line is not indexed ("" when it is).
	Skipped string `json:"skipped,omitempty"`
	// Notes are what ingest says of the line (an id no prompt carries,
	// counts that do not add up, ...).
	Notes  []string      `json:"notes,omitempty"`
	Fields []FieldReport `json:"fields,omitempty"`
	// Partial says the line has more values than were changed to find
	// the sources (the first maxLeaves): a source past them is not named.
	Partial bool `json:"partial,omitempty"`
}

// FieldReport is one field of a line: its value as read, and where from.
type FieldReport struct {
	Field string `json:"field"`
	// Known says the line gives the field; Value is then what was read
	// (a count in digits, a text whole), else "".
	Known bool   `json:"known"`
	Value string `json:"value,omitempty"`
	// From are the dotted paths (as --field takes them) of the values it
	// was read from; By those that decided it without being it.
	From []string `json:"from,omitempty"`
	By   []string `json:"decided_by,omitempty"`
	// Why says why it is unknown, or why there is none; or where a
	// value not read from the line is from (an id from its file and line).
	Why string `json:"why,omitempty"`
}

// Explain reads the first n non-empty lines of src's file, with src's
// mapping (src.IDPath: --id, --field and --map, or the one the index
// keeps for the file), and reports how each reads.
func Explain(src Source, n int) ([]LineReport, error) {
	m, err := ParseIDPath(src.IDPath)
	if err != nil {
		return nil, err
	}
	lines, err := headLines(src.Path, n)
	if err != nil {
		return nil, err
	}
	reps := make([]LineReport, 0, len(lines))
	for _, l := range lines {
		reps = append(reps, explainLine(src, m, l))
	}
	return reps, nil
}

// explainLine reports how one line reads.
func explainLine(src Source, m IDPath, l headLine) LineReport {
	rep := LineReport{File: src.Path, Line: l.no}
	r := readFor(src, m, l.b, l.no)
	rep.Notes = r.notes
	if r.skipped != "" {
		rep.Skipped = r.skipped
		return rep
	}
	rep.Rule, rep.Shape, rep.Stage = r.rule, r.shape, r.stage.String()
	from, by, partial := sources(src, m, l.b, l.no, &r)
	rep.Partial = partial
	for _, k := range explainedFor(src.Stage, r.stage) {
		fr := FieldReport{Field: ExplainedFields[k], Known: r.known[k], Value: r.vals[k], From: from[k], By: by[k]}
		if !fr.Known {
			fr.Value, fr.Why = "", whyNot(k, &r, m, l.b)
		}
		if len(fr.From) > 0 {
			fr.By = nil
		}
		if k == xID && r.info.lineID {
			fr.From, fr.By, fr.Why = nil, nil, "the line has no id: it is known by its file and line"
		}
		rep.Fields = append(rep.Fields, fr)
	}
	return rep
}

// explainedFor are the fields a line of stage reads, its record going
// to got.
func explainedFor(stage, got store.Stage) []int {
	switch {
	case stage == store.Prompts || stage == store.Tokenized:
		return []int{xID, xPrompt}
	case stage == store.Errors || stage == store.Excluded || got == store.Errors:
		return []int{xID, xFinish, xError}
	}
	return []int{xID, xText, xPrompt, xCompletion, xCached, xReasoningTokens, xFinish, xError, xReasoning}
}

// A reading is what the indexer makes of one line, field by field.
type reading struct {
	skipped string   // why the line is not indexed ("" when it is)
	notes   []string // what ingest says of it
	stage   store.Stage
	vals    [numExplained]string
	known   [numExplained]bool
	// rule, shape, noText, form and info: see LineReport, Answer.NoText;
	// form is numForms when the line is no answer.
	rule, shape, noText string
	form                form
	info                lineInfo
}

// readFor reads line (number no of src's file) as the indexer does: the
// record chunk.add makes of it, and for an answer the text
// ReadAnswerRecord reads.
func readFor(src Source, m IDPath, line []byte, no int64) reading {
	r := reading{form: numForms}
	var c chunk
	var warned onceARead
	c.add(src, m, line, 0, no, &warned)
	for _, p := range c.problems {
		if p.Kind.Skips() {
			r.skipped = strings.TrimSuffix(p.Msg, "; line skipped")
		} else {
			r.notes = append(r.notes, p.Msg)
		}
	}
	var rec store.Record
	st, info, err := normalize(line, src.Stage, m, &rec)
	r.info = info
	if len(c.recs) == 0 {
		if r.skipped == "" && err == nil && info.partial {
			r.skipped = "a stream's event before its last: the last holds the answer's counts and is its record"
		}
		return r
	}
	p := &c.recs[0]
	r.stage = p.stage
	r.rule = ruleOf(line, src.Stage, m, st, info)
	r.set(xID, p.rec.ID, true)
	counts := [numExplained]*int64{xPrompt: &p.rec.PromptTokens, xCompletion: &p.rec.CompletionTokens,
		xCached: &p.rec.CachedTokens, xReasoningTokens: &p.rec.ReasoningTokens}
	for k, v := range counts {
		if v != nil {
			r.set(k, strconv.FormatInt(*v, 10), *v >= 0)
		}
	}
	r.set(xFinish, p.rec.Finish, p.rec.Finish != "")
	if p.stage == store.Errors || src.Stage == store.Excluded {
		r.set(xError, p.rec.Message, p.rec.Message != "")
	}
	if info.chunk {
		r.notes = append(r.notes, "an OpenAI stream chunk: one record with the file's other chunks of its id")
	}
	if src.Stage != store.Raw && src.Stage != store.Turns || p.stage == store.Errors {
		return r
	}
	a, _, err := ReadAnswerRecord(line, m, &rec)
	if err != nil {
		r.noText = describe(err)
		return r
	}
	r.shape, r.noText = a.Shape, a.NoText
	r.form = formNamed(a.Shape)
	if n := turnsOf(a.Turns); n > 0 && a.TextRaw == nil && a.Text == nil {
		r.noText = fmt.Sprintf("%s: a conversation's line; each of its %d turns holds its own (turns.0.text, ...)", inTurns, n)
	}
	switch {
	case a.TextRaw != nil:
		s, _ := decodeString(a.TextRaw)
		r.set(xText, s, true)
	case a.Text != nil:
		r.set(xText, *a.Text, true)
	}
	r.set(xReasoning, a.Reasoning, a.Reasoning != "")
	return r
}

func (r *reading) set(k int, v string, known bool) { r.vals[k], r.known[k] = v, known }

// ruleOf names the rule that read a line of stage (got: the stage its
// record went to): a shape of other's, a file's own map, or the row of
// the table of line shapes, by the start of its name.
func ruleOf(line []byte, stage store.Stage, m IDPath, got store.Stage, info lineInfo) string {
	var f fields
	if _, _, err := readTop(line, &f, m.idPath()); err != nil {
		return ""
	}
	row := lineShapes[kindOf(line, &f, stage, m)].name
	if i := strings.Index(row, ":"); i > 0 {
		row = row[:i]
	}
	switch {
	case m.fields(): // the file's map: the header and the shape say so
	case m != nil:
		row += ", with the id at " + m.String()
	case info.other:
		row += ", then other.go's shapes"
	}
	if got != stage {
		row += "; a failed request: its record goes to " + got.String()
	}
	return row
}

// formNamed is the form called name, numForms for none.
func formNamed(name string) form {
	for k, f := range forms {
		if f.name == name {
			return form(k)
		}
	}
	return numForms
}

// whyNot says why field k of a line is unknown or none.
func whyNot(k int, r *reading, m IDPath, line []byte) string {
	if p := m.pathOf(mappedOf[k]); p != nil {
		var f fields
		top, _, err := readTop(line, &f, nil)
		if err == nil {
			if why, _ := miss(line, top, p); why != "" {
				return why + " (the map's " + MappedFields[mappedOf[k]] + ")"
			}
		}
		return "at " + strings.Join(p, ".") + " (the map's), no value of that kind"
	}
	shape := "the line's shape"
	switch {
	case m.fields() && k != xError && k != xReasoning:
		return "not in the line where the built-in rules look (give --field " + MappedFields[mappedOf[k]] + "=PATH)"
	case r.form < numForms:
		shape = unquote(forms[r.form].name)
	}
	switch k {
	case xText:
		if r.noText != "" {
			return r.noText
		}
		return "none"
	case xPrompt, xCompletion, xCached, xReasoningTokens:
		if r.info.countsOff != "" {
			return r.info.countsOff
		}
		if r.form < numForms && forms[r.form].counts != "" {
			return "not in the line; " + shape + " keeps counts at " + unquote(forms[r.form].counts)
		}
		return "not in the line, where any rule looks"
	case xFinish:
		if r.form < numForms && forms[r.form].finish != "" {
			return "not in the line; " + shape + " keeps it at " + unquote(forms[r.form].finish)
		}
		return "not in the line"
	case xError:
		return "none: the line is not a failed request"
	case xReasoning:
		return "none in the line"
	}
	return ""
}

// inTurns starts the why of a conversation line's text, which is in its
// turns, not unknown.
const inTurns = "in its turns"

// turnsOf is how many elements the JSON array turns has.
func turnsOf(turns []byte) int {
	n := 0
	eachElement(turns, span{s: 0, e: len(turns)}, func(span) bool { n++; return true })
	return n
}

// pathOf is field k's path in the map, nil when the map gives none.
func (m *Mapping) pathOf(k int) []string {
	if m == nil {
		return nil
	}
	return m.paths[k]
}

func unquote(s string) string { return strings.ReplaceAll(s, "`", "") }
