package gen

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"gendex/ingest"
	"gendex/store"
)

// A dataset is a place, not only a name. In one index, a dataset's prompts
// come from one folder and its answers (raw_responses*, errors*, turns*)
// from one folder: gen's answer folder, beside the prompts or
// --out DIR/<dataset>/. So a run's prompts count as answered only by the
// answers in its own answer folder. Before anything is indexed, each
// dataset of the run is checked against what the index holds under its
// name (settlePlaces):
//
//   - nothing, or files in this run's folders only: the run goes on;
//   - files elsewhere, all of whose answers the simulator made: that
//     dataset is dropped from the index (its files stay), said in the log
//     with the rule (one answer folder counts: this run's), since a dry
//     run's answers are nothing to keep a run from;
//   - files elsewhere otherwise: the run is refused, naming both folders
//     and the two ways out (gendex drop NAME, or another --db).
//
// And the simulator's answers and a real model's never share a folder:
// once a server's /v1/models says what it is (learn), a run whose answer
// folder holds the other kind stops before its first request
// (checkServerKind).

// place is where one dataset of the run reads and writes.
type place struct {
	name             string
	prompts, answers string // folders
}

func placeOf(d Dataset) place {
	return place{name: d.Name, prompts: filepath.Dir(d.Prompts[0]), answers: filepath.Dir(d.Raw)}
}

// outside returns the files of a dataset (fs, every file indexed under its
// name) that lie outside p: prompts from another folder, or answers from
// another folder (ingest.Elsewhere).
func (p place) outside(fs []store.FileState) []store.FileState {
	return append(ingest.Elsewhere(fs, store.Prompts, p.prompts), ingest.Elsewhere(fs, store.Raw, p.answers)...)
}

// makerCounts sums the answers of response files by kind (those that
// count: a redo's replaced ones not; the answer lines of a file indexed
// before the index kept that): made by the simulator, by a named model,
// or by something the lines do not say.
type makerCounts struct {
	simulated, real, unknown uint64
	models                   []string // the named models, sorted
	// made is every maker of the lines, provenance and all (one entry per
	// distinct maker, its answers summed in Lines), for checkProvenance.
	made []store.Maker
}

func countMakers(fs []store.FileState) makerCounts {
	var m makerCounts
	seen := map[string]bool{}
	for _, f := range fs {
		if f.Stage != store.Raw {
			continue
		}
		var made uint64
		for i, mk := range f.Makers {
			made += mk.Lines
			n, _ := f.MakerCount(i) // the answers that count, where the index knows them
			if n == 0 {
				continue // each answer it made was replaced
			}
			m.made = store.AddMaker(m.made, mk.Model, mk.Simulated, mk.Provenance, n)
			switch {
			case mk.Simulated:
				m.simulated += n
			case mk.Model != "":
				m.real += n
			default:
				m.unknown += n
			}
			if mk.Model != "" && !seen[mk.Model] {
				seen[mk.Model] = true
				m.models = append(m.models, mk.Model)
			}
		}
		if lines := f.Records + f.Duplicates; !f.MakerAnswers && lines > made { // indexed before makers were kept
			m.unknown += lines - made
		}
	}
	sort.Strings(m.models)
	return m
}

// simulatedOnly: every answer line is the simulator's, and there is one.
func (m makerCounts) simulatedOnly() bool { return m.simulated > 0 && m.real == 0 && m.unknown == 0 }

// String says who made the answers: "model M, made by the simulator".
func (m makerCounts) String() string {
	var parts []string
	if len(m.models) > 0 {
		parts = append(parts, "model "+strings.Join(m.models, ", "))
	}
	switch {
	case m.simulatedOnly():
		parts = append(parts, "made by the simulator")
	case m.simulated > 0:
		parts = append(parts, fmt.Sprintf("%d of them by the simulator", m.simulated))
	}
	if m.unknown > 0 && m.unknown < m.simulated+m.real+m.unknown {
		parts = append(parts, fmt.Sprintf("%d not saying which model", m.unknown))
	} else if m.unknown > 0 {
		parts = append(parts, "model not recorded")
	}
	return strings.Join(parts, ", ")
}

// describeAnswers says where a dataset's answers are: "50 answers in DIR
// (model M, made by the simulator)", a clause per folder.
func describeAnswers(fs []store.FileState) string {
	byDir := map[string][]store.FileState{}
	var dirs []string
	for _, f := range fs {
		if f.Stage != store.Raw {
			continue
		}
		dir := filepath.Dir(f.Path)
		if byDir[dir] == nil {
			dirs = append(dirs, dir)
		}
		byDir[dir] = append(byDir[dir], f)
	}
	sort.Strings(dirs)
	var parts []string
	for _, dir := range dirs {
		var n uint64
		for _, f := range byDir[dir] {
			n += f.Records
		}
		if n == 0 {
			continue
		}
		s := fmt.Sprintf("%d %s in %s", n, plural(n, "answer", "answers"), dir)
		if who := countMakers(byDir[dir]).String(); who != "" {
			s += " (" + who + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "no answers"
	}
	return strings.Join(parts, "; ")
}

func plural(n uint64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// PlaceError refuses a run whose datasets the index already counts from
// other folders; it names them and the ways out.
type PlaceError struct {
	DB    string
	Lines []string // one per dataset: what the index holds, and where
	Names []string
}

func (e *PlaceError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the index %s already counts %s from other folders than this run's, and answers in one folder never stand in for another's:\n", e.DB, plural(uint64(len(e.Names)), "a dataset", "datasets"))
	for _, l := range e.Lines {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	fmt.Fprintf(&b, "Keep both: give this run an index of its own, gendex --db OTHER.db gen ...\n")
	fmt.Fprintf(&b, "Or start over here: gendex --db %s drop %s (the index forgets them; no file is touched), then run gen again", e.DB, strings.Join(e.Names, " "))
	return b.String()
}

// settlePlaces checks each dataset of the run against what the index
// holds under its name (see the top of this file): it drops the
// simulator's datasets from other folders and refuses the run for any
// other dataset from other folders, before anything is indexed.
func (w *writer) settlePlaces(datasets []Dataset) error {
	var by map[string][]store.FileState
	if err := w.db.View(func(v *store.View) (err error) {
		by, err = ingest.HeldFiles(v)
		return err
	}); err != nil {
		return err
	}
	refuse := &PlaceError{DB: w.db.Path()}
	var drop []string
	for _, d := range datasets {
		p := placeOf(d)
		elsewhere := p.outside(by[d.Name])
		if len(elsewhere) == 0 {
			continue
		}
		held := by[d.Name]
		if countMakers(held).simulatedOnly() {
			w.ctl.logf("gen: %s: the index counts one answer folder for a dataset, this run's (%s): it forgets the simulator's %s; the files stay",
				d.Name, p.answers, describeAnswers(held))
			drop = append(drop, d.Name)
			continue
		}
		line := fmt.Sprintf("%s: the index holds %s", d.Name, describeAnswers(held))
		if dirs := ingest.Folders(filterStage(elsewhere, store.Prompts)); len(dirs) > 0 {
			line += fmt.Sprintf(", and prompts from %s", strings.Join(dirs, ", "))
		}
		line += fmt.Sprintf("; this run reads its prompts from %s and writes its answers to %s", p.prompts, p.answers)
		refuse.Lines = append(refuse.Lines, line)
		refuse.Names = append(refuse.Names, d.Name)
	}
	if len(refuse.Names) > 0 {
		return refuse
	}
	if len(drop) == 0 {
		return nil
	}
	return w.db.Update(func(tx *store.Tx) error {
		for _, name := range drop {
			if _, err := tx.DropDataset(name); err != nil {
				return err
			}
		}
		return nil
	})
}

func filterStage(fs []store.FileState, s store.Stage) []store.FileState {
	var out []store.FileState
	for _, f := range fs {
		if f.Stage == s {
			out = append(out, f)
		}
	}
	return out
}

// countAnswerMakers stores, for each dataset of the run, who made the
// answers in its answer folder (once reconcile has indexed them), for
// checkServerKind and for saying where the answers are, and where its
// prompts keep their id (dsRun.idRule).
func (w *writer) countAnswerMakers() error {
	return w.db.View(func(v *store.View) error {
		by, err := ingest.HeldFiles(v)
		if err != nil {
			return err
		}
		for _, ds := range w.sets {
			ds.held = by[ds.Name]
			ds.makers = countMakers(ds.held)
			ds.idRule = builtinIDRule
			if st, ok, _ := v.File(ds.Prompts[0]); ok && st.IDPath != "" {
				ds.idRule = st.IDPath
			}
		}
		return nil
	})
}

// checkServerKind stops the run when a server's kind (the simulator, or
// not) does not match the answers already in a dataset's answer folder:
// the simulator's answers never go beside a real model's, nor the other way.
func (w *writer) checkServerKind(server string, simulated bool) error {
	for _, ds := range w.sets {
		m := ds.makers
		switch {
		case !simulated && m.simulated > 0:
			return kindError{fmt.Errorf("%s holds %d answers made by the simulator (gendex's --server sim, or gendex sim), and %s is not the simulator: a dry run's answers never count for a real run, nor share its files. Write this run's answers to another folder: add --out DIR (the index then forgets the simulator's answers by itself; their files stay)",
				ds.placeAnswers(), m.simulated, server)}
		case simulated && m.real > 0:
			return kindError{fmt.Errorf("%s holds %d answers of %s, and %s is gendex's simulator: its answers never go beside a real model's; give the dry run a folder and an index of its own (gendex --db DRY.db gen --server sim --out DIR)",
				ds.placeAnswers(), m.real, strings.Join(m.models, ", "), server)}
		}
	}
	return nil
}

func (ds *dsRun) placeAnswers() string { return filepath.Dir(ds.Raw) }

// checkKindIdle runs checkServerKind for a run with nothing to send: when a
// dataset's folder holds the simulator's answers and the servers may not be
// the simulator, it connects (connect: run.connect, whose learn checks) to
// learn what they are.
func (w *writer) checkKindIdle(connect func() error) error {
	if w.cfg.Simulator {
		return w.checkServerKind("--server sim", true)
	}
	for _, ds := range w.sets {
		if ds.makers.simulated > 0 {
			if err := connect(); err != nil && !w.ctl.stopping() {
				return fmt.Errorf("%s holds the simulator's answers, so gen asks the server whether it is the simulator too before it says there is nothing to do, and none answered: %w", ds.placeAnswers(), err)
			}
			return context.Cause(w.ctl.stop)
		}
	}
	return nil
}

// sayAnswered says, per dataset, where the answers that left nothing to do
// are.
func (w *writer) sayAnswered() {
	for _, ds := range sortedByName(w.sets) {
		w.ctl.logf("  %s: %s", ds.Name, describeAnswers(ds.held))
	}
}

// saySkipped says, per dataset some of whose prompts have an outcome
// already, how many are not asked again and where their answers are.
func (w *writer) saySkipped() {
	w.db.View(func(v *store.View) error {
		for _, ds := range sortedByName(w.sets) {
			s, err := ds.summary(v)
			if err != nil || s.Overlap.Answered == 0 {
				continue
			}
			kept := s.Overlap.Answered
			if ds.redo != nil {
				kept -= uint64(len(ds.redo.ids)) // asked again (--redo)
			}
			if kept == 0 {
				continue
			}
			of := fmt.Sprintf("%d of %d prompts already answered or failed", kept, s.Stage(store.Prompts).Records)
			if ds.samples > 1 { // units: each sample of a prompt
				of = fmt.Sprintf("%d of %d answers (%d samples of %d prompts) already made or failed", kept, s.Units(), ds.samples, s.Stage(store.Prompts).Records)
			}
			if ds.redo != nil && ds.redo.asGoes {
				w.ctl.logf("  %s: %s, not asked again but for the cut answers the redo finds among them: %s", ds.Name, of, describeAnswers(ds.held))
				continue
			}
			w.ctl.logf("  %s: %s, not asked again: %s", ds.Name, of, describeAnswers(ds.held))
		}
		return nil
	})
}
