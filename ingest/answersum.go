package ingest

// A training record or exclusion names the answer it was built from: its
// line's "answer_sum" is the answer line's store.LineSum (CRC-32C), as 8
// lowercase hex digits. The index keeps the same sum of every answer, so
// a record whose answer_sum is not its id's newest answer's was built from
// an answer a redo replaced (stale), and a fresh index of the files tells
// so without the index that saw the redo. The key comes last in export's
// lines; readers of the records (SpecForge, speculators) read the keys
// they know and leave the others.

// AnswerSumKey is the key of a record's or exclusion's answer sum.
const AnswerSumKey = "answer_sum"

// AppendAnswerSum appends `,"answer_sum":"<8 hex digits>"` to dst.
func AppendAnswerSum(dst []byte, sum uint32) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, `,"`+AnswerSumKey+`":"`...)
	for shift := 28; shift >= 0; shift -= 4 {
		dst = append(dst, hex[sum>>uint(shift)&0xf])
	}
	return append(dst, '"')
}

// ParseAnswerSum reads an answer_sum value as written (with its quotes):
// ok is false for anything but a string of 8 hex digits.
func ParseAnswerSum(v []byte) (sum uint32, ok bool) {
	if len(v) != 10 || v[0] != '"' || v[9] != '"' {
		return 0, false
	}
	for _, c := range v[1:9] {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		sum = sum<<4 | uint32(d)
	}
	return sum, true
}
