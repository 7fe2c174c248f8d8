package sim

import (
	"net/http"
	"unicode/utf8"
)

// llama.cpp's token routes: /tokenize, /detokenize and /apply-template.

// encodeNoSpecial tokenizes text without parsing special token names:
// every byte is a byte token.
func encodeNoSpecial(text string) []int {
	ids := make([]int, len(text))
	for i := 0; i < len(text); i++ {
		ids[i] = ByteBase + int(text[i])
	}
	return ids
}

// handleTokenize serves /tokenize {content, add_special (false),
// parse_special (true), with_pieces (false)}; without content it answers
// {"tokens":[]}.
func (l *llamaCpp) handleTokenize(w http.ResponseWriter, r *http.Request) {
	m, ok := readLlamaBody(w, r)
	if !ok {
		return
	}
	var ids []int
	if raw, has := m["content"]; has {
		boolOr := func(k string, def bool) bool {
			if b, ok := asBool(m[k]); ok && jsonKind(m[k]) == "bool" {
				return b
			}
			return def
		}
		addSpecial, parseSpecial := boolOr("add_special", false), boolOr("parse_special", true)
		enc := func(str string) []int {
			if parseSpecial {
				return appendEncoded(nil, str)
			}
			return encodeNoSpecial(str)
		}
		if addSpecial {
			ids = append(ids, BOSID)
		}
		if str, ok := asString(raw); ok {
			ids = append(ids, enc(str)...)
		} else if a, ok := asArray(raw); ok {
			for _, e := range a {
				if id, ok := asInt(e); ok {
					ids = append(ids, id)
				} else if str, ok := asString(e); ok {
					ids = append(ids, enc(str)...)
				}
			}
		}
		if boolOr("with_pieces", false) {
			pieces := make([][]byte, len(ids))
			for i, id := range ids {
				p := Decode([]int{id}, false)
				var pj any = p
				if !utf8.ValidString(p) {
					bs := make([]int, len(p))
					for j := 0; j < len(p); j++ {
						bs[j] = int(p[j])
					}
					pj = bs
				}
				pieces[i] = orderedJSON([]kv{{"id", id}, {"piece", pj}})
			}
			writeRaw(w, http.StatusOK, "application/json; charset=utf-8",
				orderedJSON([]kv{{"tokens", jsonList(pieces...)}}))
			return
		}
	}
	if ids == nil {
		ids = []int{}
	}
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", orderedJSON([]kv{{"tokens", ids}}))
}

// handleDetokenize serves /detokenize {tokens} -> {content}.
func (l *llamaCpp) handleDetokenize(w http.ResponseWriter, r *http.Request) {
	m, ok := readLlamaBody(w, r)
	if !ok {
		return
	}
	ids, _ := asInts(m["tokens"])
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8", orderedJSON([]kv{{"content", Decode(ids, false)}}))
}

// handleApplyTemplate serves /apply-template {messages} -> {prompt}:
// the chat template's text, what chat would tokenize.
func (l *llamaCpp) handleApplyTemplate(w http.ResponseWriter, r *http.Request) {
	m, ok := readLlamaBody(w, r)
	if !ok {
		return
	}
	msgs, merr := llamaMessages(m)
	if merr != "" {
		llamaInvalid(w, merr)
		return
	}
	if _, ok := l.chatTools(w, m, msgs); !ok {
		return
	}
	writeRaw(w, http.StatusOK, "application/json; charset=utf-8",
		orderedJSON([]kv{{"prompt", Decode(l.eng.chatPrompt(m, msgs), false)}}))
}
