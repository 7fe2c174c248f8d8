package ingest

import (
	"fmt"

	"gendex/store"
)

// goneFile is a counted file CheckDisk found gone and forgot: its warning
// waits for the run's other files to be read (SayForgotten), since another
// file (a hard link, a copy) may answer the same prompts, and then they
// are not unanswered at all.
type goneFile struct {
	f   store.FileState
	why string
	ids []string // the ids of the answers it held
}

// answersOf returns the ids of the answers f holds (its records in the
// answer stage of its kind: raw or turns), before it is forgotten.
func (ix *Indexer) answersOf(f store.FileState) ([]string, error) {
	if f.Stage != store.Raw && f.Stage != store.Turns {
		return nil, nil
	}
	var ids []string
	err := ix.DB.View(func(v *store.View) error {
		return v.Each(f.Dataset, f.Stage, func(r *store.Record) error {
			if r.File == f.ID {
				ids = append(ids, r.ID)
			}
			return nil
		})
	})
	return ids, err
}

// SayForgotten reports each gone file CheckDisk forgot, with how many of
// the prompts it answered no file answers now: a writer calls it once the
// files of its run are read (CheckDisk says what an earlier call left).
func (ix *Indexer) SayForgotten() {
	ix.mu.Lock()
	gone := ix.gone
	ix.gone = nil
	ix.mu.Unlock()
	for _, g := range gone {
		unanswered := 0
		_ = ix.DB.View(func(v *store.View) error {
			for _, id := range g.ids {
				if _, ok, err := v.Get(g.f.Dataset, g.f.Stage, id); err == nil && !ok {
					unanswered++
				}
			}
			return nil
		})
		msg := fmt.Sprintf("%s: its %d records are forgotten", g.why, g.f.Records)
		switch n := len(g.ids); {
		case n == 0:
		case unanswered == n:
			msg += fmt.Sprintf(", and the %d prompts they answered are unanswered again", n)
		case unanswered == 0:
			msg += fmt.Sprintf("; the %d prompts they answered are all still answered, by other files", n)
		default:
			msg += fmt.Sprintf("; %d of the %d prompts they answered are unanswered again (other files answer the rest)", unanswered, n)
		}
		ix.report(Problem{Path: g.f.Path, Kind: Gone, Msg: msg})
	}
}
