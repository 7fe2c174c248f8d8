package gen

// What --redo says: at the start, what each dataset asks again and why
// not the others (its counts, once the feeder has read every prompt, when
// it decides as the feeder goes); at the end, what a redo leaves owed.

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"gendex/ingest"
	"gendex/ingest/export"
	"gendex/store"
)

// sayRedo says what each dataset asks again, and why not the others (a
// dataset whose cut answers are found as the feeder goes: how it is done,
// its counts once it has read every prompt, sayChosen).
func (rc *redoChooser) sayRedo() {
	red := rc.cfg.Redo
	if red == nil {
		return
	}
	for _, ds := range rc.sets {
		if ds.redo.asGoes {
			rc.sayAsGoes(ds)
			continue
		}
		rc.sayRedoSet(ds, "")
	}
}

// sayRedoSet says what ds asks again, and why not the others; lead comes
// before the count ("every prompt read: ").
func (rc *redoChooser) sayRedoSet(ds *dsRun, lead string) {
	red, s := rc.cfg.Redo, ds.redo
	var why []string
	if n := s.atLimit.Load(); n > 0 {
		why = append(why, fmt.Sprintf("%d cut at this run's --max-new-tokens %d or more (raise it to ask them again)", n, rc.maxNewTokens()))
	}
	if n := s.ownLimit.Load(); n > 0 {
		why = append(why, fmt.Sprintf("%d cut at their prompt lines' own max_new_tokens or more (it wins over --max-new-tokens: raise it in those lines to ask them again)", n))
	}
	if n := s.done.Load(); n > 0 {
		why = append(why, fmt.Sprintf("%d answered again already", n))
	}
	if n := s.notAnswered.Load(); n > 0 {
		why = append(why, fmt.Sprintf("%d not answered yet (asked as any prompt without an answer)", n))
	}
	what := "the answers cut at the token limit"
	if !red.Truncated {
		what = "the ids " + red.Path + " lists"
		if len(s.ids)+len(why) == 0 {
			return // none of its ids is this dataset's
		}
	}
	if s.count() == 0 {
		rc.ctl.logf("gen: --redo: %s: %snone of %s is asked again: %s", ds.Name, lead, what, strings.Join(append(why, "none left")[:max(1, len(why))], ", "))
		return
	}
	tail := ""
	if len(why) > 0 {
		tail = "; not asked: " + strings.Join(why, ", ")
	}
	conv := ""
	if n := s.conversations.Load(); n > 0 {
		conv = fmt.Sprintf(" (%d of them conversations, from their first cut turn on)", n)
	}
	rc.ctl.logf("gen: --redo: %s: %s%d of %s are asked again%s, each new answer replacing the old one everywhere%s", ds.Name, lead, s.count(), what, conv, tail)
}

// sayOwed says, at a run's end, the work its datasets still owe that the
// lines above do not: the answers a redo has still to ask again (an
// interrupted one's), and the records and exclusions built from answers a
// redo replaced (a redo without --export, or one stopped before its final
// pass), with the command that makes them again. It reads store.Owed, the
// truth every view reads.
func (rc *redoChooser) sayOwed(v *store.View) {
	var stale uint64
	var each []string
	dirs := map[bool][]string{} // by ids format
	for _, ds := range slices.SortedFunc(slices.Values(rc.sets), func(a, b *dsRun) int { return strings.Compare(a.Name, b.Name) }) {
		s, err := v.Summary(ds.Name)
		if err != nil {
			continue
		}
		o := s.Owed()
		if !o.RedoKnown {
			rc.ctl.logf("  %s: at least %s still to ask again: the redo stopped before it had read every prompt for cut answers; the same gen --redo finds the others",
				ds.Name, counted(o.Redo, "answer", "answers"))
		} else if o.Redo > 0 {
			rc.ctl.logf("  %s: %s still to ask again (the redo stopped before them): the same gen --redo asks them",
				ds.Name, counted(o.Redo, "answer", "answers"))
		}
		if o.Stale > 0 {
			stale += o.Stale
			each = append(each, fmt.Sprintf("%s %d", ds.Name, o.Stale))
			f, ok, _ := export.FileFormat(ds.Tokenized)
			ids := ok && f == export.IDs
			dirs[ids] = append(dirs[ids], ingest.ShellQuote(filepath.Dir(ds.Raw)))
		}
	}
	if stale == 0 {
		return
	}
	var cmds []string
	for _, ids := range []bool{false, true} {
		if len(dirs[ids]) > 0 {
			cmds = append(cmds, rc.exportCommand(ids, dirs[ids]))
		}
	}
	were := "were"
	if stale == 1 {
		were = "was"
	}
	rc.ctl.logf("gen: %s (%s) %s made from answers a redo replaced: stale, they count as missing records ('gendex query missing --stage tokenized' lists them) until export makes them again from the new answers: %s",
		counted(stale, "record or exclusion", "records and exclusions"), strings.Join(each, ", "), were, strings.Join(cmds, " and "))
}

// exportCommand is the command that makes the records of the datasets in
// dirs (gendex export, in the ids format or the default one).
func (rc *redoChooser) exportCommand(ids bool, dirs []string) string {
	args := []string{"gendex", "export"}
	if p := rc.db.Path(); p != "" && p != "gendex.db" && p != "./gendex.db" {
		args = []string{"gendex", "--db", ingest.ShellQuote(p), "export"}
	}
	if ids {
		server := rc.cfg.Servers[0]
		if rc.cfg.Simulator {
			server = "sim" // gen --server sim's: export's own simulator
		}
		args = append(args, "--format", "ids", "--server", ingest.ShellQuote(server))
	}
	return strings.Join(append(args, dirs...), " ")
}

// sayAsGoes says, at the start, how an asGoes redo finds what it asks
// again in ds.
func (rc *redoChooser) sayAsGoes(ds *dsRun) {
	var answers, cut uint64
	rc.db.View(func(v *store.View) error {
		if s, err := v.Summary(ds.Name); err == nil {
			answers, cut = s.Stage(store.Raw).Records, s.Truncated()
		}
		return nil
	})
	rc.ctl.logf("gen: --redo: %s: %d answers, %d of them cut at the token limit (finish_reason length): too many to read before the first request, so each is decided as its prompt is read and asked again if it is to be, each new answer replacing the old one everywhere; how many are asked again, and so what is to go, is said once every prompt is read",
		ds.Name, answers, cut)
}

// todoText says what the run has to answer at its start: "12 prompts to
// answer", and the answers an asGoes redo finds, not known yet.
func (rc *redoChooser) todoText(todo int64) string {
	s := counted(todo, "prompt", "prompts") + " to answer"
	if n := rc.cfg.samples(); n > 1 {
		s = fmt.Sprintf("%s to ask (%d samples per prompt)", counted(todo, "answer", "answers"), n)
	}
	if rc.choosing() {
		s += ", and the cut answers the redo finds as it reads the prompts (how many is not known yet)"
	}
	return s
}
