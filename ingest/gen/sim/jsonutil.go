package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// bufPool recycles buffers for marshal.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// marshal encodes v as one line of JSON without HTML escaping, as orjson and
// msgspec write it. It panics on values that cannot be encoded, which would
// be a bug in this package.
func marshal(v any) []byte {
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(fmt.Sprintf("sim: encoding %T: %v", v, err))
	}
	b := buf.Bytes()
	return bytes.Clone(b[:len(b)-1])
}

// quote returns s as a JSON string literal.
func quote(s string) []byte {
	return marshal(s)
}

// pyNum is a JSON number that remembers whether it was written as an
// integer, so messages can print it the way Python would.
type pyNum struct {
	f     float64
	isInt bool
	i     int64
}

// String formats n like Python's str(): 3, 0.5, 1e-07, 1e+16, 1.0.
func (n pyNum) String() string {
	if n.isInt {
		return strconv.FormatInt(n.i, 10)
	}
	return pyFloat(n.f)
}

// parseNum parses a JSON number literal.
func parseNum(raw json.RawMessage) (pyNum, bool) {
	s := string(raw)
	if s == "" || (s[0] != '-' && (s[0] < '0' || s[0] > '9')) {
		return pyNum{}, false
	}
	if !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return pyNum{f: float64(i), isInt: true, i: i}, true
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return pyNum{}, false
	}
	return pyNum{f: f}, true
}

// pyFloat formats f like Python's repr(float): shortest round-trip digits,
// scientific notation when the exponent is < -4 or >= 16, and always a '.'
// or exponent.
func pyFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

// pyStr formats s like Python's repr(str) for plain text.
func pyStr(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// orderedKeys returns the keys of a JSON object in document order, without
// duplicates.
func orderedKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil {
		return nil
	}
	var keys []string
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// jsonList is the JSON array of elems, each already encoded.
func jsonList(elems ...[]byte) []byte {
	return append(append([]byte{'['}, bytes.Join(elems, []byte{','})...), ']')
}

// kv is one member of an ordered JSON object.
type kv struct {
	k string
	v any
}

// orderedJSON encodes members as a JSON object in the given order.
func orderedJSON(members []kv) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(quote(m.k))
		b.WriteByte(':')
		if raw, ok := m.v.([]byte); ok {
			b.Write(raw)
		} else {
			b.Write(marshal(m.v))
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}
