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

// A map's paths checked against a file's first lines before the file is
// indexed with it (`ingest --field`), and said where they stop.

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
