package export

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/bits"
	"strconv"
)

// A small reader of the few fields export needs from a line the indexer has
// already validated as one JSON object (its CRC is checked before it is
// read). It finds a key's value without decoding the rest, so a 10 KB
// output_ids array is copied, not parsed into ints and printed again.

var errSyntax = errors.New("not valid JSON")

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue returns the index just past the value that starts at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return i, errSyntax
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '[':
		// A flat array (of numbers: output_ids) in a few vector scans.
		if j := bytes.IndexByte(b[i+1:], ']'); j >= 0 {
			seg := b[i+1 : i+1+j]
			if bytes.IndexByte(seg, '[') < 0 && bytes.IndexByte(seg, '{') < 0 && bytes.IndexByte(seg, '"') < 0 {
				return i + 2 + j, nil
			}
		}
		fallthrough
	case '{':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				j, err := skipString(b, i)
				if err != nil {
					return j, err
				}
				i = j
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return i, errSyntax
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && !isSpace(b[j]) {
		j++
	}
	if j == i {
		return i, errSyntax
	}
	return j, nil
}

// skipString returns the index past the string whose quote is at b[i].
func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); {
		q := bytes.IndexByte(b[j:], '"')
		if q < 0 {
			break
		}
		j += q
		// The quote ends the string unless an odd number of backslashes
		// escape it.
		n := 0
		for k := j - 1; k > i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
	return len(b), errSyntax
}

// fields calls fn with each key and raw value of the object b.
func fields(b []byte, fn func(key, val []byte)) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errors.New("not a JSON object")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return errSyntax
		}
		end, err := skipString(b, i)
		if err != nil {
			return err
		}
		key := b[i+1 : end-1]
		for k := i + 1; k < end-1; k++ {
			if b[k] == '\\' {
				var s string
				if err := json.Unmarshal(b[i:end], &s); err != nil {
					return err
				}
				key = []byte(s)
				break
			}
		}
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return errSyntax
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i)
		if err != nil {
			return err
		}
		fn(key, b[i:vend])
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return nil
		}
		return errSyntax
	}
	return errSyntax
}

// getFields sets vals[i] to the raw value of the field want[i] of the
// object b, or nil when b has no such field.
func getFields(b []byte, want []string, vals [][]byte) error {
	clear(vals)
	return fields(b, func(k, v []byte) {
		for i, w := range want {
			if string(k) == w {
				vals[i] = v
				return
			}
		}
	})
}

// elements calls fn with each raw element of the JSON array b.
func elements(b []byte, fn func(val []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return errors.New("not a JSON array")
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for i < len(b) {
		end, err := skipValue(b, i)
		if err != nil {
			return err
		}
		if err := fn(b[i:end]); err != nil {
			return err
		}
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return nil
		}
		return errSyntax
	}
	return errSyntax
}

// isNull reports whether v is absent or JSON null.
func isNull(v []byte) bool { return len(v) == 0 || string(v) == "null" }

// str decodes a JSON string value; ok is false for anything else.
func str(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	plain := true
	for _, c := range v[1 : len(v)-1] {
		if c == '\\' || c < 0x20 || c >= 0x80 {
			plain = false
			break
		}
	}
	if plain {
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", false
	}
	return s, true
}

// count reads a non-negative whole number; ok is false for anything else.
func count(v []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil && n >= 0
}

// appendIDs checks that v is a JSON array of non-negative integers and
// appends them to dst comma-separated, without brackets or spaces. It
// returns how many it appended; ok is false (dst unchanged) when v is not
// such an array.
func appendIDs(dst, v []byte) (out []byte, n int, ok bool) {
	if len(v) >= 2 && v[0] == '[' && v[len(v)-1] == ']' {
		inner := v[1 : len(v)-1]
		if len(inner) == 0 {
			return dst, 0, true
		}
		if commas, ok := digitsAndCommas(inner); ok && inner[0] != ',' && inner[len(inner)-1] != ',' {
			return append(dst, inner...), commas + 1, true
		}
	}
	i := skipSpace(v, 0)
	if i >= len(v) || v[i] != '[' {
		return dst, 0, false
	}
	start := len(dst)
	i = skipSpace(v, i+1)
	if i < len(v) && v[i] == ']' {
		return dst, 0, skipSpace(v, i+1) == len(v)
	}
	for {
		j := i
		for j < len(v) && v[j] >= '0' && v[j] <= '9' {
			j++
		}
		if j == i || (v[i] == '0' && j-i > 1) {
			return dst[:start], 0, false
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, v[i:j]...)
		n++
		i = skipSpace(v, j)
		if i >= len(v) {
			return dst[:start], 0, false
		}
		if v[i] == ']' {
			if skipSpace(v, i+1) != len(v) {
				return dst[:start], 0, false
			}
			return dst, n, true
		}
		if v[i] != ',' {
			return dst[:start], 0, false
		}
		i = skipSpace(v, i+1)
	}
}

// digitsAndCommas reports whether b holds nothing but ASCII digits and
// commas, and counts the commas, eight bytes at a time. Inside a JSON
// array from a line that is valid JSON (every indexed line is), such bytes
// that neither start nor end with a comma are a list of non-negative
// integers written without spaces, signs, fractions or exponents (valid
// JSON has no empty element, and no leading zero but in 0 itself). A false
// answer sends the caller to the byte-by-byte check.
func digitsAndCommas(b []byte) (commas int, ok bool) {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	var bad uint64
	i := 0
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		// A byte of 0x80 or more is bad (bad collects the high bits of
		// x). Below it, adding k < 0x80 to a byte cannot carry into the
		// next byte: its high bit then says whether it is >= 0x80 - k.
		y := x &^ highs
		digit := (y + (0x80-'0')*ones) &^ (y + (0x80-'9'-1)*ones) & highs // '0' <= byte <= '9'
		c := y ^ ','*ones                                                 // 0 where a comma is
		comma := ^(c + 0x7f*ones) & highs                                 // byte == ','
		bad |= x & highs
		bad |= (digit | comma) ^ highs
		commas += bits.OnesCount64(comma)
	}
	for ; i < len(b); i++ {
		switch c := b[i]; {
		case c == ',':
			commas++
		case c < '0' || c > '9':
			return 0, false
		}
	}
	return commas, bad == 0
}

// parseIDs decodes a JSON array of non-negative integers.
func parseIDs(v []byte) ([]int, bool) {
	buf, n, ok := appendIDs(nil, v)
	if !ok {
		return nil, false
	}
	ids := make([]int, 0, n)
	x := 0
	for i, c := range buf {
		if c == ',' {
			ids = append(ids, x)
			x = 0
			continue
		}
		x = x*10 + int(c-'0')
		if i == len(buf)-1 {
			ids = append(ids, x)
		}
	}
	return ids, true
}
