package ingest

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
)

// A small, validating JSON scanner over one line. It walks values without
// building them, so a 10 KB array of token ids costs one tight loop; only the
// fields the normalizer asks for are decoded. Its notion of valid JSON is
// encoding/json's (checked by FuzzNormalize).

const maxDepth = 10000 // encoding/json's nesting limit

// syntaxError describes where a line stops being JSON.
type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("invalid JSON at byte %d: %s", e.off+1, e.msg)
}

func errAt(b []byte, i int, what string) error {
	if i >= len(b) {
		return &syntaxError{i, "unexpected end of line" + what}
	}
	return &syntaxError{i, fmt.Sprintf("unexpected %s%s", quoteByte(b[i]), what)}
}

func quoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// skipValue returns the end of the value starting at b[i] (no leading space).
func skipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, errAt(b, i, " (want a value)")
	}
	switch c := b[i]; {
	case c == '"':
		end, _, err := skipString(b, i)
		return end, err
	case c == '{':
		return skipObject(b, i, depth+1)
	case c == '[':
		return skipArray(b, i, depth+1)
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	}
	return i, errAt(b, i, " (want a value)")
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	for j := 0; j < len(lit); j++ {
		if i+j >= len(b) || b[i+j] != lit[j] {
			return i + j, errAt(b, i+j, " in literal "+lit)
		}
	}
	return i + len(lit), nil
}

// skipString returns the end of the string at b[i] == '"' and whether it
// holds escapes.
func skipString(b []byte, i int) (end int, escaped bool, err error) {
	i++
	for i < len(b) {
		if i = plainRun(b, i); i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1, escaped, nil
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return i + 1, escaped, errAt(b, i+1, " in string escape")
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for j := 2; j < 6; j++ {
					if i+j >= len(b) || !isHex(b[i+j]) {
						return i + j, escaped, errAt(b, i+j, " in \\u escape")
					}
				}
				i += 6
			default:
				return i + 1, escaped, errAt(b, i+1, " in string escape")
			}
		case c < 0x20:
			return i, escaped, errAt(b, i, " in string (control characters must be escaped)")
		default:
			i++
		}
	}
	return i, escaped, errAt(b, i, " in string")
}

// plainRun returns the position of the first byte from b[i] that a string
// cannot hold as it is ('"', '\\' or a control character), reading eight
// bytes at a time; or, when there is none, the start of the last less than
// eight bytes, which the caller reads one at a time.
func plainRun(b []byte, i int) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, bs := x^'"'*ones, x^'\\'*ones
		// A byte's high bit in m is set for the first byte below 0x20
		// or equal to 0 after the xor (the lowest bit set is exact: a
		// borrow only goes up), and perhaps for bytes after it.
		m := ((x-0x20*ones)&^x | (q-ones)&^q | (bs-ones)&^bs) & highs
		if m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	return i
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func skipNumber(b []byte, i int) (int, error) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	default:
		return i, errAt(b, i, " in number")
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, errAt(b, i, " in number")
		}
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return i, errAt(b, i, " in number")
		}
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	}
	return i, nil
}

// skipArray returns the end of the array at b[i] == '[' and its length.
func skipArray(b []byte, i, depth int) (int, error) {
	end, _, err := scanArray(b, i, depth)
	return end, err
}

func scanArray(b []byte, i, depth int) (end, n int, err error) {
	if depth > maxDepth {
		return i, 0, &syntaxError{i, "nesting too deep"}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, 0, nil
	}
	for {
		// Fast path for token ids and loss masks: a plain non-negative
		// integer (no leading zero) followed at once by ',' or ']'.
		if i < len(b) && b[i]-'0' <= 9 {
			if len(b)-i >= 16 { // whole elements, eight bytes at a time
				if next, commas := digitRun(b, i); commas > 0 {
					i, n = skipSpace(b, next), n+commas
					continue
				}
			}
			j := i + 1
			if b[i] != '0' {
				for j < len(b) && b[j]-'0' <= 9 {
					j++
				}
			}
			if j < len(b) && b[j] == ',' {
				n++
				i = j + 1
				if i < len(b) && b[i]-'0' <= 9 {
					continue
				}
				i = skipSpace(b, i)
				continue
			}
			if j < len(b) && b[j] == ']' {
				return j + 1, n + 1, nil
			}
			if i, err = skipNumber(b, i); err != nil {
				return i, n, err
			}
		} else if i, err = skipValue(b, i, depth); err != nil {
			return i, n, err
		}
		n++
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, n, errAt(b, i, " in array")
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case ']':
			return i + 1, n, nil
		default:
			return i, n, errAt(b, i, " in array (want , or ])")
		}
	}
}

// digitRun reads, eight bytes at a time from b[i] (the start of an array
// element), elements that are plain non-negative integers without leading
// zeros, each followed at once by a comma. It stops at the first word
// holding anything else and returns the position after the last comma it
// read (the start of an element, which the caller reads on) and how many
// commas it read: the elements it read whole.
func digitRun(b []byte, i int) (next, commas int) {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	next = i
	start := uint64(0x80)  // byte 0 starts an element
	zeroStart := uint64(0) // 0x80: byte 0 follows a '0' that starts an element
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		if x&highs != 0 {
			break
		}
		// Each byte is below 0x80: adding k < 0x80 to it cannot carry
		// into the next byte, and its high bit says whether it is >= 0x80 - k.
		digit := (x + (0x80-'0')*ones) &^ (x + (0x80-'9'-1)*ones) & highs
		comma := ^((x ^ ','*ones) + 0x7f*ones) & highs
		zero := ^((x ^ '0'*ones) + 0x7f*ones) & highs
		starts := comma<<8 | start
		if digit|comma != highs || starts&comma != 0 || (starts&zero&(digit>>8)|zeroStart&digit) != 0 {
			break // another byte, an empty element, or a leading zero
		}
		if comma != 0 {
			commas += bits.OnesCount64(comma)
			next = i + (63-bits.LeadingZeros64(comma))/8 + 1
		}
		start, zeroStart = comma>>56, (starts&zero)>>56
	}
	return next, commas
}

func skipObject(b []byte, i, depth int) (int, error) {
	return eachField(b, i, depth, nil)
}

// eachField walks the object at b[i] == '{', calling fn (when not nil) with
// each key's raw bytes (quotes stripped; escaped reports backslashes), the
// value's span [vs, ve) and, when the value is an array, 1 + its length
// (else 0). It returns the end of the object.
func eachField(b []byte, i, depth int, fn func(key []byte, escaped bool, vs, ve, n int) error) (int, error) {
	if depth > maxDepth {
		return i, &syntaxError{i, "nesting too deep"}
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, errAt(b, i, " in object (want a key)")
		}
		ks := i
		ke, esc, err := skipString(b, i)
		if err != nil {
			return ke, err
		}
		i = skipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return i, errAt(b, i, " after object key (want :)")
		}
		i = skipSpace(b, i+1)
		vs, n := i, 0
		if i < len(b) && b[i] == '[' {
			// The array's length comes with its scan (token ids are
			// counted where they are read, not scanned twice).
			if i, n, err = scanArray(b, i, depth+1); err != nil {
				return i, err
			}
			n++
		} else if i, err = skipValue(b, i, depth); err != nil {
			return i, err
		}
		if fn != nil {
			if err := fn(b[ks+1:ke-1], esc, vs, i, n); err != nil {
				return i, err
			}
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return i, errAt(b, i, " in object")
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, errAt(b, i, " in object (want , or })")
		}
	}
}

// decodeString returns the text of the JSON string b (quotes included).
func decodeString(b []byte) (string, bool) {
	if len(b) < 2 || b[0] != '"' {
		return "", false
	}
	inner := b[1 : len(b)-1]
	for _, c := range inner {
		if c == '\\' || c >= 0x80 {
			var s string
			if err := json.Unmarshal(b, &s); err != nil {
				return "", false
			}
			return s, true
		}
	}
	return string(inner), true
}

// decodeKey returns an object key's text; escapes are rare and slow.
func decodeKey(raw []byte, escaped bool) string {
	if !escaped {
		return string(raw)
	}
	var s string
	q := make([]byte, 0, len(raw)+2)
	q = append(append(append(q, '"'), raw...), '"')
	if json.Unmarshal(q, &s) != nil {
		return string(raw)
	}
	return s
}

// maxCount is the largest token count: 2^53, the largest whole number that
// every JSON reader (a float64) holds exactly. A bigger "count" is garbage.
const maxCount = 1 << 53

// decodeCount reads a token count: a JSON number whose value is a whole
// number from 0 to maxCount, however it is written (12, 12.0, 1.2e1, -0).
// Anything else (null, a string, -1, 1.5, 1e300) is not a count. This is
// deliberately looser than encoding/json into an integer, which rejects
// 12.0 (Python writes float counts so) and, for uint64, -0.
func decodeCount(b []byte) (int64, bool) {
	if len(b) > 0 && len(b) <= 15 { // fast path: plain digits, always <= maxCount
		var n int64
		for _, c := range b {
			if c < '0' || c > '9' {
				return wholeNumber(b)
			}
			n = n*10 + int64(c-'0')
		}
		return n, true
	}
	return wholeNumber(b)
}

// wholeNumber reads the JSON number b exactly, as digits times a power of
// ten, and returns its value if that is a whole number in [0, maxCount].
func wholeNumber(b []byte) (int64, bool) {
	i := 0
	neg := i < len(b) && b[i] == '-'
	if neg {
		i++
	}
	// The value is n × 10^scale, n being the significant digits read so
	// far; zeros are held back until a non-zero digit follows them, so the
	// trailing ones end up in scale. A whole number <= maxCount has at most
	// 16 significant digits: more means too big or a fraction.
	var n, zeros, sig, scale int64
	intPart, seen := true, false
	for ; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9':
			seen = true
			if !intPart {
				scale--
			}
			if c == '0' {
				zeros++
				continue
			}
			if sig > 0 {
				sig += zeros
			}
			sig++
			if sig > 16 {
				return 0, false
			}
			for ; zeros > 0; zeros-- {
				n *= 10
			}
			n = n*10 + int64(c-'0')
		case c == '.' && intPart:
			intPart = false
		case c == 'e' || c == 'E':
			exp, ok := exponent(b[i+1:])
			if !ok {
				return 0, false
			}
			scale += exp
			i = len(b)
		default:
			return 0, false
		}
	}
	if n == 0 { // 0, -0, 0.0e5
		return 0, seen
	}
	scale += zeros
	if neg || scale < 0 || sig+scale > 16 {
		return 0, false
	}
	for ; scale > 0; scale-- {
		n *= 10
	}
	return n, n <= maxCount
}

// exponent reads a JSON number's exponent (after the e), saturating far
// beyond any line's length so that it cannot overflow.
func exponent(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '+' || b[0] == '-') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var e int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		if e < 1<<40 {
			e = e*10 + int64(c-'0')
		}
	}
	if neg {
		e = -e
	}
	return e, true
}

// decodeFloat reads a JSON number.
func decodeFloat(b []byte) (float64, bool) {
	if len(b) == 0 || !(b[0] == '-' || (b[0] >= '0' && b[0] <= '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	return f, err == nil
}
