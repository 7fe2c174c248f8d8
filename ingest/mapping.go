package ingest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"gendex/store"
)

// Mapping says where a file's lines keep what gendex reads, for a shape
// no one built in (`ingest --map`), and where they keep their id
// (`ingest --id`): for each of gendex's fields a dotted path ("meta.uid",
// "choices.0.text": a number indexes an array). A field without a path
// is read by the built-in rules; a path that is given is the only place
// read for its field.
type Mapping struct {
	paths [numMapped][]string
}

// The fields a Mapping can place, in the order its text names them.
const (
	mID = iota
	mPrompt
	mCompletion
	mCached
	mReasoningTokens
	mFinish
	mText
	mReasoning
	mError
	numMapped
)

// MappedFields names the fields a mapping can place, as --map takes them.
var MappedFields = [numMapped]string{"id", "prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens",
	"finish_reason", "text", "reasoning", "error"}

// IDPath is a file's Mapping; nil means the built-in rules (see
// Normalize). Its text form is a dotted path for the id alone
// ("question_id", "meta.uid"), or fields and paths
// ("id=meta.uid,completion_tokens=stats.out"); see ParseIDPath.
type IDPath = *Mapping

// ParseIDPath reads a mapping from its text form: a dotted path, the id's
// (`--id meta.uid`), or FIELD=PATH pairs joined by commas, FIELD one of
// MappedFields. The empty string is the nil IDPath. A key that itself
// holds a dot, a comma or an equals sign cannot be named.
func ParseIDPath(s string) (IDPath, error) {
	if s == "" {
		return nil, nil
	}
	m := &Mapping{}
	if !strings.Contains(s, "=") {
		p, err := parsePath(s, "id path")
		m.paths[mID] = p
		return m, err
	}
	for _, pair := range strings.Split(s, ",") {
		field, path, ok := strings.Cut(pair, "=")
		k := fieldIndex(field)
		if !ok || k < 0 {
			return nil, fmt.Errorf("mapping %q: %q is not FIELD=PATH with FIELD one of %s", s, pair, strings.Join(MappedFields[:], ", "))
		}
		p, err := parsePath(path, field+" path")
		if err != nil {
			return nil, err
		}
		if m.paths[k] != nil {
			return nil, fmt.Errorf("%s is given twice (%s and %s): give each field once", field, strings.Join(m.paths[k], "."), path)
		}
		m.paths[k] = p
	}
	return m, nil
}

func fieldIndex(name string) int {
	for i, f := range MappedFields {
		if f == name {
			return i
		}
	}
	return -1
}

func parsePath(s, what string) ([]string, error) {
	p := strings.Split(s, ".")
	for _, k := range p {
		if k == "" {
			return nil, fmt.Errorf("%s %q has an empty key (want keys joined by dots, e.g. meta.uid)", what, s)
		}
	}
	return p, nil
}

// JoinMapping makes the text form of a mapping from --id's path and
// --map's FIELD=PATH pairs: the id path alone when there are no pairs, so
// that a file indexed with --id keeps the form earlier versions stored;
// else every field in MappedFields order, so that one mapping has one
// text (another text is another mapping: the file is indexed again).
func JoinMapping(idPath, pairs string) (string, error) {
	if pairs == "" {
		if _, err := ParseIDPath(idPath); err != nil {
			return "", err
		}
		return idPath, nil
	}
	if strings.Contains(idPath, "=") {
		return "", fmt.Errorf("--id %q: a path, not FIELD=PATH", idPath)
	}
	m, err := ParseIDPath(pairs)
	if err != nil {
		return "", err
	}
	if !strings.Contains(pairs, "=") {
		return "", fmt.Errorf("--map %q: want FIELD=PATH pairs joined by commas (FIELD one of %s)", pairs, strings.Join(MappedFields[:], ", "))
	}
	if idPath != "" {
		if m.paths[mID] != nil {
			return "", fmt.Errorf("the id is given twice: --id %s and --map id=%s", idPath, strings.Join(m.paths[mID], "."))
		}
		if m.paths[mID], err = parsePath(idPath, "id path"); err != nil {
			return "", err
		}
	}
	return m.String(), nil
}

func (m *Mapping) String() string {
	if m == nil {
		return ""
	}
	if m.onlyID() {
		return strings.Join(m.paths[mID], ".")
	}
	var parts []string
	for k, p := range m.paths {
		if p != nil {
			parts = append(parts, MappedFields[k]+"="+strings.Join(p, "."))
		}
	}
	return strings.Join(parts, ",")
}

// onlyID reports whether the mapping places the id and nothing else.
func (m *Mapping) onlyID() bool {
	for k := mID + 1; k < numMapped; k++ {
		if m.paths[k] != nil {
			return false
		}
	}
	return m.paths[mID] != nil
}

// idPath is the id's path, nil when the built-in rules find the id.
func (m *Mapping) idPath() []string {
	if m == nil {
		return nil
	}
	return m.paths[mID]
}

// fields reports whether the mapping places anything but the id.
func (m *Mapping) fields() bool { return m != nil && !m.onlyID() }

// walk follows path from the value at sp: an object key, or the index of
// an array element for a key of digits. The span is absent when a step
// finds nothing. The line was validated already.
func walk(b []byte, sp span, path []string) span {
	for _, key := range path {
		if !sp.ok() {
			return span{}
		}
		switch b[sp.s] {
		case '{':
			sp = get(b, sp, key)
		case '[':
			n, err := strconv.Atoi(key)
			if err != nil || n < 0 {
				return span{}
			}
			var at span
			eachElement(b, sp, func(e span) bool {
				if n == 0 {
					at = e
					return false
				}
				n--
				return true
			})
			sp = at
		default:
			return span{}
		}
	}
	return sp
}

// get returns the span of key's value (the last one) in the object at sp.
func get(b []byte, sp span, key string) span {
	var at span
	if !sp.ok() || b[sp.s] != '{' {
		return at
	}
	_, _ = eachField(b, sp.s, 1, func(k []byte, escaped bool, vs, ve, n int) error {
		if escaped {
			k = []byte(decodeKey(k, true))
		}
		if string(k) == key {
			at = span{vs, ve, n}
		}
		return nil
	})
	return at
}

// apply reads the fields m places from the line's object at top into rec,
// over what the built-in rules read; it reports whether the mapped error
// field holds an error (a value other than null, false or "").
func (m *Mapping) apply(b []byte, top span, rec *store.Record) (failed bool) {
	counts := [...]*int64{mPrompt: &rec.PromptTokens, mCompletion: &rec.CompletionTokens,
		mCached: &rec.CachedTokens, mReasoningTokens: &rec.ReasoningTokens}
	for k, dst := range counts {
		if dst == nil || m.paths[k] == nil {
			continue
		}
		*dst = -1
		if n, ok := decodeCount(val(b, walk(b, top, m.paths[k]))); ok {
			*dst = n
		}
	}
	if m.paths[mCompletion] != nil && rec.CompletionTokens >= 0 && rec.Shape == store.ShapeUnknown {
		rec.Shape = store.ShapeFlat
	}
	if m.paths[mFinish] != nil {
		rec.Finish = finishOf(b, walk(b, top, m.paths[mFinish]))
	}
	if m.paths[mError] == nil {
		return false
	}
	e := walk(b, top, m.paths[mError])
	if !e.ok() {
		return false
	}
	switch v := string(b[e.s:e.e]); {
	case v == "null" || v == "false" || v == `""`:
		return false
	case b[e.s] == '"':
		rec.Message = str(b, e)
	case b[e.s] == '{':
		rec.Message = str(b, get(b, e, "message"))
		if rec.Message == "" {
			rec.Message = str(b, get(b, e, "errorMessage"))
		}
	default:
		rec.Message = v
	}
	rec.Shape, rec.Finish = store.ShapeError, "error"
	rec.PromptTokens, rec.CompletionTokens, rec.CachedTokens, rec.ReasoningTokens = store.Unknown, store.Unknown, store.Unknown, store.Unknown
	return true
}

// MappingFlags is a mapping's text form as the flags that give it:
// "--id meta.uid", "--field id=uid --field text=answer.body".
func MappingFlags(spec string) string {
	m, err := ParseIDPath(spec)
	if err != nil || m == nil {
		return spec
	}
	if m.onlyID() {
		return "--id " + m.String()
	}
	return "--field " + strings.ReplaceAll(m.String(), ",", " --field ")
}

// mappingChange says how the mapping now (a text form, "" for the
// built-in rules) differs from the one a file was indexed with (was),
// field by field: "its map changed: completion_tokens now at stats.out
// (was usage.out); text now by the built-in rules (was answer.body)".
func mappingChange(now, was string) string {
	a, errA := ParseIDPath(now)
	b, errB := ParseIDPath(was)
	if errA != nil || errB != nil {
		return fmt.Sprintf("its map is now %q (was %q)", now, was)
	}
	at := func(m *Mapping, k int) string {
		if p := m.pathOf(k); p != nil {
			return strings.Join(p, ".")
		}
		if k == mID {
			return "custom_id or id"
		}
		return "the built-in rules"
	}
	var diffs []string
	for k := range MappedFields {
		n, w := at(a, k), at(b, k)
		if n == w {
			continue
		}
		how := func(s string) string {
			if s == "the built-in rules" {
				return "by " + s
			}
			return "at " + s
		}
		diffs = append(diffs, fmt.Sprintf("%s now %s (was %s)", MappedFields[k], how(n), strings.TrimPrefix(how(w), "at ")))
	}
	return "its map changed: " + strings.Join(diffs, "; ")
}

// miss says how far path goes from the value at sp (a line's top-level
// object): "" when it names a value there, else where it stops and what
// is there instead, e.g. "meta.usage.out: no such key; meta.usage has
// in, total". depth is how many of its keys it followed.
func miss(b []byte, sp span, path []string) (why string, depth int) {
	for i, key := range path {
		here := "the line"
		if i > 0 {
			here = strings.Join(path[:i], ".")
		}
		var next span
		switch b[sp.s] {
		case '{':
			if next = get(b, sp, key); !next.ok() {
				return fmt.Sprintf("%s: no such key; %s has %s", strings.Join(path[:i+1], "."), here, keysOf(b, sp)), i
			}
		case '[':
			n := 0
			eachElement(b, sp, func(span) bool { n++; return true })
			if k, err := strconv.Atoi(key); err != nil || k < 0 {
				return fmt.Sprintf("%s is a list of %d: want a number after it (%s.0)", here, n, here), i
			} else if k >= n {
				return fmt.Sprintf("%s: %s has %d elements", strings.Join(path[:i+1], "."), here, n), i
			}
			next = walk(b, sp, path[i:i+1])
		default:
			return fmt.Sprintf("%s is %s, not an object", here, kindName(b[sp.s])), i
		}
		sp = next
	}
	return "", len(path)
}

// keysOf lists the keys of the object at sp, the first 12 of them ("no
// keys" when it has none).
func keysOf(b []byte, sp span) string {
	var keys []string
	_, _ = eachField(b, sp.s, 1, func(k []byte, escaped bool, _, _, _ int) error {
		keys = append(keys, decodeKey(k, escaped))
		return nil
	})
	switch {
	case len(keys) == 0:
		return "no keys"
	case len(keys) > 12:
		keys = append(keys[:12], "...")
	}
	return strings.Join(keys, ", ")
}

func kindName(c byte) string {
	switch c {
	case '"':
		return "a string"
	case '[':
		return "a list"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "a number"
}

// checkLines is how many non-empty lines of a file CheckMapping reads.
const checkLines = 20

// MappingError says which paths of a mapping match nothing in the first
// lines of a file (CheckMapping).
type MappingError struct {
	Path   string   // the file
	Lines  int      // the lines read
	Misses []string // one per path: FIELD=PATH, where it stops, and in which line
	Keys   string   // the top-level keys of the lines read
}

func (e *MappingError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s:\n", e.Path)
	wrapWords(&b, fmt.Sprintf("%d of the map's paths match nothing in the file's first %d lines:", len(e.Misses), e.Lines), "  ", "  ")
	for _, m := range e.Misses {
		wrapWords(&b, m, "    ", "      ")
	}
	wrapWords(&b, "the lines' top-level keys: "+e.Keys, "  ", "    ")
	b.WriteString("nothing was indexed; fix the PATH ('gendex ingest --explain FILE' with the\nsame --field shows how each line reads)")
	return b.String()
}

// seldom are the fields a line may well not carry (a file's first lines
// may all be answers with no reasoning, no cached tokens): for them only
// the object that would hold the key must be there. An error is not
// checked: its object too may be there only when a request failed.
var seldom = [numMapped]bool{mCached: true, mReasoningTokens: true, mReasoning: true}

// CheckMapping reads the first non-empty lines of src's file and returns
// a *MappingError when a path of src's mapping (IDPath) that src's stage
// reads (the id alone, but for answers) matches nothing in any of them:
// the whole path, or for a field in seldom its object (an error's path
// is not checked). A line whose
// mapped error holds an error is left out of the other fields' check (a
// failed request has no answer; a file whose lines read are all failed
// passes). A file with no valid line yet passes.
func CheckMapping(src Source) error {
	m, err := ParseIDPath(src.IDPath)
	if m == nil || err != nil {
		return err
	}
	lines, err := headLines(src.Path, checkLines)
	if err != nil {
		return err
	}
	var tops []span
	var valid [][]byte
	var nos []int64
	var keys []string
	seen := map[string]bool{}
	for _, hl := range lines {
		l := hl.b
		var f fields
		top, _, err := readTop(l, &f, nil)
		if err != nil {
			continue
		}
		tops, valid, nos = append(tops, top), append(valid, l), append(nos, hl.no)
		for _, k := range strings.Split(keysOf(l, top), ", ") {
			if !seen[k] && k != "..." && k != "no keys" {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	if len(valid) == 0 {
		return nil
	}
	e := &MappingError{Path: src.Path, Lines: len(lines), Keys: strings.Join(keys, ", ")}
	for k, p := range m.paths {
		if p == nil || k == mError || k != mID && src.Stage != store.Raw && src.Stage != store.Turns {
			continue
		}
		if why, i := m.missIn(valid, tops, k); why != "" {
			e.Misses = append(e.Misses, fmt.Sprintf("%s (line %d): %s", MappedFields[k], nos[i], why))
		}
	}
	if len(e.Misses) > 0 {
		return e
	}
	return nil
}

// missIn is "" when field k's path matches in one of the lines (tops:
// their objects), else where it went farthest and in which of the lines
// (its index).
func (m *Mapping) missIn(lines [][]byte, tops []span, k int) (why string, line int) {
	p := m.paths[k]
	if seldom[k] {
		p = p[:len(p)-1]
	}
	best := -1
	for i, b := range lines {
		if k != mError && m.paths[mError] != nil {
			var rec store.Record
			if m.apply(b, tops[i], &rec) {
				continue // a failed request: no answer to find the path in
			}
		}
		w, depth := miss(b, tops[i], p)
		if w == "" {
			return "", 0
		}
		if depth > best {
			best, why, line = depth, w, i
		}
	}
	return why, line // "" when every line read holds an error: nothing to check
}

// A headLine is one of a file's first lines, with its number (from 1).
type headLine struct {
	no int64
	b  []byte
}

// headLines returns the first n non-empty lines of the file at path (a
// last line without its newline too).
func headLines(path string, n int) ([]headLine, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	var lines []headLine
	for no := int64(1); len(lines) < n; no++ {
		l, err := r.ReadBytes('\n')
		if !isBlank(l) {
			lines = append(lines, headLine{no, bytes.TrimRight(l, "\r\n")})
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return lines, nil
}
