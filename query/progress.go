package query

import (
	"slices"

	"gendex/store"
)

// progress: one row per dataset. prompts (and so missing_raw and done_pct)
// are unknown for a dataset with no prompts file indexed. done_pct is the
// share of prompts that have an outcome: a response or a final error.
// excluded is the responses export left out with a reason and did not
// tokenize since; missing_tokenized the responses with neither a tokenized
// record nor an exclusion, so raw == tokenized + excluded +
// missing_tokenized whenever every tokenized id has a response.
// truncated counts the responses cut at the token limit (finish_reason
// length), which export excludes as length unless --include-truncated.
// skipped is the number of lines of the dataset's files, every stage, left
// out of the index (invalid JSON, no id, not storable): prompts among them
// are in neither prompts nor missing_raw. tool_stops counts the answers
// that are tool conversations gen stopped where the model departed from
// the data (every reason; list --tool-stop lists them, with theirs).
// redo (and so done_pct) is unknown while a redo is still finding the
// answers it asks again (gen --redo truncated on a large set, before its
// feeder has read every prompt, or stopped before: store.Pending.Choosing).
// answered counts the prompts with an answer (but those a redo asks
// again), failed those that failed for good without an answer since
// (errors less those whose prompt is gone): answered + failed + missing_raw
// + redo is the prompts, and done_pct is (answered + failed) / prompts.
// Both are unknown where prompts is, answered where redo is.
// no_prompt counts the answers whose id matches no prompt (their prompts
// indexed under another id rule, or gone: they get no record), unknown
// (as prompts) for a dataset without a prompts file, and in an index whose
// counters predate it until its dataset's next write.
// samples is the answers asked per prompt (gen --samples; 1 but for a
// dataset whose answer lines name their "sample"), and prompts_done the
// prompts every sample of which has an outcome (unknown where prompts
// is): two columns shown only when a dataset has more than one sample
// (the total's samples: the datasets' one N, unknown when they differ). With samples above 1, raw, errors, missing_raw, answered, failed,
// redo and done_pct count answers, each sample of a prompt one: answered
// + failed + missing_raw + redo is prompts times samples.
func progress(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	cols := []string{"dataset", "prompts", "raw", "tokenized", "errors", "missing_raw", "excluded", "missing_tokenized", "done_pct", "truncated", "redo", "stale", "tool_stops", "answered", "failed", "skipped", "no_prompt"}
	sampled := slices.ContainsFunc(sums, func(s store.Summary) bool { return s.Samples() > 1 })
	if sampled {
		cols = append(cols, "samples", "prompts_done")
	}
	out.Columns(cols)
	var tot [7]sum
	var answeredTot, failedTot, noPromptTot sum
	var outcomes, units, truncated, skipped, redo, stale, stops uint64
	var doneTot sum
	redoKnown := true
	for _, s := range sums {
		owed := s.Owed()
		var prompts, missingRaw, done, answeredCol, failedCol, promptsDone any
		if s.Stage(store.Prompts).Files > 0 {
			prompts, promptsDone = s.Stage(store.Prompts).Records, s.PromptsDone()
			missingRaw, failedCol = owed.Prompts, owed.Failed
			if owed.RedoKnown {
				done = pct(owed.Answered+owed.Failed, s.Units())
				answeredCol = owed.Answered
			}
		}
		answeredTot.add(answeredCol)
		failedTot.add(failedCol)
		var redoCol any = owed.Redo
		if !owed.RedoKnown {
			redoCol, redoKnown = nil, false
		}
		row := []any{s.Dataset, prompts, s.Stage(store.Raw).Records, s.Stage(store.Tokenized).Records,
			s.Overlap.ErrorsOpen, missingRaw, s.Excluded(), owed.Records, done, s.Truncated(), redoCol, owed.Stale, s.ToolStops(), answeredCol, failedCol, s.Skipped(), noPromptOf(s)}
		noPromptTot.add(row[len(row)-1])
		if sampled {
			row = append(row, s.Samples(), promptsDone)
			doneTot.add(promptsDone)
		}
		units += s.Units()
		for i := range tot {
			tot[i].add(row[i+1])
		}
		outcomes += owed.Answered + owed.Failed
		truncated += s.Truncated()
		skipped += s.Skipped()
		stops += s.ToolStops()
		redo += owed.Redo
		stale += owed.Stale
		if err := out.Row(row); err != nil {
			return err
		}
	}
	total := []any{"TOTAL"}
	for _, t := range tot {
		total = append(total, t.value())
	}
	var done, redoTot any = nil, redo
	if !tot[0].unknown && redoKnown {
		done = pct(outcomes, units)
	}
	if !redoKnown {
		redoTot = nil
	}
	total = append(total, done, truncated, redoTot, stale, stops, answeredTot.value(), failedTot.value(), skipped, noPromptTot.value())
	if sampled {
		total = append(total, sameSamples(sums), doneTot.value())
	}
	return out.Total(total)
}

// sameSamples is the total's samples: the datasets' one N when they all
// ask the same, else nil (no one number says it).
func sameSamples(sums []store.Summary) any {
	for _, s := range sums[1:] {
		if s.Samples() != sums[0].Samples() {
			return nil
		}
	}
	return sums[0].Samples()
}

// noPromptOf is a dataset's no_prompt: its answers whose id matches no
// prompt, nil when the index does not know it or holds no prompts file of
// the dataset (its prompts are unknown).
func noPromptOf(s store.Summary) any {
	if n, ok := s.NoPrompt(); ok && s.Stage(store.Prompts).Files > 0 {
		return n
	}
	return nil
}

// ToGo is the answers a progress row (or its total) still owes: its
// prompts without an answer (missing_raw) and the answers a redo is asking
// again (redo), store.Owed's ToGo; ok is false when its prompts are
// unknown, or its redo (a redo still finding its answers). A writer older
// than the redo column answers without it.
func ToGo(prog *Result, row []any) (left int64, ok bool) {
	if _, ok := AsFloat(prog.Get(row, "prompts")); !ok {
		return 0, false
	}
	if slices.Contains(prog.Columns, "redo") && prog.Get(row, "redo") == nil {
		return 0, false
	}
	m, _ := AsFloat(prog.Get(row, "missing_raw"))
	r, _ := AsFloat(prog.Get(row, "redo"))
	return int64(m + r), true
}
