package query

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"gendex/store"
)

// missing: ids of one dataset without a response (stage raw: prompts with
// neither a response nor a final error), or without a tokenized record
// (stage tokenized: prompts and responses, each with the reason; see
// untokenizedReason). In a dataset of several samples per prompt (gen
// --samples) each row is one missing answer: the id and its sample.
func missing(v *store.View, name string, stage store.Stage, bare bool, out Sink) error {
	s, err := v.Summary(name)
	if err != nil {
		return err
	}
	sampled := s.Samples() > 1
	cols, row := []string{"dataset", "stage", "id"}, []any{name, stage.String(), ""}
	if sampled {
		cols, row = append(cols, "sample"), append(row, 0)
	}
	if stage == store.Tokenized {
		cols, row = append(cols, "reason"), append(row, "")
	}
	if bare {
		n := 3 + boolInt(sampled) // the id, and its sample
		cols, row = cols[2:n], row[2:n]
	}
	setID := func(key string) {
		if sampled {
			id, sample := store.SplitUnit(key)
			row[idCol(bare)], row[idCol(bare)+1] = id, sample
		} else {
			row[idCol(bare)] = key
		}
	}
	if stage == store.Raw && s.Stage(store.Prompts).Files == 0 {
		return fmt.Errorf("dataset %s has no prompts file indexed, so which responses are missing is unknown (index its prompts*.jsonl)", name)
	}
	note, err := unmatchedNote(v, name)
	if err != nil {
		return err
	}
	if note != "" {
		if err := out.Note(note); err != nil {
			return err
		}
	}
	out.Columns(cols)
	if stage == store.Raw {
		return stopped(v.Missing(name, store.Prompts, func(id string) error {
			setID(id)
			return out.Row(row)
		}, store.Raw, store.Errors))
	}
	return stopped(v.Untokenized(name, func(u *store.Untokenized) error {
		setID(u.ID)
		if !bare {
			row[len(row)-1] = untokenizedReason(u)
		}
		return out.Row(row)
	}))
}

// idCol is missing's column of the id: the first in --bare rows, after
// dataset and stage in the others.
func idCol(bare bool) int {
	if bare {
		return 0
	}
	return 2
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// unmatchedNote is missing's note on a dataset's answers that have no id:
// they are indexed under their file and line (ingest.LineID,
// "raw_responses.jsonl:17"), which no prompt carries, so their prompts
// are listed as missing. "" when there are none. Only the keys that begin
// with an answers file's base name and ':' are walked.
func unmatchedNote(v *store.View, name string) (string, error) {
	var bases []string
	err := v.Files(func(fs store.FileState) error {
		if fs.Dataset == name && (fs.Stage == store.Raw || fs.Stage == store.Errors) {
			if b := filepath.Base(fs.Path); !slices.Contains(bases, b) {
				bases = append(bases, b)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	slices.Sort(bases)
	var n int64
	var firsts []string
	for _, b := range bases {
		for _, st := range []store.Stage{store.Raw, store.Errors} {
			c, first, err := v.CountPrefix(name, st, b+":")
			if err != nil {
				return "", err
			}
			if c > 0 && len(firsts) < 3 && !slices.Contains(firsts, first) {
				firsts = append(firsts, first)
			}
			n += c
		}
	}
	if n == 0 {
		return "", nil
	}
	eg := strings.Join(firsts, ", ")
	if n > int64(len(firsts)) {
		eg += ", ..."
	}
	what := fmt.Sprintf("%d answers of %s have", n, name)
	if n == 1 {
		what = fmt.Sprintf("1 answer of %s has", name)
	}
	return fmt.Sprintf("%s no id (%s); they are indexed by file and line, which no prompt carries, so they cannot be matched to prompts and their prompts are listed as missing; "+
		"give ingest --id PATH (or --field id=PATH) where the lines keep the prompt's id", what, eg), nil
}

// StaleReason is missing's reason for an answer whose record or exclusion
// was built from the answer a redo replaced.
const StaleReason = "answer replaced by a redo: run gendex export"

// untokenizedReason says why an id has no tokenized record: a record or
// exclusion of a replaced answer (StaleReason), its exclusion
// ("excluded: REASON: DETAIL"), a response not exported yet, its final
// error ("failed: REASON: MESSAGE"), a conversation with some turns
// answered, or no answer yet; the first that applies.
func untokenizedReason(u *store.Untokenized) string {
	with := func(head, reason, detail string) string {
		if reason == "" {
			reason = "unknown"
		}
		if detail == "" {
			return head + ": " + reason
		}
		return head + ": " + reason + ": " + detail
	}
	switch {
	case u.Stale:
		return StaleReason
	case u.Excluded != nil:
		return with("excluded", u.Excluded.Finish, u.Excluded.Message)
	case u.Answered:
		return "not exported yet"
	case u.Failed != nil:
		return with("failed", u.Failed.Finish, u.Failed.Message)
	case u.Turns == 1:
		return "conversation half done (1 turn answered)"
	case u.Turns > 1:
		return fmt.Sprintf("conversation half done (%d turns answered)", u.Turns)
	}
	return "no answer yet"
}

// finishColumns are finish's fixed columns after dataset and records:
// gendex's reasons (store's FinishStop, ...), and the abort an SGLang
// server writes, in this order, each 0 when no answer ended so, so that a
// script's columns do not move with the data.
var finishColumns = []string{store.FinishStop, store.FinishLength, store.FinishToolCalls, "abort", store.FinishFilter}
