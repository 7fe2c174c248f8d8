package store

import (
	"strconv"
	"strings"
)

// A unit is one answer gen owes: sample s (0 to N-1) of a prompt id, when
// a dataset asks N answers per prompt (gen --samples N; a line's "sample"
// and "samples"). The answer stages (raw, errors, tokenized, excluded,
// turns) are keyed by the unit's key, UnitID; the prompts stage by the
// prompt's id. Sample 0 is keyed by the id alone, so a dataset of one
// sample per prompt is keyed as it always was.

// UnitSep separates a prompt's id from its sample number in a unit's key.
// No id holds it (CheckRecord refuses one that does), so a key with it
// is always a unit of a sample above 0, and its prompt is the part before.
const UnitSep = '\x00'

// MaxSamples is the most samples per prompt a dataset may ask for (gen
// --samples) or a line may name ("sample" below it).
const MaxSamples = 10000

// UnitID is the key of sample s of prompt id in the answer stages: id
// itself for sample 0, else id, UnitSep and s in decimal (the sample is
// last, and no id holds UnitSep, so two units never share a key).
func UnitID(id string, s int) string {
	if s <= 0 {
		return id
	}
	return id + string(rune(UnitSep)) + strconv.Itoa(s)
}

// SplitUnit is UnitID undone: the prompt id and the sample of a unit's
// key (a turn's key less its "#i" first: PromptID). A key without UnitSep
// is sample 0 of itself.
func SplitUnit(key string) (id string, s int) {
	i := strings.IndexByte(key, UnitSep)
	if i < 0 {
		return key, 0
	}
	s, err := strconv.Atoi(key[i+1:])
	if err != nil || s < 1 {
		return key[:i], 0 // never written so: the key is its prompt's
	}
	return key[:i], s
}

// UnitName is how a message names a record's key: its id quoted, then
// " sample S" for a sample above 0 (a turn's "#i" stays on the id), so no
// message shows the key's UnitSep; a plain id is named as %q names it.
func UnitName(key string) string {
	i := strings.IndexByte(key, UnitSep)
	if i < 0 {
		return strconv.Quote(key)
	}
	sample, turn := key[i+1:], ""
	if j := strings.IndexByte(sample, '#'); j >= 0 {
		sample, turn = sample[:j], sample[j:]
	}
	return strconv.Quote(key[:i]+turn) + " sample " + sample
}

// unitPrompt is the prompt key of a unit's key (bytes, for the
// transaction's lookups): the key up to UnitSep.
func unitPrompt(key []byte) []byte {
	for i, c := range key {
		if c == UnitSep {
			return key[:i]
		}
	}
	return key
}

// isUnitOf reports whether key is a unit of prompt p: p itself, or p and
// UnitSep then the sample.
func isUnitOf(key, p []byte) bool {
	return len(key) >= len(p) && string(key[:len(p)]) == string(p) &&
		(len(key) == len(p) || key[len(p)] == UnitSep)
}

// unitKeyOK reports whether key is a plain id or a unit's key as UnitID
// writes it (a turn's "#i" after it allowed) with a sample below samples:
// any other key holding UnitSep would be read as a unit it is not.
func unitKeyOK(key string, samples uint32) bool {
	i := strings.IndexByte(key, UnitSep)
	if i < 0 {
		return true
	}
	rest := key[i+1:]
	if j := strings.IndexByte(rest, '#'); j >= 0 {
		rest = rest[:j]
	}
	s, err := strconv.Atoi(rest)
	return i > 0 && err == nil && s >= 1 && uint32(s) < samples && strconv.Itoa(s) == rest
}
