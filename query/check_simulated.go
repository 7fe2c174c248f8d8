package query

import (
	"path/filepath"

	"gendex/store"
)

// simulated is the finding of a dataset with answers the simulator made
// (gen --server sim, gendex sim): a dry run's, nothing a drafter learns
// the model from. It blocks unless allowed (check --allow-simulated).
func simulated(v *store.View, name string, allowed bool, dir string) []finding {
	var n uint64
	prompts := ""
	_ = v.Files(func(f store.FileState) error {
		if f.Dataset != name {
			return nil
		}
		if f.Stage == store.Prompts && prompts == "" {
			prompts = filepath.Dir(f.Path)
		}
		if f.Stage != store.Raw {
			return nil
		}
		for i, m := range f.Makers {
			if m.Simulated {
				c, _ := f.MakerCount(i) // the answers that count (a redo's replaced ones not)
				n += c
			}
		}
		return nil
	})
	if n == 0 {
		return nil
	}
	if prompts == "" {
		prompts = dir
	}
	const what = "answers made by gendex's simulator, not by a model: a dry run's, nothing to train a drafter on"
	if allowed {
		return []finding{{reason: ReasonSimulated, count: n, detail: what + " (accepted: --allow-simulated)"}}
	}
	return []finding{{reason: ReasonSimulated, blocks: true, count: n, detail: what,
		fix: "answer with the model's server: gendex gen --server URL --out NEWDIR " + prompts + " (the index then forgets the simulator's answers), or accept them: check --allow-simulated"}}
}
