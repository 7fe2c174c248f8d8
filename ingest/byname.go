package ingest

import (
	"errors"
	"strconv"
	"strings"

	"gendex/store"
)

// The rules that read a response line by what its keys' names say
// (names.go), where no shape decides: where its answer is (a field named
// as one, or the line's only answer-like object, nested), whether it
// reports a failed request instead, and where its counts are. None names
// a tool; each is checked on lines of several (rules_test.go).

// holds says the value at sp holds something: a string, a list or an
// object that is not empty (null, false, true, a number: nothing said).
func holds(b []byte, sp span) bool {
	if !sp.ok() {
		return false
	}
	switch b[sp.s] {
	case '"':
		return sp.e-sp.s > 2
	case '[', '{':
		return b[skipSpace(b, sp.s+1)] != b[sp.s]+2 // not [] or {}
	}
	return false
}

// topNames is what the names of an object's keys say of it.
type topNames struct {
	answer span // the first field named as an answer that holds one
	// errorV is the first field named as an error that holds one, or an
	// object named as an answer that is an error (errorObject).
	errorV span
	status span // "status" or "state", a string
}

// namesOf reads what the names of the keys of the object at sp say.
func namesOf(b []byte, sp span) topNames {
	var t topNames
	_, _ = eachField(b, sp.s, 1, func(k []byte, escaped bool, vs, ve, n int) error {
		if escaped {
			k = []byte(decodeKey(k, true))
		}
		v := span{vs, ve, n}
		if (string(k) == "status" || string(k) == "state") && isString(b, v) {
			t.status = v
			return nil
		}
		w := wordsOf(k)
		switch {
		case isAnswerName(w) && b[vs] == '{' && errorObject(b, v): // an error in the answer's place
			if !t.errorV.ok() {
				t.errorV = v
			}
		case isAnswerName(w):
			if holds(b, v) && !t.answer.ok() {
				t.answer = v
			}
		case isErrorName(w) && holds(b, v) && !t.errorV.ok():
			t.errorV = v
		}
		return nil
	})
	return t
}

// failedByName is the rule of what makes a response line an error when
// its shape does not say: a status of its own that says the request
// failed (failed, canceled, expired, ...: lifecycleOf), whatever part of
// an answer came with it; or a field named as an error that holds one
// (response_errors, error_message) while the line holds no answer (no
// reply, no count, no field named as an answer that holds one). It fills
// rec as the error: its message, and as its finish the status word, else
// "error".
func failedByName(b []byte, top span, f *fields, rec *store.Record) bool {
	// Most lines have neither: say so from the keys already read.
	failed := isString(b, f.status) && lifecycleOf(str(b, f.status)) == lifeFailed
	if !failed && !holds(b, f.errorV) && !f.errorNamed.ok() {
		return false
	}
	t := namesOf(b, top)
	if !failed && !(t.errorV.ok() && !t.answer.ok() && noReply(b, f, rec) && !f.isAnswer(b)) {
		return false
	}
	asError(b, t, rec)
	return true
}

// asError makes rec the error an object reports, t what its keys' names
// say: its status word as the finish when it says the request failed,
// else the error's own code (errorCode), else "error"; its error's
// message, else its status.
func asError(b []byte, t topNames, rec *store.Record) {
	*rec = store.Record{File: rec.File, Offset: rec.Offset, Length: rec.Length, Line: rec.Line, Sum: rec.Sum, ID: rec.ID,
		PromptTokens: store.Unknown, CompletionTokens: store.Unknown, CachedTokens: store.Unknown, ReasoningTokens: store.Unknown,
		Shape: store.ShapeError, Finish: errorCode(b, t.errorV, 0), Message: errorText(b, t.errorV, 0)}
	if rec.Finish == "" {
		rec.Finish = "error"
	}
	if st := str(b, t.status); lifecycleOf(st) == lifeFailed {
		rec.Finish = strings.ToLower(st)
		if rec.Message == "" {
			rec.Message = "the request's status is " + st
		}
	}
}

// answerKeyOf is the name of the object's first key named as an answer
// whose value is text: a string, or a list (of strings or text parts);
// "" for none.
func answerKeyOf(b []byte, sp span) string {
	name := ""
	_, _ = eachField(b, sp.s, 1, func(k []byte, escaped bool, vs, ve, n int) error {
		if name == "" && (b[vs] == '"' || b[vs] == '[') && holds(b, span{vs, ve, n}) && isAnswerName(wordsOf(k)) {
			name = decodeKey(k, escaped)
		}
		return nil
	})
	return name
}

// errorCode is an error object's own word for it: its "code" or "type"
// when a string, or its inner error object's; "" for none.
func errorCode(b []byte, sp span, depth int) string {
	if !isObject(b, sp) || depth > 3 {
		return ""
	}
	for _, k := range [...]string{"code", "type"} {
		if c := str(b, get(b, sp, k)); c != "" && c != "error" {
			return c
		}
	}
	return errorCode(b, get(b, sp, "error"), depth+1)
}

// errorText is the message of an error value: a string, the first of a
// list, or an object's message (message, msg, error, detail, or the
// message of its own error object).
func errorText(b []byte, sp span, depth int) string {
	if !sp.ok() || depth > 3 {
		return ""
	}
	switch b[sp.s] {
	case '"':
		return str(b, sp)
	case '[':
		s := ""
		eachElement(b, sp, func(e span) bool {
			s = errorText(b, e, depth+1)
			return s == ""
		})
		return s
	case '{':
		for _, k := range [...]string{"message", "msg", "error_message", "errorMessage", "error", "detail"} {
			if s := errorText(b, get(b, sp, k), depth+1); s != "" {
				return s
			}
		}
	}
	return ""
}

// nestedFind is what the search for a line's nested answer found: how
// many answer-like objects (counted to 2), and the first one's place and
// path; isErr says it reports a failed request instead.
type nestedFind struct {
	n               int
	at              span
	path            string
	isErr, searched bool
}

// maxNestedDepth is how deep the search looks: an answer in
// metadata.inference_results[0] is at depth 2.
const maxNestedDepth = 3

// findNested is the rule of where an answer nested in a line is: in an
// object of the line (at any depth to maxNestedDepth, through objects and
// lists, never in one named as an input or a setting: a request, a
// prompt, its parameters) that is an answer by isAnswer and not an
// unfinished one (its finish or stop reason null: a stream's first
// event), or, under a key named as an answer, an object that reports a
// failed request (a field named as an error that holds one, and no
// answer). The line's answer is the only one found; with two or more,
// none is (nf.n says how many).
func findNested(b []byte, sp span, depth int, underAnswer bool, path string, nf *nestedFind) {
	visit := func(v span, name string, answerKey bool) {
		p := name
		if path != "" {
			p = path + "." + name
		}
		if b[v.s] == '{' {
			if answerObject(b, v) || answerKey && errorObject(b, v) {
				nf.n++
				if nf.n == 1 {
					nf.at, nf.path, nf.isErr = v, p, !answerObject(b, v)
				}
				return
			}
		}
		if depth < maxNestedDepth && (b[v.s] == '{' || b[v.s] == '[') {
			findNested(b, v, depth+1, answerKey, p, nf)
		}
	}
	switch b[sp.s] {
	case '{':
		_, _ = eachField(b, sp.s, 1, func(k []byte, escaped bool, vs, ve, n int) error {
			if nf.n > 1 {
				return nil
			}
			name := string(k)
			if escaped {
				name = decodeKey(k, true)
			}
			w := wordsOf([]byte(name))
			if w&(wInput|wSetting) != 0 {
				return nil
			}
			visit(span{vs, ve, n}, name, isAnswerName(w))
			return nil
		})
	case '[':
		i := 0
		eachElement(b, sp, func(e span) bool {
			visit(e, strconv.Itoa(i), underAnswer)
			i++
			return nf.n <= 1
		})
	}
}

// answerObject says the object at sp is an answer (isAnswer) that ended:
// its finish or stop reason, when it names one, is not null.
func answerObject(b []byte, sp span) bool {
	o, ok := sub(b, sp)
	if !ok || !o.isAnswer(b) {
		return false
	}
	return !(o.finish.ok() && isNull(b, o.finish)) && !(o.stopReason.ok() && isNull(b, o.stopReason))
}

// errorObject says the object at sp reports a failed request: a field
// named as an error holds one, and none named as an answer does.
func errorObject(b []byte, sp span) bool {
	t := namesOf(b, sp)
	return t.errorV.ok() && !t.answer.ok()
}

// countsByName is the rule of where else a response's counts may be:
// under a name that says what it counts (countFamily: num_input_tokens,
// output_token_count, token_usage.output), in the object at sp or an
// object in it, or one in that (never in one named as an input or a
// setting). The nearest is read (as near: the one in an object named as
// counts); two as near that disagree are none. It fills the prompt and
// completion counts rec does not have, and reports whether it found a
// completion count.
func countsByName(b []byte, sp span, rec *store.Record) bool {
	var c [2]nameCount // the prompt's, the answer's
	scanCounts(b, sp, 0, false, &c)
	if rec.PromptTokens < 0 && c[0].ok && !c[0].clash {
		rec.PromptTokens = c[0].n
	}
	if rec.CompletionTokens < 0 && c[1].ok && !c[1].clash {
		rec.CompletionTokens = c[1].n
		return true
	}
	return false
}

// nameCount is the nearest count of one family found by countsByName;
// usage says its object's name is of counts ("tokens", "usage").
type nameCount struct {
	n                int64
	depth            int
	ok, usage, clash bool
}

// see keeps the count n found at depth (usage: as nameCount's) when it
// is nearer, or as near and in an object named as counts where the one
// kept is not (meta.tokens over meta.billed_units); two as near that
// disagree are none.
func (c *nameCount) see(n int64, depth int, usage bool) {
	switch {
	case !c.ok || depth < c.depth || depth == c.depth && usage && !c.usage:
		*c = nameCount{n: n, depth: depth, ok: true, usage: usage}
	case depth == c.depth && usage == c.usage && n != c.n:
		c.clash = true
	}
}

// scanCounts looks for countsByName's counts in the object at sp, found
// at depth; usage says its name is of an object of counts.
func scanCounts(b []byte, sp span, depth int, usage bool, c *[2]nameCount) {
	_, _ = eachField(b, sp.s, 1, func(k []byte, escaped bool, vs, ve, n int) error {
		if escaped {
			k = []byte(decodeKey(k, true))
		}
		w := wordsOf(k)
		v := span{vs, ve, n}
		if b[vs] == '{' {
			if depth < 2 && w&(wInput|wSetting) == 0 {
				scanCounts(b, v, depth+1, w&(wUsage|wToken) != 0, c)
			}
			return nil
		}
		fam := countFamily(w, usage)
		if fam == 0 {
			return nil
		}
		if n, ok := decodeCount(val(b, v)); ok {
			if fam == wInput {
				c[0].see(n, depth, usage)
			} else {
				c[1].see(n, depth, usage)
			}
		}
		return nil
	})
}

// notAFinish says a word a line writes as its finish reason is a
// request's lifecycle status (succeeded, completed, in_progress,
// canceled, ...), not why its generation stopped. ("error" and "timeout"
// are a generation's end as some providers write it.)
func notAFinish(s string) bool {
	switch lifecycleOf(s) {
	case lifeDone, lifePending:
		return true
	case lifeFailed:
		return !strings.EqualFold(s, "error") && !strings.EqualFold(s, "timeout")
	}
	return false
}

// isStreamEvent says the line is one event of a stream: it holds a delta
// (a piece of an answer), at its top level or in its first choice, or is
// an OpenAI chunk. With no id to merge it by, it is no answer of its own.
func isStreamEvent(b []byte, f *fields) bool {
	if f.delta.ok() || string(val(b, f.object)) == `"chat.completion.chunk"` {
		return true
	}
	if !f.choices.ok() || b[f.choices.s] != '[' {
		return false
	}
	found := false
	eachElement(b, f.choices, func(e span) bool {
		found = get(b, e, "delta").ok()
		return false
	})
	return found
}

// topNames is namesOf the line's top-level object, read once.
func (l *lineScan) topNames(b []byte) *topNames {
	if !l.hasNames {
		l.names, l.hasNames = namesOf(b, l.top), true
	}
	return &l.names
}

// search is findNested of the line at top, done once (searched says it
// was: n, at and path are then what it found).
func (nf *nestedFind) search(b []byte, top span) *nestedFind {
	if !nf.searched {
		findNested(b, top, 0, false, "", nf)
		nf.searched = true
	}
	return nf
}

// answerLike is the rule of what makes a response line with no id a
// record known by its line: it is an answer (isAnswer), or a field named
// as one holds one ("text_output", "response_message"), or it reports a
// failed request by name (a field named as an error that holds one, a
// failed status), or its only answer-like object is nested in it.
func (l *lineScan) answerLike(b []byte, nested *nestedFind) bool {
	if l.f.isAnswer(b) {
		return true
	}
	t := l.topNames(b)
	if t.answer.ok() || t.errorV.ok() || lifecycleOf(str(b, t.status)) == lifeFailed {
		return true
	}
	return nested.search(b, l.top).n == 1
}

// byName reads a response line that no shape gave a count: when an
// error is in its answer's place, it is that error; when it holds no
// answer at its top level (isAnswer, or a field named as one that is no
// object), its only nested answer is its answer (done, with its stage);
// else its counts are read where their names say (countsByName).
func (l *lineScan) byName(b []byte, rec *store.Record, info *lineInfo, nested *nestedFind) (store.Stage, bool) {
	if t := l.topNames(b); t.errorV.ok() && !t.answer.ok() && !l.f.isAnswer(b) && noReply(b, l.f, rec) {
		asError(b, *t, rec) // an error in the answer's place ("response": {"error": ...})
		return store.Errors, true
	}
	if a := l.topNames(b).answer; !l.f.isAnswer(b) && (!a.ok() || b[a.s] == '{') {
		if nf := nested.search(b, l.top); nf.n == 1 {
			return readNested(b, nf, rec, info), true
		}
	}
	if rec.CompletionTokens < 0 && countsByName(b, l.top, rec) {
		rec.Shape = store.ShapeFlat
	}
	return 0, false
}

// readNested reads the line's nested answer (nf) into rec, read as
// a line of its own: its counts, finish reason, time and shape, and its
// id when the line has none (a server's request id then: info.serverID
// names its path); or the error it reports. It returns the stage.
func readNested(b []byte, nf *nestedFind, rec *store.Record, info *lineInfo) store.Stage {
	if nf.isErr {
		asError(b, namesOf(b, nf.at), rec)
		return store.Errors
	}
	var in store.Record
	var f fields
	st, ii, err := readInner(b[nf.at.s:nf.at.e], store.Raw, nil, &in, &f)
	if err != nil && !errors.Is(err, ErrNoID) {
		return store.Raw // cannot be: the line was read whole
	}
	if st == store.Errors {
		rec.Shape, rec.Finish, rec.Message = in.Shape, in.Finish, in.Message
		return store.Errors
	}
	rec.PromptTokens, rec.CompletionTokens, rec.CachedTokens, rec.ReasoningTokens = in.PromptTokens, in.CompletionTokens, in.CachedTokens, in.ReasoningTokens
	rec.Finish, rec.Shape, rec.ToolStop = in.Finish, in.Shape, in.ToolStop
	rec.SpecVerify, rec.SpecAccepted, rec.SpecProposed = in.SpecVerify, in.SpecAccepted, in.SpecProposed
	if in.OwnTime {
		rec.Time = in.Time
	}
	info.countsOff = ii.countsOff
	info.nested, info.nestedPath = nf.at, nf.path
	if info.lineID && err == nil && !ii.lineID {
		sid := ii.serverID
		if sid == "" {
			sid = "id"
		}
		rec.ID, info.lineID, info.emptyID, info.serverID = in.ID, false, false, nf.path+"."+sid
	}
	return store.Raw
}

// readInner is readLine, called through a func value: a direct call would
// close a cycle (readLine, readAny, readNested) in which the compiler
// cannot see that every line's fields stay on its reader's stack, and put
// them on the heap (TestLineScratchStaysOnStack). Only a nested answer's
// fields go there.
var readInner func(line []byte, stage store.Stage, path IDPath, rec *store.Record, f *fields) (store.Stage, lineInfo, error)

func init() { readInner = readLine }

// onlyObject is the span of the one element of a line that is a list
// holding one object and nothing else (a server's body for one request,
// as the Hugging Face Inference API answers [{"generated_text": ...}]);
// ok is false for any other line.
func onlyObject(b []byte) (one span, ok bool) {
	i := skipSpace(b, 0)
	end := len(b)
	for end > i && isSpace(b[end-1]) {
		end--
	}
	if i >= end || b[i] != '[' {
		return one, false
	}
	n := 0
	eachElement(b, span{s: i, e: end}, func(e span) bool {
		n++
		one = e
		return n < 2
	})
	return one, n == 1 && b[one.s] == '{'
}

// readOnly is readTop for a response line that is a list of one object
// (onlyObject): that object is the line's (ErrNotObject for any other
// list or value). The line was validated by readTop.
func readOnly(b []byte, f *fields, idPath []string) (top, at span, err error) {
	one, ok := onlyObject(b)
	if !ok {
		return top, at, ErrNotObject
	}
	*f = fields{}
	if idPath == nil {
		_, err = readObject(b, one.s, f)
	} else {
		_, at, err = readObjectKey(b, one.s, f, idPath[0])
	}
	return one, at, err
}
