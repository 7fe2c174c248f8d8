package gen

// gen --redo: answers asked again. A redone answer is appended to the
// dataset's answer file like any other, with "redo":true and the run's
// "max_new_tokens" in its line; the index counts it in place of the
// earlier answer of its id (store.Tx.Replace), in every view, and a fresh
// ingest of the folder reaches the same answer from the lines alone. The
// earlier line stays in the file: it is the record of what was asked.
//
// Which answers are asked again is decided from the index and the lines
// (before the first request; over a large set, as the feeder reads each
// prompt: redofeed.go), so a run killed at any moment and started again
// with the same --redo asks each one once:
//   - truncated: an answer cut at the token limit (finish_reason length),
//     unless it is cut at this run's --max-new-tokens or more (asking again
//     with the same limit gives the same cut), or is itself a redo made
//     with a limit of this run's or more;
//   - FILE: each listed id, unless its newest line is this redo's: the
//     redo of a list is held in the index from its first start (its ids'
//     digest and a tag, store.RedoMark) and writes its tag in each of its
//     lines, so a redo started again with the same ids goes on where it
//     stopped, and ends with nothing to do; FILE's timestamps play no
//     part (redolist.go).
// Under --export, a redone answer's record is made once the run's answers
// are in (the final export pass), after export took the replaced answer's
// record or exclusion out of its files (store's stale ids); a run killed
// before that leaves it to the next run's catch-up.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"gendex/ingest"
	"gendex/ingest/export"
	"gendex/store"
)

// ErrRedoUsage marks a --redo that names what the run does not have (a
// usage mistake: nothing was sent).
var ErrRedoUsage = errors.New("--redo")

// Redo is what --redo asks again, besides the prompts without an answer.
type Redo struct {
	// Truncated asks again the answers cut at the token limit.
	Truncated bool
	// Path is FILE: its ids, by dataset ("" for an id of any of the run's
	// datasets), and their digest (what makes two lists the same redo).
	Path    string
	entries []redoEntry
	digest  string
}

type redoEntry struct {
	line        int
	dataset, id string
	// sample is the one sample the line names (query missing's sample
	// column, with gen --samples), -1 for every sample of the id.
	sample int
}

// ParseRedo reads --redo's value: "truncated", or a FILE of ids, one per
// line (as `gendex query missing` prints them, with or without its
// header, with its sample column under gen --samples, or DATASET<TAB>ID).
func ParseRedo(arg string) (*Redo, error) {
	if arg == "truncated" {
		return &Redo{Truncated: true}, nil
	}
	f, err := os.Open(arg)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %v (give truncated, or a file of ids, one per line)", ErrRedoUsage, arg, err)
	}
	defer f.Close()
	r := &Redo{Path: arg}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, store.MaxIDLen+1<<16)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		e := redoEntry{line: n, sample: -1}
		switch fields := strings.Split(line, "\t"); {
		case len(fields) == 1:
			e.id = fields[0]
		case len(fields) == 2:
			e.dataset, e.id = fields[0], fields[1]
		default: // query missing's dataset, stage, id[, sample][, reason]
			if fields[0] == "dataset" && fields[2] == "id" {
				continue // its header
			}
			e.dataset, e.id = fields[0], fields[2]
			if len(fields) > 3 { // a sample column, or a reason (never a number)
				if s, err := strconv.Atoi(fields[3]); err == nil && s >= 0 {
					e.sample = s
				}
			}
		}
		r.entries = append(r.entries, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w %s:%d: %v", ErrRedoUsage, arg, n+1, err)
	}
	if len(r.entries) == 0 {
		return nil, fmt.Errorf("%w %s: no ids in it (one per line, or DATASET<TAB>ID)", ErrRedoUsage, arg)
	}
	r.digest = listDigest(r.entries)
	return r, nil
}

// redoSet is what a run asks again in one dataset: ids, and why others
// are not. A large set's cut answers are found as the feeder reads the
// prompts instead (asGoes, redofeed.go): ids stays empty, asked counts.
type redoSet struct {
	ids map[string]bool
	// asGoes: --redo truncated decides each answer as the feeder reads its
	// prompt; asked counts those asked again so far, and chosen says the
	// feeder has read every prompt of the dataset (the counts are whole).
	asGoes bool
	asked  atomic.Int64
	chosen atomic.Bool
	// atLimit counts cut answers left because they were cut at this run's
	// limit or above, ownLimit at their prompt line's own max_new_tokens
	// or above (asked again, the same limit gives the same cut); done those
	// a redo already answered; notAnswered the listed ids without an
	// answer yet (asked as any missing prompt).
	atLimit, ownLimit, done, notAnswered atomic.Int64
	// conversations counts, of ids, the conversations asked again turn by
	// turn from their first cut turn (recorded keeps the turns before it).
	conversations atomic.Int64
	// tag is a redo of a list's (store.RedoMark), written in its lines;
	// newMark: the index does not hold it yet (a new redo).
	tag     string
	newMark bool
}

// count is how many answers the set asks again (so far, when asGoes).
func (s *redoSet) count() int64 {
	if s == nil {
		return 0
	}
	return int64(len(s.ids)) + s.asked.Load()
}

// isConversation reports whether id's answer is a conversation answered
// turn by turn: its turns are in the turns stage as id#1, id#2, ..., the
// first always there (an id#x#1 is conversation id#x's, not id's).
func isConversation(v *store.View, dataset, id string) bool {
	_, ok, err := v.Get(dataset, store.Turns, ingest.TurnID(id, 1))
	return err == nil && ok
}

// redoChooser is --redo's choice: it decides which answers of the run's
// datasets are asked again (before the first request, or as the feeder
// reads each prompt: redofeed.go; a list's: redolist.go; a conversation's:
// redoturns.go), keeps each dataset's choice and counts in ds.redo, marks
// them in the index as owed (and a redo of a list's mark), says its
// counts (redosay.go), marks a redone answer's line, tells which of a
// redone conversation's recorded turns are kept, and makes the redone
// answers' records under --export (redoRecords). It sends nothing and
// writes no answer; in the index it writes only those marks.
// The run builds it (newRun) and hands it the datasets (prepare), which
// calls chooseRedo and sayRedo; the feeder asks it as it reads (askAgain,
// markFound, chose), the workers and conversations mark their lines
// (redoLine, keepTurn), and the summary says what is owed (sayOwed).
type redoChooser struct {
	ctl  *control
	cfg  *Config // read only
	db   *store.DB
	sets []*dsRun // the run's datasets (prepare)
}

// chooseRedo decides, before the first request, what each dataset asks
// again (a large --redo truncated: how, redofeed.go), and fails
// (ErrRedoUsage, nothing sent) when FILE lists ids no dataset of the run
// has; the index then holds them as owed (markAsking).
func (rc *redoChooser) chooseRedo() error {
	if err := rc.pickRedo(); err != nil {
		return err
	}
	return rc.markAsking()
}

// markAsking puts in the index the answers this run asks again (none
// without --redo), in place of an earlier run's, so that every view counts
// them as to go until each is answered again (store.Tx.SetAsking).
func (rc *redoChooser) markAsking() error {
	choosing := map[string]bool{} // an interrupted redo was still finding its answers
	if rc.cfg.Redo == nil {
		var earlier uint64
		rc.db.View(func(v *store.View) error {
			for _, ds := range rc.sets {
				if s, err := v.Summary(ds.Name); err == nil {
					earlier += s.Pending.Asking
					if s.Pending.Choosing {
						choosing[ds.Name] = true
					}
				}
			}
			return nil
		})
		if earlier == 0 && len(choosing) == 0 {
			return nil // nothing to change: no write
		}
	}
	dropped := map[string]uint64{}
	err := rc.db.Update(func(tx *store.Tx) error {
		for _, ds := range rc.sets {
			var ids []string
			if ds.redo != nil {
				for id := range ds.redo.ids {
					ids = append(ids, id)
				}
				sort.Strings(ids)
			}
			var earlier uint64
			var err error
			if ds.redo != nil && ds.redo.asGoes {
				earlier, err = tx.StartAsking(ds.Name) // the feeder adds them (redofeed.go)
			} else {
				earlier, err = tx.SetAsking(ds.Name, ids)
			}
			if err != nil {
				return err
			}
			if err := rc.markList(tx, ds); err != nil {
				return err
			}
			if earlier > 0 && rc.cfg.Redo == nil {
				dropped[ds.Name] = earlier
			}
		}
		return nil
	})
	for _, ds := range rc.sets {
		if n := dropped[ds.Name]; n > 0 || choosing[ds.Name] {
			more := ""
			if choosing[ds.Name] {
				more = " (and those it had not found yet: it stopped before it had read every prompt)"
			}
			rc.ctl.logf("gen: %s: %s an interrupted gen --redo was asking again%s are not asked by this run (no --redo), and no longer counted as to go; run that redo again to ask them",
				ds.Name, counted(n, "answer", "answers"), more)
		}
	}
	return err
}

// pickRedo is chooseRedo's choice, in ds.redo.
func (rc *redoChooser) pickRedo() error {
	red := rc.cfg.Redo
	if red == nil {
		return nil
	}
	maxNew := int64(-1)
	if rc.cfg.Sampling.MaxNewTokens != nil {
		maxNew = int64(*rc.cfg.Sampling.MaxNewTokens)
	}
	byName := map[string]*dsRun{}
	for _, ds := range rc.sets {
		byName[ds.Name] = ds
		ds.redo = &redoSet{ids: map[string]bool{}}
	}
	return rc.db.View(func(v *store.View) error {
		if !red.Truncated {
			return rc.pickList(v, red, byName)
		}
		if rc.redoAsGoes(v) {
			return nil
		}
		files := turnFiles{}
		defer files.close()
		for _, ds := range rc.sets {
			err := v.Each(ds.Name, store.Raw, func(rec *store.Record) error {
				if !rc.cfg.Shard.Has(store.PromptID(store.Raw, rec.ID)) { // a sample's shard is its prompt's
					return nil
				}
				ask, err := rc.cutToAsk(v, ds, rec, nil, files, maxNew)
				if ask {
					ds.redo.ids[rec.ID] = true
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// readLine returns rec's line, read from its file (nil when it cannot be),
// which files keeps open for the next.
func readLine(v *store.View, rec *store.Record, files turnFiles) []byte {
	f := files[rec.File]
	if f == nil {
		path, found := v.FilePath(rec.File)
		if !found {
			return nil
		}
		var err error
		if f, err = os.Open(path); err != nil {
			return nil
		}
		files[rec.File] = f
	}
	line := make([]byte, rec.Length)
	if _, err := f.ReadAt(line, rec.Offset); err != nil {
		return nil
	}
	return line
}

// redoneAt reports whether line is a redo's asked with a limit of maxNew
// or more (a redo's with no limit written, or a run without one: not known
// to be below it).
func redoneAt(line []byte, maxNew int64) bool {
	if !bytes.Contains(line, []byte(`"redo":true`)) {
		return false
	}
	var l struct {
		MaxNewTokens *int64 `json:"max_new_tokens"`
	}
	if json.Unmarshal(line, &l) != nil || l.MaxNewTokens == nil || maxNew < 0 {
		return true
	}
	return *l.MaxNewTokens >= maxNew
}

// redoLine marks line, a raw answer line of ds ending in "}\n", as a
// redo's (a redo of a list's: with its tag, see redolist.go).
func (rc *redoChooser) redoLine(j *job, line []byte) []byte {
	ds := j.ds
	line = bytes.TrimSuffix(line, []byte("}\n"))
	line = append(line, `,"redo":true`...)
	if ds.redo != nil && ds.redo.tag != "" {
		line = fmt.Appendf(line, `,"redo_tag":%q`, ds.redo.tag)
	}
	// The limit it was asked with: the prompt line's own, else the run's.
	if mt := cmp.Or(j.p.Sampling.MaxNewTokens, rc.cfg.Sampling.MaxNewTokens); mt != nil {
		line = fmt.Appendf(line, `,"max_new_tokens":%d`, *mt)
	}
	return append(line, "}\n"...)
}

// recordMaker makes the records of a dataset's answers that have none
// yet (exportrun.go's catch-up), by the first server's tokenizer.
type recordMaker interface {
	catchUp(ctx context.Context, ds *dsRun, tok export.Tokenizer) error
	firstServer() export.Tokenizer
}

// redoRecords is --export's final pass after a redo: the records of the
// redone answers, made by export's own path (rm) once the replaced
// answers' records are out of the files (see export's dropStale).
func (rc *redoChooser) redoRecords(rm recordMaker) error {
	var tok export.Tokenizer
	for _, ds := range rc.sets {
		if ds.redo.count() == 0 {
			continue
		}
		if tok == nil {
			tok = rm.firstServer()
		}
		if err := rm.catchUp(rc.ctl.stop, ds, tok); err != nil {
			return err
		}
	}
	return nil
}
