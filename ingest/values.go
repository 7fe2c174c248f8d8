package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
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
	if sp.n > 0 { // counted when it was read
		return int64(sp.n - 1), true
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
	c, _ := sub(b, span{s: i, e: sp.e})
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
// ({"id","status","error":"msg"}), a Batch error ({"error":{"code","message"}})
// or another tool's (a status word that says it failed: its finish).
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
	if st := str(b, f.status); rec.Finish == "" && lifecycleOf(st) == lifeFailed { // a failed, canceled, expired request
		rec.Finish = strings.ToLower(st)
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

// eachElement calls fn with the span of each element of the array at sp,
// until fn returns false; it reports whether sp is an array. The line was
// validated already.
func eachElement(b []byte, sp span, fn func(span) bool) bool {
	if !sp.ok() || b[sp.s] != '[' {
		return false
	}
	i := skipSpace(b, sp.s+1)
	for i < sp.e && b[i] != ']' {
		end, err := skipValue(b, i, 1)
		if err != nil || !fn(span{s: i, e: end}) {
			return true
		}
		i = skipSpace(b, end)
		if i < sp.e && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return true
}

var specPrefix = []byte(`"spec_`)

// specOf reads the speculative decoding counts of one object's fields:
// spec_verify_ct (0 means none: SGLang writes it only above 0, and
// versions that write it earlier write 0 with no data), and the accepted
// and proposed draft counts as a pair (spec_accepted_drafts and
// spec_proposed_drafts; SGLang's earlier spec_accept_token_num and
// spec_draft_token_num; a fork's spec_num_correct_drafts and
// spec_num_proposed_drafts), proposed above 0 and accepted no more than
// proposed. A count past store.MaxTokens is none.
func specOf(b []byte, f *fields) (verify, accepted, proposed int64) {
	if f.specVerify.ok() {
		if n, ok := decodeCount(val(b, f.specVerify)); ok && n > 0 && n <= store.MaxTokens {
			verify = n
		}
	}
	if f.specProposed.ok() {
		a, okA := decodeCount(val(b, f.specAccepted))
		n, okP := decodeCount(val(b, f.specProposed))
		if okA && okP && n > 0 && n <= store.MaxTokens && a <= n {
			return verify, a, n
		}
	}
	return verify, 0, 0
}

func (f *fields) hasSpec() bool { return f.specVerify.ok() || f.specProposed.ok() }

// specCounts sets rec's speculative decoding counts from the first place
// that has them: the line itself (gendex's flat lines), meta_info
// (SGLang's /generate), the first choice's meta_info (chat with
// return_meta_info), sglext. The verify count and the draft pair are
// taken each on its own. A conversation line (gen --turns all) without
// them at the top sums its turns' counts, when every turn has them.
func specCounts(b []byte, f, meta *fields, hasMeta bool, rec *store.Record) {
	var srcs [4]*fields
	if f.hasSpec() {
		srcs[0] = f
	}
	if hasMeta && meta.hasSpec() {
		srcs[1] = meta
	}
	// The choices and turns hold whole answers: look inside only when
	// they mention a spec field at all.
	if f.choices.ok() && b[f.choices.s] == '[' && bytes.Contains(b[f.choices.s:f.choices.e], specPrefix) {
		eachElement(b, f.choices, func(sp span) bool {
			if c, ok := sub(b, sp); ok && c.metaInfo.ok() {
				if m, ok := sub(b, c.metaInfo); ok {
					srcs[2] = &m
				}
			}
			return false
		})
	}
	if f.ext.ok() {
		if e, ok := sub(b, f.ext); ok {
			srcs[3] = &e
		}
	}
	for _, s := range srcs {
		if s == nil {
			continue
		}
		v, a, p := specOf(b, s)
		if rec.SpecVerify == 0 && v > 0 {
			rec.SpecVerify = v
		}
		if rec.SpecProposed == 0 && p > 0 {
			rec.SpecAccepted, rec.SpecProposed = a, p
		}
	}
	if rec.SpecVerify > 0 && rec.SpecProposed > 0 || !f.turns.ok() || b[f.turns.s] != '[' || !bytes.Contains(b[f.turns.s:f.turns.e], specPrefix) {
		return
	}
	var verify, accepted, proposed int64
	allVerify, allDrafts, n := true, true, 0
	eachElement(b, f.turns, func(sp span) bool {
		t, ok := sub(b, sp)
		if !ok {
			allVerify, allDrafts = false, false
			return false
		}
		n++
		v, a, p := specOf(b, &t)
		if m, ok := sub(b, t.metaInfo); ok && (v == 0 || p == 0) {
			mv, ma, mp := specOf(b, &m)
			if v == 0 {
				v = mv
			}
			if p == 0 {
				a, p = ma, mp
			}
		}
		allVerify = allVerify && v > 0
		allDrafts = allDrafts && p > 0
		verify, accepted, proposed = verify+v, accepted+a, proposed+p
		return allVerify || allDrafts
	})
	if n == 0 {
		return
	}
	if rec.SpecVerify == 0 && allVerify && verify <= store.MaxTokens {
		rec.SpecVerify = verify
	}
	if rec.SpecProposed == 0 && allDrafts && proposed <= store.MaxTokens {
		rec.SpecAccepted, rec.SpecProposed = accepted, proposed
	}
}
