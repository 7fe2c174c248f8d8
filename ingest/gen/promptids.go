package gen

// The common prompt line, {"id":"...","input_ids":[...]}, read without
// encoding/json: the feeder reads one a prompt, and the reflection of
// json.Unmarshal cost gen some 7% of its CPU against a zero-latency server.

// idsPrompt reads line when it is exactly an object of an "id" string and
// an "input_ids" list of token ids, each key at most once, as json.Unmarshal
// into promptLine would read it: the keys spelled exactly so, without
// escapes; the id a string without escapes; the ids non-negative integers
// of at most 18 digits, without leading zeros, the list not empty. ok is
// false for any other line (ParsePrompt reads it with encoding/json, and
// says what is wrong with it).
func idsPrompt(line []byte) (ids []int, ok bool) { return readIDsPrompt(line, true) }

// isIDsPrompt reports whether idsPrompt reads line, without keeping its
// ids.
func isIDsPrompt(line []byte) bool {
	_, ok := readIDsPrompt(line, false)
	return ok
}

// readIDsPrompt is idsPrompt; keep says to return the ids.
func readIDsPrompt(line []byte, keep bool) (ids []int, ok bool) {
	i := skipWS(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil, false
	}
	i = skipWS(line, i+1)
	seenID, seenIDs := false, false
	for {
		key, j, ok := simpleString(line, i)
		if !ok {
			return nil, false
		}
		i = skipWS(line, j)
		if i >= len(line) || line[i] != ':' {
			return nil, false
		}
		i = skipWS(line, i+1)
		switch string(key) {
		case "id":
			if seenID {
				return nil, false
			}
			seenID = true
			if _, i, ok = simpleString(line, i); !ok {
				return nil, false
			}
		case "input_ids":
			if seenIDs {
				return nil, false
			}
			seenIDs = true
			if ids, i, ok = idList(line, i, keep); !ok {
				return nil, false
			}
		default:
			return nil, false
		}
		i = skipWS(line, i)
		if i >= len(line) {
			return nil, false
		}
		switch line[i] {
		case ',':
			i = skipWS(line, i+1)
			continue
		case '}':
			if skipWS(line, i+1) != len(line) || !seenIDs {
				return nil, false
			}
			return ids, true
		}
		return nil, false
	}
}

// skipWS returns the index of the first byte at or after i that is not
// JSON white space.
func skipWS(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// simpleString reads the JSON string at b[i] when it holds no escape and
// no control character: its contents and the index after it.
func simpleString(b []byte, i int) (s []byte, end int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return nil, j, false
		}
	}
	return nil, len(b), false
}

// idList reads the non-empty JSON list of token ids at b[i] (see
// idsPrompt) and returns the index after it; keep says to return the ids.
func idList(b []byte, i int, keep bool) (ids []int, end int, ok bool) {
	if i >= len(b) || b[i] != '[' {
		return nil, i, false
	}
	if keep {
		ids = make([]int, 0, 64)
	}
	i = skipWS(b, i+1)
	for {
		j := i
		n := 0
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			n = n*10 + int(b[j]-'0')
			j++
		}
		switch digits := j - i; {
		case digits == 0 || digits > 18 || (digits > 1 && b[i] == '0'):
			return nil, j, false
		}
		if keep {
			ids = append(ids, n)
		}
		i = skipWS(b, j)
		if i >= len(b) {
			return nil, i, false
		}
		switch b[i] {
		case ',':
			i = skipWS(b, i+1)
		case ']':
			return ids, i + 1, true
		default:
			return nil, i, false
		}
	}
}
