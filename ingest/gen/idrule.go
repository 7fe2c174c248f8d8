package gen

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gendex/ingest"
	"gendex/store"
)

// checkIDRule stops the run before its prompts files are indexed again
// when --id names another id rule than the one the index keeps for a
// dataset's prompts file and the dataset holds answers: under the new
// rule its prompts get other ids, the answers made under the old one
// would match no prompt and their prompts would be asked again. It says
// how many answers would lose their prompt (0 when the new rule gives the
// prompts the same ids: their answers' provenance then holds another id
// rule). Nothing is indexed or sent; --allow-mixed lets it through.
func (fe *feeder) checkIDRule(datasets []Dataset) error {
	if fe.cfg.Paths.ID == "" || fe.cfg.AllowMixed {
		return nil
	}
	rule, err := ingest.ParseIDPath(fe.cfg.Paths.ID)
	if err != nil {
		return err
	}
	return fe.db.View(func(v *store.View) error {
		for _, d := range datasets {
			old, changed := "", false
			for _, p := range d.Prompts {
				if st, ok, _ := v.File(p); ok && st.IDPath != fe.cfg.Paths.ID {
					old, changed = st.IDPath, true
				}
			}
			if s, err := v.Summary(d.Name); !changed || err != nil || s.Stage(store.Raw).Records == 0 {
				continue
			}
			answers, lost, err := answersLost(v, d, rule)
			if err != nil {
				return err
			}
			if answers == 0 {
				continue
			}
			if old == "" {
				old = builtinIDRule
			}
			what := fmt.Sprintf("%d of its %d answers would match no prompt, and gen would ask their prompts again", lost, answers)
			if lost == 0 {
				what = fmt.Sprintf("its %d answers keep their prompts, but were made under the other rule", answers)
			}
			return &stopError{msg: fmt.Sprintf("%s: its prompts' ids would now be read from %s (were from %s): %s",
				filepath.Dir(d.Raw), fe.cfg.Paths.ID, old, what),
				hint: fmt.Sprintf("leave --id out to keep %s (the index remembers it for these prompts), or give --allow-mixed to index them under the new rule anyway ('gendex query progress' then counts the answers left without a prompt as no_prompt); nothing was sent or indexed", old)}
		}
		return nil
	})
}

// answersLost counts the answers of dataset d that match a prompt now and
// those of them that would match none with its prompts files' ids read
// by rule.
func answersLost(v *store.View, d Dataset, rule ingest.IDPath) (answers, lost uint64, err error) {
	ids := map[string]bool{}
	for _, path := range d.Prompts {
		f, err := os.Open(path)
		if err != nil {
			return 0, 0, err
		}
		_, err = ingest.ReadLines(f, func(line []byte, n int64) error {
			var rec store.Record
			if _, err := ingest.NormalizeAt(line, store.Prompts, rule, &rec); err == nil {
				ids[rec.ID] = true
			} else if errors.Is(err, ingest.ErrNoID) {
				ids[ingest.LineID(path, n)] = true
			}
			return nil
		})
		f.Close()
		if err != nil {
			return 0, 0, fmt.Errorf("reading %s: %w", path, err)
		}
	}
	err = v.Each(d.Name, store.Raw, func(rec *store.Record) error {
		if _, ok, _ := v.Get(d.Name, store.Prompts, rec.ID); !ok {
			return nil // without a prompt already
		}
		answers++
		if !ids[rec.ID] {
			lost++
		}
		return nil
	})
	return answers, lost, err
}
