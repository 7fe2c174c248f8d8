package query

import (
	"path/filepath"

	"gendex/store"
)

// ReasonNoTurnLoss is export's exclusion of an answer whose conversation
// has an earlier turn that cannot be given its loss in an ids record
// (export.ReasonNoTurnLoss); check blocks on it: a drafter trained on the
// records never learns that conversation.
const ReasonNoTurnLoss = "no_turn_loss"

// noTurnLoss is the check's finding on the answers of a dataset excluded
// as ReasonNoTurnLoss (none when there are none); dir is its folder.
func noTurnLoss(s store.Summary, dir string) []finding {
	n := s.Stage(store.Excluded).Finish[ReasonNoTurnLoss]
	if n == 0 {
		return nil
	}
	own := filepath.Join(filepath.Dir(dir), filepath.Base(dir)+"-conv")
	list := "gendex query list " + s.Dataset + " --stage excluded --finish " + ReasonNoTurnLoss
	return []finding{{reason: ReasonNoTurnLoss, blocks: true, count: n,
		detail: "answers excluded from the ids records: an earlier turn of each is not in its conversation's prompt ids, so no loss could be given to it (" + list + ")",
		fix: "ask them again (gendex check --ids " + ReasonNoTurnLoss + " " + dir + " > FILE; gendex gen --server URL --redo FILE " + dir + "), or train on conversations records, masked turn by turn by the trainer: gendex --db " +
			filepath.Join(own, "gendex.db") + " export --format conversations --out " + own + " " + dir}}
}
