package ingest

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func scanArrayRef(b []byte, i, depth int) (end, n int, err error) {
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

func TestDigitRunDifferential(t *testing.T) {
	t.Parallel()
	alpha := []byte("0123456789,,,00, ]-.e[")
	inParts(t, 2_000_000, 5, func(t *testing.T, rng *rand.Rand, iter int, b []byte) []byte {
		n := rng.IntN(60)
		b = append(b[:0], '[')
		for range n {
			if rng.IntN(40) == 0 {
				b = append(b, alpha[rng.IntN(len(alpha))])
			} else {
				b = append(b, alpha[rng.IntN(16)])
			}
		}
		if rng.IntN(2) == 0 {
			b = append(b, ']')
		}
		e1, n1, err1 := scanArray(b, 0, 1)
		e2, n2, err2 := scanArrayRef(b, 0, 1)
		if e1 != e2 || !sameError(err1, err2) || (err1 == nil && n1 != n2) {
			t.Fatalf("iter %d %q: %d %d %v; want %d %d %v", iter, b, e1, n1, err1, e2, n2, err2)
		}
		return b
	})
}

// inParts runs check on inputs 0 to n-1 in four parallel parts, each with
// its own random source (seeded from seed and the part) and its own buffer:
// check fills b with input iter, checks it (failing t) and returns b.
func inParts(t *testing.T, n int, seed uint64, check func(t *testing.T, rng *rand.Rand, iter int, b []byte) []byte) {
	const parts = 4
	for part := range parts {
		t.Run(fmt.Sprint("part-", part), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(seed, uint64(part)))
			var b []byte
			for iter := part * n / parts; iter < (part+1)*n/parts; iter++ {
				b = check(t, rng, iter, b)
			}
		})
	}
}

// sameError reports whether a and b are both nil or say the same; the
// scanner's errors are compared as values (their text is made from them),
// which formats nothing.
func sameError(a, b error) bool {
	x, okx := a.(*syntaxError)
	y, oky := b.(*syntaxError)
	switch {
	case okx && oky:
		return *x == *y
	case a == nil || b == nil:
		return a == b
	}
	return a.Error() == b.Error()
}

// skipStringRef is skipString one byte at a time.
func skipStringRef(b []byte, i int) (end int, escaped bool, err error) {
	i++
	for i < len(b) {
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

func TestSkipStringDifferential(t *testing.T) {
	t.Parallel()
	special := []byte("\"\\\x00\x1f\x20\x7f\x80\xff\xe2u0nA/")
	inParts(t, 1_000_000, 7, func(t *testing.T, rng *rand.Rand, iter int, b []byte) []byte {
		n := rng.IntN(40)
		b = append(b[:0], '"')
		for range n {
			if rng.IntN(12) == 0 {
				b = append(b, special[rng.IntN(len(special))])
			} else {
				b = append(b, byte(0x20+rng.IntN(0x60)))
			}
		}
		e1, esc1, err1 := skipString(b, 0)
		e2, esc2, err2 := skipStringRef(b, 0)
		if e1 != e2 || esc1 != esc2 || !sameError(err1, err2) {
			t.Fatalf("iter %d %q: %d %v %v; want %d %v %v", iter, b, e1, esc1, err1, e2, esc2, err2)
		}
		return b
	})
}
