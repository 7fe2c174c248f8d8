package client

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
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
			ok = decodeMeta(val, &r.MetaInfo)
		default:
			ok = !foldsTo(key, "text", "output_ids", "meta_info")
		}
	})
	if err == nil && ok {
		return nil
	}
	*r = generateResponse{}
	return json.NewDecoder(bytes.NewReader(body)).Decode(r)
}

// foldsTo reports whether key is one of names in another case, which
// encoding/json would take for it (it matches keys regardless of case).
func foldsTo(key []byte, names ...string) bool {
	for _, n := range names {
		if strings.EqualFold(string(key), n) {
			return true
		}
	}
	return false
}

// metaKeys are meta_info's keys gendex reads (metaInfo's and specFields').
var metaKeys = []string{"finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "reasoning_tokens",
	"e2e_latency", "spec_verify_ct", "spec_accept_length", "spec_accept_rate", "spec_accepted_drafts",
	"spec_proposed_drafts", "spec_accept_token_num", "spec_draft_token_num", "spec_num_correct_drafts",
	"spec_num_proposed_drafts", "spec_accept_histogram"}

// decodeMeta reads a meta_info object (or null) as encoding/json reads it
// into m; ok is false for anything it does not take as it is.
func decodeMeta(b []byte, m *metaInfo) (ok bool) {
	if string(b) == "null" {
		return true
	}
	ok = true
	err := ingest.EachField(b, func(key, val []byte) {
		if !ok {
			return
		}
		switch string(key) {
		case "finish_reason":
			ok = decodeFinish(val, &m.FinishReason)
		case "prompt_tokens":
			m.PromptTokens, ok = decodeIntPtr(val)
		case "completion_tokens":
			m.CompletionTokens, ok = decodeIntPtr(val)
		case "cached_tokens":
			m.CachedTokens, ok = decodeIntPtr(val)
		case "reasoning_tokens":
			m.ReasoningTokens, ok = decodeIntPtr(val)
		case "e2e_latency":
			m.E2ELatency, ok = decodeFloatPtr(val)
		case "spec_verify_ct":
			m.VerifyCt, ok = decodeIntPtr(val)
		case "spec_accept_length":
			m.AcceptLength, ok = decodeFloatPtr(val)
		case "spec_accept_rate":
			m.AcceptRate, ok = decodeFloatPtr(val)
		case "spec_accepted_drafts":
			m.AcceptedDrafts, ok = decodeIntPtr(val)
		case "spec_proposed_drafts":
			m.ProposedDrafts, ok = decodeIntPtr(val)
		case "spec_accept_token_num":
			m.AcceptTokenNum, ok = decodeIntPtr(val)
		case "spec_draft_token_num":
			m.DraftTokenNum, ok = decodeIntPtr(val)
		case "spec_num_correct_drafts":
			m.CorrectDrafts, ok = decodeIntPtr(val)
		case "spec_num_proposed_drafts":
			m.NumProposed, ok = decodeIntPtr(val)
		case "spec_accept_histogram":
			m.Histogram, ok = decodeInts(val)
		default:
			ok = !foldsTo(key, metaKeys...)
		}
	})
	return err == nil && ok
}

// decodeFinish reads finish_reason (an object, or null) into *f.
func decodeFinish(b []byte, f **finishReason) (ok bool) {
	if string(b) == "null" {
		*f = nil
		return true
	}
	if *f == nil {
		*f = &finishReason{}
	}
	fr := *f
	ok = true
	err := ingest.EachField(b, func(key, val []byte) {
		if !ok {
			return
		}
		switch string(key) {
		case "type":
			fr.Type, ok = decodeStringOrNull(val, fr.Type)
		case "message":
			fr.Message, ok = decodeStringOrNull(val, fr.Message)
		case "matched":
			fr.Matched = json.RawMessage(bytes.Clone(val))
		case "status_code":
			fr.StatusCode, ok = decodeIntPtr(val)
		default:
			ok = !foldsTo(key, "type", "message", "matched", "status_code")
		}
	})
	return err == nil && ok
}

// decodeStringOrNull reads a string; null leaves old, as encoding/json
// leaves a string field that null is decoded into.
func decodeStringOrNull(b []byte, old string) (string, bool) {
	if string(b) == "null" {
		return old, true
	}
	return ingest.DecodeString(b)
}

// decodeIntPtr reads an integer, or null (nil), as encoding/json reads
// it into *int.
func decodeIntPtr(b []byte) (*int, bool) {
	if string(b) == "null" {
		return nil, true
	}
	n, ok := decodeInt(b)
	if !ok {
		return nil, false
	}
	return &n, true
}

// decodeFloatPtr reads a number, or null (nil), into *float64.
func decodeFloatPtr(b []byte) (*float64, bool) {
	if string(b) == "null" {
		return nil, true
	}
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		return nil, false
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return nil, false
	}
	return &f, true
}

// decodeInt reads a plain JSON integer within int's range.
func decodeInt(b []byte) (int, bool) {
	i, neg := 0, false
	if len(b) > 0 && b[0] == '-' {
		i, neg = 1, true
	}
	if i == len(b) || (b[i] == '0' && len(b)-i > 1) {
		return 0, false
	}
	var n uint64
	for ; i < len(b); i++ {
		if b[i] < '0' || b[i] > '9' || n > (math.MaxInt64-9)/10 {
			return 0, false
		}
		n = n*10 + uint64(b[i]-'0')
	}
	if neg {
		return -int(n), true
	}
	return int(n), true
}

// decodeInts reads a JSON array of integers (or null) as encoding/json
// reads it into []int; ok is false for anything else (a fraction, an
// exponent, a number out of range), which encoding/json then answers. It
// parses the digits in its one pass rather than through decodeInt: an
// answer's ids are most of its bytes (decodeInt per element, cut out
// first, costs a third more).
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
