package sim

// The as* helpers read one request field the way SGLang's pydantic models
// do: they check the value's JSON kind first (so a wrong kind gets pydantic's
// message, not Go's), accept pydantic's lax coercions, and leave the decoding
// itself to encoding/json. They are not a second JSON decoder: the only
// hand-written one is ingest's scanner, built for the index's hot path, and
// the simulator never imports ingest.

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
)

// jsonKind reports the JSON type of raw: "null", "bool", "number",
// "string", "array", "object" or "" if raw is empty.
func jsonKind(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return ""
	}
	switch raw[0] {
	case 'n':
		return "null"
	case 't', 'f':
		return "bool"
	case '"':
		return "string"
	case '[':
		return "array"
	case '{':
		return "object"
	}
	return "number"
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	k := jsonKind(raw)
	return k == "" || k == "null"
}

// asObject decodes a JSON object into its members. ok is false if raw is
// not an object.
func asObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	if jsonKind(raw) != "object" {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	return m, true
}

// asArray decodes a JSON array into its elements.
func asArray(raw json.RawMessage) ([]json.RawMessage, bool) {
	if jsonKind(raw) != "array" {
		return nil, false
	}
	var a []json.RawMessage
	if json.Unmarshal(raw, &a) != nil {
		return nil, false
	}
	return a, true
}

// asInt decodes a JSON integer (an integral float such as 3.0 is
// accepted, as pydantic's lax mode does).
func asInt(raw json.RawMessage) (int, bool) {
	n, ok := parseNum(bytes.TrimSpace(raw))
	if !ok {
		return 0, false
	}
	if n.isInt {
		return int(n.i), true
	}
	if n.f == math.Trunc(n.f) && math.Abs(n.f) < 1<<53 {
		return int(n.f), true
	}
	return 0, false
}

// asInts decodes a JSON array of integers.
func asInts(raw json.RawMessage) ([]int, bool) {
	a, ok := asArray(raw)
	if !ok {
		return nil, false
	}
	out := make([]int, len(a))
	for i, v := range a {
		if out[i], ok = asInt(v); !ok {
			return nil, false
		}
	}
	return out, true
}

// asString decodes a JSON string.
func asString(raw json.RawMessage) (string, bool) {
	if jsonKind(raw) != "string" {
		return "", false
	}
	var s string
	return s, json.Unmarshal(raw, &s) == nil
}

// asBool decodes a boolean the way pydantic's lax mode does: true,
// false, 0, 1 and the strings "true", "false", "yes", "no", "on", "off",
// "1", "0", "t", "f", "y", "n" in any case.
func asBool(raw json.RawMessage) (bool, bool) {
	switch jsonKind(raw) {
	case "bool":
		return bytes.TrimSpace(raw)[0] == 't', true
	case "number":
		if n, ok := asInt(raw); ok && (n == 0 || n == 1) {
			return n == 1, true
		}
	case "string":
		s, _ := asString(raw)
		switch strings.ToLower(s) {
		case "true", "yes", "on", "1", "t", "y":
			return true, true
		case "false", "no", "off", "0", "f", "n":
			return false, true
		}
	}
	return false, false
}

// asStrings decodes a string or a list of strings.
func asStrings(raw json.RawMessage) (list []string, isList, ok bool) {
	if s, ok := asString(raw); ok {
		return []string{s}, false, true
	}
	a, ok := asArray(raw)
	if !ok {
		return nil, false, false
	}
	list = make([]string, len(a))
	for i, v := range a {
		if list[i], ok = asString(v); !ok {
			return nil, true, false
		}
	}
	return list, true, true
}
