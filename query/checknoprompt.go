package query

import (
	"fmt"

	"gendex/store"
)

// ReasonNoPrompt: answers whose id matches no prompt.
const ReasonNoPrompt = "no_prompt"

// noPromptFinding is the no_prompt reason of a dataset whose prompts are
// indexed: its answers whose id matches no prompt (the prompts were
// indexed under another id rule since, or left the prompts files). No
// record is made of them, so it blocks unless accept (check
// --allow-no-prompt). unrecorded is how many of them have neither a
// record nor an exclusion: counted in no_record, whose fix (export)
// cannot make theirs. An index that does not know the count yet
// (store.Summary.NoPrompt) gives none.
func noPromptFinding(v *store.View, name, dir string, s store.Summary, accept bool) (f *finding, unrecorded uint64, err error) {
	n, known := s.NoPrompt()
	if !known || n == 0 || s.Stage(store.Prompts).Files == 0 {
		return nil, 0, nil
	}
	err = v.Missing(name, store.Raw, func(id string) error {
		_, tok, err := v.Get(name, store.Tokenized, id)
		if err != nil || tok {
			return err
		}
		_, exc, err := v.Get(name, store.Excluded, id)
		if err == nil && !exc {
			unrecorded++
		}
		return err
	}, store.Prompts)
	if err != nil {
		return nil, 0, err
	}
	detail := "answers whose id matches no prompt (their prompts indexed under another id rule since, or gone from the prompts files): export makes no record of them"
	if had := n - min(unrecorded, n); had > 0 {
		detail += fmt.Sprintf("; %d have one made before, still among the records", had)
	}
	return &finding{reason: ReasonNoPrompt, blocks: !accept, count: n, detail: detail,
		fix: "give their prompts back (the prompts files they answer, or the id rule they were made under: gendex ingest --id PATH " + dir + "), or accept them without records: check --allow-no-prompt"}, unrecorded, nil
}
