package ingest

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"gendex/store"
)

// known sets *dst from the count at sp, unless *dst is already known.
func known(b []byte, dst *int64, sp span) {
	if *dst < 0 {
		if n, ok := decodeCount(val(b, sp)); ok {
			*dst = n
		}
	}
}

func val(b []byte, sp span) []byte {
	if !sp.ok() {
		return nil
	}
	return b[sp.s:sp.e]
}

// idOf reads an id: a non-empty string, or a number (kept as written).
func idOf(b []byte, sp span) (string, bool) {
	if !sp.ok() {
		return "", false
	}
	v := b[sp.s:sp.e]
	switch {
	case v[0] == '"':
		s, ok := decodeString(v)
		return s, ok && s != ""
	case v[0] == '-' || (v[0] >= '0' && v[0] <= '9'):
		return string(v), true
	}
	return "", false
}

func str(b []byte, sp span) string {
	if !sp.ok() || b[sp.s] != '"' {
		return ""
	}
	s, _ := decodeString(b[sp.s:sp.e])
	return s
}

// arrayLen returns the number of elements of the array spanned by sp.
func arrayLen(b []byte, sp span) (int64, bool) {
	if !sp.ok() || b[sp.s] != '[' {
		return 0, false
	}
	_, n, err := scanArray(b[:sp.e], sp.s, 1)
	return int64(n), err == nil
}

// finishOf reads a finish reason: a string, or SGLang's {"type": ...}.
func finishOf(b []byte, sp span) string {
	if !sp.ok() {
		return ""
	}
	switch b[sp.s] {
	case '"':
		return str(b, sp)
	case '{':
		o, _ := sub(b, sp)
		return str(b, o.typ)
	}
	return ""
}

func firstChoiceFinish(b []byte, sp span) string {
	if !sp.ok() || b[sp.s] != '[' {
		return ""
	}
	i := skipSpace(b, sp.s+1)
	if i >= sp.e || b[i] != '{' {
		return ""
	}
	c, _ := sub(b, span{i, sp.e})
	return finishOf(b, c.finish)
}

func rfc3339(b []byte, sp span) (int64, bool) {
	s := str(b, sp)
	if s == "" {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.UnixMilli() <= 0 {
		return 0, false
	}
	return t.UnixMilli(), true
}

// unixSeconds reads a Unix time in seconds (integer or fraction) as ms.
func unixSeconds(b []byte, sp span) (int64, bool) {
	f, ok := decodeFloat(val(b, sp))
	if !ok || f <= 0 || f > 1e11 || math.IsNaN(f) {
		return 0, false
	}
	return int64(math.Round(f * 1000)), true
}

// errorRecord fills rec from a failed request's line: gendex's errors.jsonl
// ({"id","status","error":"msg"}) or a Batch error ({"error":{"code","message"}}).
func errorRecord(b []byte, f *fields, rec *store.Record) {
	rec.Shape = store.ShapeError
	if code, ok := decodeCount(val(b, f.status)); ok {
		rec.Finish = "http " + strconv.FormatInt(code, 10)
	}
	switch {
	case f.errorV.ok() && b[f.errorV.s] == '"':
		rec.Message = str(b, f.errorV)
	case f.errorV.ok() && b[f.errorV.s] == '{':
		e, _ := sub(b, f.errorV)
		rec.Message = str(b, e.message)
		if rec.Finish == "" {
			if c := str(b, e.code); c != "" {
				rec.Finish = c
			} else if c, ok := decodeCount(val(b, e.code)); ok {
				rec.Finish = "http " + strconv.FormatInt(c, 10)
			} else {
				rec.Finish = str(b, e.typ)
			}
		}
	}
	if rec.Message == "" {
		rec.Message = str(b, f.message)
	}
	if rec.Finish == "" {
		rec.Finish = "error"
	}
}

// describe renders a normalize error for a report.
func describe(err error) string {
	var se *syntaxError
	if errors.As(err, &se) {
		return se.Error()
	}
	return fmt.Sprint(err)
}
