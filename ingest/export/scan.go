package export

import (
	"encoding/binary"
	"errors"
	"gendex/ingest"
	"math/bits"
)

// Fields are read with the index's JSON scanner (ingest.EachField): a
// key's raw value is found without decoding the rest, so a 10 KB
// output_ids array is copied, not parsed into ints and printed again.

// getFields sets vals[i] to the raw value of the field want[i] of the
// object b, or nil when b has no such field.
func getFields(b []byte, want []string, vals [][]byte) error {
	clear(vals)
	return ingest.EachField(b, func(k, v []byte) {
		for i, w := range want {
			if string(k) == w {
				vals[i] = v
				return
			}
		}
	})
}

// isNull reports whether v is absent or JSON null.
func isNull(v []byte) bool { return len(v) == 0 || string(v) == "null" }

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
	start := len(dst)
	err := ingest.EachElement(v, func(e []byte) error {
		if len(e) == 0 || (e[0] == '0' && len(e) > 1) {
			return errNotIDs
		}
		for _, c := range e {
			if c < '0' || c > '9' {
				return errNotIDs
			}
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, e...)
		n++
		return nil
	})
	if err != nil {
		return dst[:start], 0, false
	}
	return dst, n, true
}

var errNotIDs = errors.New("not a token id")

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
