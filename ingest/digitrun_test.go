package ingest

import (
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
	rng := rand.New(rand.NewPCG(5, 6))
	alpha := []byte("0123456789,,,00, ]-.e[")
	for iter := range 2000000 {
		n := rng.IntN(60)
		b := make([]byte, 0, n+2)
		b = append(b, '[')
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
		if e1 != e2 || (err1 == nil) != (err2 == nil) || (err1 == nil && n1 != n2) || (err1 != nil && err1.Error() != err2.Error()) {
			t.Fatalf("iter %d %q: %d %d %v; want %d %d %v", iter, b, e1, n1, err1, e2, n2, err2)
		}
	}
}
