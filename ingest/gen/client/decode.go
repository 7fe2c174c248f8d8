package client

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"

	"gendex/ingest"
)

// decodeGenerate decodes a /generate answer into r. The bulk of an answer,
// its output_ids and text, is read by ingest's validating scanner (one
// pass, no reflection); meta_info, a few keys, by encoding/json. Whatever
// that fast reading does not take as it is (a value of another type, a key
// that differs from ours only in case, a body that is not one object) is
// decoded by encoding/json as before, so the result and its errors are
// always encoding/json's.
func decodeGenerate(body []byte, r *generateResponse) error {
	ok := true
	err := ingest.EachField(body, func(key, val []byte) {
		if !ok {
			return
		}
		switch string(key) {
		case "text":
			if string(val) == "null" {
				r.Text = nil
				return
			}
			s, isString := ingest.DecodeString(val)
			r.Text, ok = &s, isString
		case "output_ids":
			r.OutputIDs, ok = decodeInts(val)
		case "meta_info":
			ok = json.Unmarshal(val, &r.MetaInfo) == nil
		default:
			// encoding/json matches keys regardless of case.
			k := string(key)
			ok = !strings.EqualFold(k, "text") && !strings.EqualFold(k, "output_ids") && !strings.EqualFold(k, "meta_info")
		}
	})
	if err == nil && ok {
		return nil
	}
	*r = generateResponse{}
	return json.NewDecoder(bytes.NewReader(body)).Decode(r)
}

// decodeInts reads a JSON array of integers (or null) as encoding/json
// reads it into []int; ok is false for anything else (a fraction, an
// exponent, a number out of range), which encoding/json then answers.
func decodeInts(b []byte) (ids []int, ok bool) {
	if string(b) == "null" {
		return nil, true
	}
	if len(b) < 2 || b[0] != '[' {
		return nil, false
	}
	ids = make([]int, 0, bytes.Count(b, []byte{','})+1)
	i := skipBlank(b, 1)
	if i < len(b) && b[i] == ']' {
		return ids, skipBlank(b, i+1) == len(b)
	}
	for i < len(b) {
		neg := b[i] == '-'
		if neg {
			i++
		}
		start := i
		var n uint64
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
			if n > (math.MaxInt64-9)/10 {
				return nil, false
			}
			n = n*10 + uint64(b[i]-'0')
		}
		if i == start || (b[start] == '0' && i-start > 1) {
			return nil, false
		}
		v := int(n)
		if neg {
			v = -v
		}
		ids = append(ids, v)
		i = skipBlank(b, i)
		if i >= len(b) {
			return nil, false
		}
		switch b[i] {
		case ',':
			i = skipBlank(b, i+1)
		case ']':
			return ids, skipBlank(b, i+1) == len(b)
		default:
			return nil, false
		}
	}
	return nil, false
}

func skipBlank(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
