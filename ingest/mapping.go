package ingest

import (
	"fmt"
	"strconv"
	"strings"

	"gendex/store"
)

// Mapping says where a file's lines keep what gendex reads, for a shape
// no one built in (`ingest --field KEY=PATH`, or --map's pairs), and where they keep their id
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

// MappedFields names the fields a mapping can place, as --field takes them.
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
