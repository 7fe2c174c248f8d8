package ingest

import (
	"strconv"
	"strings"
)

// Where Explain's values come from: each value of a line changed in a
// copy of it, and the copy read again (see Explain).

// mark is what a string of the line is changed by: put first in it (a
// reader may cut a long string's end), and found in a field read from it.
const mark = "\u2042"

// maxLeaves is how many of a line's values Explain changes, at most.
const maxLeaves = 2000

// sampled is how many of a list's first elements Explain looks in (and
// its last).
const sampled = 3

// A leaf is a value of a line that Explain changes: a string, a number,
// true or false, or a list of no strings and no objects (token ids: its
// length may be a count), which gets one more element.
type leaf struct {
	path string // dotted, as --field takes it ("choices.0.text")
	s, e int    // the value's bytes
}

// leaves lists the leaves of the value at sp (path: its own), after out.
func leaves(b []byte, sp span, path string, out []leaf) []leaf {
	if len(out) > maxLeaves {
		return out
	}
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch b[sp.s] {
	case '{':
		_, _ = eachField(b, sp.s, 1, func(k []byte, escaped bool, vs, ve, _ int) error {
			out = leaves(b, span{s: vs, e: ve}, join(decodeKey(k, escaped)), out)
			return nil
		})
	case '[':
		flat := true
		eachElement(b, sp, func(e span) bool {
			flat = b[e.s] != '"' && b[e.s] != '{' && b[e.s] != '['
			return flat
		})
		if flat {
			return append(out, leaf{path, sp.s, sp.e})
		}
		// A long list of objects (an answer's parts, a conversation's
		// messages) is tried at its first elements and its last: its
		// elements are alike, and a line is read again for each value.
		var elems []span
		eachElement(b, sp, func(e span) bool { elems = append(elems, e); return true })
		for i, e := range elems {
			if i < sampled || i == len(elems)-1 {
				out = leaves(b, e, join(strconv.Itoa(i)), out)
			}
		}
	case 'n':
	default:
		out = append(out, leaf{path, sp.s, sp.e})
	}
	return out
}

// changed is line with the leaf's value changed (and also also's, when
// not nil): a string marked, a number one more, true and false swapped,
// a list one element longer.
func (l leaf) changed(line []byte, also *leaf) []byte {
	if also != nil {
		if also.s > l.s {
			return l.changed(also.changed(line, nil), nil)
		}
		return also.changed(l.changed(line, nil), nil)
	}
	v := line[l.s:l.e]
	var to string
	switch v[0] {
	case '"':
		to = `"` + mark + string(v[1:])
	case 't':
		to = "false"
	case 'f':
		to = "true"
	case '[':
		first := "0"
		eachElement(line, span{s: l.s, e: l.e}, func(e span) bool { first = string(line[e.s:e.e]); return false })
		if strings.TrimSpace(string(v[1:len(v)-1])) == "" {
			to = "[" + first + "]"
		} else {
			to = "[" + first + "," + string(v[1:])
		}
	default:
		if n, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			to = strconv.FormatInt(n+1, 10)
		} else if x, err := strconv.ParseFloat(string(v), 64); err == nil {
			to = strconv.FormatFloat(x+1, 'g', -1, 64)
		} else {
			return nil
		}
	}
	out := make([]byte, 0, len(line)+len(to))
	return append(append(append(out, line[:l.s]...), to...), line[l.e:]...)
}

// isSource reports whether a field whose value was was, and is now now
// that the leaf's value v changed, was read from the leaf.
func isSource(v byte, was, now string) bool {
	switch v {
	case '"':
		return strings.Contains(now, mark) && !strings.Contains(was, mark)
	case 't', 'f':
		return false
	}
	a, err1 := strconv.ParseInt(was, 10, 64)
	b, err2 := strconv.ParseInt(now, 10, 64)
	return err1 == nil && err2 == nil && (b-a == 1 || a-b == 1)
}

// sources finds, for each field r knows, the paths of the line's values
// it was read from and of those that decided it; partial says the line
// has more values than were tried. A count the line states a total of
// cannot change alone (the counts would no longer add up, and be
// unknown): such a number is changed again with each other such number
// (a total), and a field is read from it when it changes by one with
// every partner that keeps the counts adding up.
func sources(src Source, m IDPath, line []byte, no int64, r *reading) (from, by [numExplained][]string, partial bool) {
	var f fields
	top, _, err := readTop(line, &f, nil)
	if err != nil {
		return from, by, false
	}
	ls := leaves(line, top, "", nil)
	if len(ls) > maxLeaves {
		ls, partial = ls[:maxLeaves], true
	}
	var summed []leaf // numbers that make the counts no longer add up
	for _, l := range ls {
		c := l.changed(line, nil)
		if c == nil {
			continue
		}
		got := readFor(src, m, c, no)
		if got.skipped == "" && got.info.countsOff != "" && r.info.countsOff == "" && line[l.s] != '"' && line[l.s] != '[' {
			summed = append(summed, l)
			continue
		}
		for k := range numExplained {
			if !r.known[k] || got.skipped == "" && got.known[k] && got.vals[k] == r.vals[k] {
				continue
			}
			if got.skipped == "" && got.known[k] && isSource(line[l.s], r.vals[k], got.vals[k]) {
				from[k] = append(from[k], l.name(line))
			} else if len(by[k]) < 4 {
				by[k] = append(by[k], l.path)
			}
		}
	}
	for _, l := range summed {
		var always [numExplained]bool
		partners := 0
		for _, q := range summed {
			if q == l {
				continue
			}
			got := readFor(src, m, l.changed(line, &q), no)
			if got.skipped != "" || got.info.countsOff != "" {
				continue
			}
			for k := range numExplained {
				one := r.known[k] && got.known[k] && isSource(line[l.s], r.vals[k], got.vals[k])
				always[k] = one && (partners == 0 || always[k])
			}
			partners++
		}
		for k := range numExplained {
			if partners > 0 && always[k] {
				from[k] = append(from[k], l.name(line))
			}
		}
	}
	return from, by, partial
}

// name is the leaf's path, and for a list, that its length is read.
func (l leaf) name(line []byte) string {
	if line[l.s] == '[' {
		return l.path + " (its length)"
	}
	return l.path
}
