package ingest

import "errors"

// The index's JSON scanner, for other packages that read a few fields of
// a line: export reads answers and prompts with it, so there is one
// hand-written JSON reader in gendex, with one rule for strings and counts.

var (
	errNotObject = errors.New("not a JSON object")
	errNotArray  = errors.New("not a JSON array")
)

// EachField calls fn with each key (unescaped) and raw value of the JSON
// object b, in order. It fails on anything that is not one valid object.
func EachField(b []byte, fn func(key, val []byte)) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errNotObject
	}
	end, err := eachField(b, i, 1, func(key []byte, escaped bool, vs, ve, _ int) error {
		if escaped {
			key = []byte(decodeKey(key, true))
		}
		fn(key, b[vs:ve])
		return nil
	})
	if err != nil {
		return err
	}
	if skipSpace(b, end) != len(b) {
		return errAt(b, skipSpace(b, end), " after the object")
	}
	return nil
}

// EachElement calls fn with each raw element of the JSON array b, in
// order, and stops at fn's first error, which it returns.
func EachElement(b []byte, fn func(val []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return errNotArray
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return nil
	}
	for {
		end, err := skipValue(b, i, 1)
		if err != nil {
			return err
		}
		if err := fn(b[i:end]); err != nil {
			return err
		}
		i = skipSpace(b, end)
		switch {
		case i >= len(b):
			return errAt(b, i, " in array")
		case b[i] == ',':
			i = skipSpace(b, i+1)
		case b[i] == ']':
			return nil
		default:
			return errAt(b, i, " in array (want , or ])")
		}
	}
}

// DecodeString returns the text of the JSON string v (quotes included);
// ok is false for any other value.
func DecodeString(v []byte) (string, bool) { return decodeString(v) }

// DecodeCount reads a count as the index does: a whole number from 0 to
// 2^53, however it is written (12, 12.0, 1.2e1); ok is false otherwise.
func DecodeCount(v []byte) (int64, bool) { return decodeCount(v) }
