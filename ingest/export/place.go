package export

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gendex/ingest"
	"gendex/store"
)

// Place is a folder whose tokenized* and excluded* files the index holds
// a dataset's records and exclusions from.
type Place struct {
	Dir        string
	Records    uint64 // records indexed from its tokenized* files
	Exclusions uint64 // exclusions indexed from its excluded* files
	// Gone: none of the place's indexed files is on disk any more (the
	// index still counts their records until they are dropped from it).
	Gone bool
}

// String says where the records are and how many: "DIR (N records, M
// exclusions)".
func (p Place) String() string {
	s := fmt.Sprintf("%s (%d records, %d exclusions", p.Dir, p.Records, p.Exclusions)
	if p.Gone {
		s += "; its files are no longer on disk"
	}
	return s + ")"
}

// Places lists, in folder order, every folder that the index holds
// records or exclusions of dataset from.
func Places(db *store.DB, dataset string) ([]Place, error) {
	byDir := map[string]*Place{}
	present := map[string]bool{}
	err := db.View(func(v *store.View) error {
		return v.Files(func(fs store.FileState) error {
			if fs.Dataset != dataset || !isOutput(fs.Stage) || fs.ID == 0 || fs.Phase != store.PhaseReady {
				return nil
			}
			if fs.Records == 0 {
				return nil // nothing of it stands for an answer
			}
			dir := filepath.Dir(fs.Path)
			p := byDir[dir]
			if p == nil {
				p = &Place{Dir: dir}
				byDir[dir] = p
			}
			if fs.Stage == store.Tokenized {
				p.Records += fs.Records
			} else {
				p.Exclusions += fs.Records
			}
			if _, err := os.Stat(fs.Path); err == nil {
				present[dir] = true
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	out := make([]Place, 0, len(byDir))
	for dir, p := range byDir {
		p.Gone = !present[dir]
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out, nil
}

// Where returns the place of d's own outputs (Dataset.Out), with what the
// index holds from it, and the other places the index holds records or
// exclusions of d from.
func Where(db *store.DB, d Dataset) (own Place, elsewhere []Place, err error) {
	ps, err := Places(db, d.Name)
	if err != nil {
		return Place{}, nil, err
	}
	out := filepath.Clean(d.Out)
	own.Dir = out
	for _, p := range ps {
		if p.Dir == out {
			own = p
		} else {
			elsewhere = append(elsewhere, p)
		}
	}
	return own, elsewhere, nil
}

// ElsewhereError is export's refusal to write a dataset's records in its
// output folder when the index already holds records or exclusions of
// the dataset from other folders: an index holds one record per answer,
// so those would stand in for the records of this folder (which would
// stay empty), or the records would be split between two folders.
type ElsewhereError struct {
	Dataset   string
	Out       string  // the output folder asked for
	Elsewhere []Place // where the index's records of the dataset are
}

func (e *ElsewhereError) Error() string {
	where := make([]string, len(e.Elsewhere))
	for i, p := range e.Elsewhere {
		where[i] = p.String()
	}
	return fmt.Sprintf("%s: this index already holds the dataset's records in %s, not in %s: an index holds one record per answer, "+
		"so they would stand in for %s's; write the records where they are (export's --out), or write %s's with an index of their own (another --db)",
		e.Dataset, strings.Join(where, " and "), e.Out, e.Out, e.Out)
}

// CheckPlace refuses an export of d whose answers (d.Sources) the index
// counts in another folder (ingest.CheckPlaces), and returns an
// *ElsewhereError when the index holds records or exclusions of d from
// folders other than d.Out.
func (x *Exporter) CheckPlace(d Dataset) error {
	// The answers it reads count only in the dataset's own answer folder
	// (ingest's one rule for every writer): a record is never built from
	// answers the index does not count for the dataset.
	if err := ingest.CheckPlaces(x.Ix.DB, d.Sources); err != nil {
		return err
	}
	_, elsewhere, err := Where(x.Ix.DB, d)
	if err != nil {
		return err
	}
	if len(elsewhere) > 0 {
		return &ElsewhereError{Dataset: d.Name, Out: filepath.Clean(d.Out), Elsewhere: elsewhere}
	}
	return nil
}

// IDsCommand is the command that makes the ids records of a dataset of
// token-id prompts, whose prompts are in promptDir and answers in
// answerDir (the same folder, or gen --out's), in a folder and an index of
// their own beside the answers' parent (ROOT-ids): the conversations format
// makes no record of such a prompt (ReasonIDsPrompt), and one index holds
// one record per answer.
func IDsCommand(promptDir, answerDir string) string {
	own := filepath.Join(filepath.Dir(filepath.Dir(answerDir)), filepath.Base(filepath.Dir(answerDir))+"-ids")
	args := []string{"gendex", "--db", ingest.ShellQuote(filepath.Join(own, "gendex.db")), "export", "--format", "ids",
		"--out", ingest.ShellQuote(own), ingest.ShellQuote(promptDir)}
	if answerDir != promptDir {
		args = append(args, ingest.ShellQuote(answerDir))
	}
	return strings.Join(args, " ")
}

// formatOnly maps each reason that holds under one format only to that
// format: a token-id prompt has an ids record but no conversations one, an
// answer without output ids (or with a turn that cannot have its loss in
// ids) a conversations record but no ids one.
var formatOnly = map[string]Format{ReasonIDsPrompt: Conversations, ReasonNoOutputIDs: IDs, ReasonNoTurnLoss: IDs}

// OtherFormatExclusions returns the reason and number of the exclusions
// of dataset the index holds that only the other format than f makes: an
// export in f would find those answers decided already (one record or
// exclusion per answer in an index), so their f records need an index of
// their own. n is 0 when there are none.
func OtherFormatExclusions(db *store.DB, dataset string, f Format) (reason string, other Format, n uint64, err error) {
	err = db.View(func(v *store.View) error {
		s, err := v.Summary(dataset)
		if err != nil {
			return nil // nothing indexed of it
		}
		for r, rf := range formatOnly {
			if c := s.Stage(store.Excluded).Finish[r]; rf != f && c > 0 {
				reason, other, n = r, rf, c
			}
		}
		return nil
	})
	return reason, other, n, err
}
