package query

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gendex/store"
)

// The check: is a dataset fit to train a drafter on? One verdict per
// dataset, each reason it is not with its count and the command that fixes
// it. The counts come from the index (store.Summary.Owed, the records'
// own token counts and finish reasons, the files' makers); the content
// checks (reasoning markers, empty turns, one text for many prompts) and
// a conversation's length read each answer that has a record once, at its
// offset, through CheckOptions.Answers (check_records.go).

// CheckOptions are what a check is asked with.
type CheckOptions struct {
	// MaxLength is the drafter's training length in tokens (0: not
	// checked): records whose answer's prompt + completion tokens exceed it.
	MaxLength int
	// IncludeTruncated accepts records of answers cut at the token limit.
	IncludeTruncated bool
	// AllowMixed accepts answers made by more than one model.
	AllowMixed bool
	// AllowSimulated accepts answers made by the simulator (a dry run).
	AllowSimulated bool
	// IDs asks, instead of the verdicts, for the ids of the answers the
	// check counts for this reason (one of IDReasons): rows of
	// idColumns, in id order per dataset.
	IDs string
	// CheckReaders read the dataset's files: not words of the question,
	// whoever runs it gives them.
	CheckReaders
	// AllowNoPrompt accepts answers whose id matches no prompt (no record
	// is made of them).
	AllowNoPrompt bool
}

// CheckReaders are what check reads a dataset's files with, by the rules
// of the parts that write them (query imports neither ingest nor gen:
// gendex's main gives them, to the checks it runs and to a writer's
// socket). Each one left nil has the meaning its comment gives; none
// lets a check pass unsaid.
type CheckReaders struct {
	// Answers reads an answer line for the content checks and a
	// conversation's length (nil: they are not made, and the check says
	// so).
	Answers AnswerReader
	// FileChanged says why the file the index read at f.Path is no longer
	// what it read, "" when it is (appended to counts as not changed), by
	// ingest's rules (ingest.Changed, the writers' own decision); an error
	// is a file that could not be looked at. Nil: the disk is not looked
	// at, and a disk_unchecked note says so (check_disk.go).
	FileChanged func(f store.FileState) (why string, err error)
	// PromptUnsendable reports whether a prompt line holds no prompt gen
	// sends by its own keys, and a path in it that holds one, for gen
	// --prompt ("" for none): gen's rule (gen.Unsendable). Nil: the
	// prompts to go are not read for their shape, and unanswered's fix is
	// gen without --prompt (checkunsent.go).
	PromptUnsendable func(line []byte) (unsendable bool, promptPath string)
}

// The reasons a check gives, in the order it gives them.
const (
	ReasonNoPrompts     = "prompts_unknown"   // no prompts file indexed: nothing adds up to the prompts
	ReasonUnanswered    = "unanswered"        // prompts neither answered nor failed
	ReasonRedo          = "redo_pending"      // answers a redo is asking again
	ReasonNoRecord      = "no_record"         // answers without a record or an exclusion
	ReasonStale         = "stale_record"      // records built from an answer a redo replaced
	ReasonAllExcluded   = "all_excluded"      // answers, every one excluded: no record to train on
	ReasonTruncatedKept = "truncated_kept"    // records of answers cut at the token limit
	ReasonTooLong       = "over_max_length"   // records longer than --max-length
	ReasonLenUnknown    = "length_unknown"    // records whose length the index does not know
	ReasonThink         = "think_in_content"  // <think> markers in content, reasoning kept apart
	ReasonEmpty         = "empty_content"     // records of answers with an empty assistant turn
	ReasonRepeated      = "repeated_text"     // one answer text for many prompts
	ReasonSamplesAlike  = "samples_alike"     // a prompt's samples all one text (a note)
	ReasonSimulated     = "simulated"         // answers made by the simulator, not a model
	ReasonMixed         = "mixed_provenance"  // answers made by more than one model, or with other sampling
	ReasonMixShare      = "mix_share"         // a gen --mix value's share beyond sampling noise of its spec (mix.go)
	ReasonMadeBy        = "made_by"           // how the answers were made, one way (a note)
	ReasonFailed        = "failed_prompts"    // prompts that failed for good (a note)
	ReasonNotRead       = "content_unchecked" // the content checks could not be made (a note)
)

// checkColumns are the check's columns: one row per reason, or one row
// with reason "" for a dataset with none. blocks says whether the reason
// makes the dataset not ready (a note does not).
var checkColumns = []string{"dataset", "ready", "reason", "blocks", "count", "tokens", "detail", "fix"}

// A finding is one reason of one dataset.
type finding struct {
	reason        string
	blocks        bool
	count, tokens any
	detail, fix   string
}

// check answers the check question: rows as checkColumns, datasets in
// names' order.
func check(v *store.View, names []string, o CheckOptions, out Sink) error {
	files := map[uint32]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if o.IDs != "" {
		return checkIDs(v, names, o, files, out) // check_ids.go
	}
	out.Columns(checkColumns)
	for _, name := range names {
		fs, err := checkDataset(v, name, o, files)
		if err != nil {
			return err
		}
		ready := true
		for _, f := range fs {
			ready = ready && !f.blocks
		}
		if len(fs) == 0 {
			if err := out.Row([]any{name, true, "", false, nil, nil, "", ""}); err != nil {
				return err
			}
		}
		for _, f := range fs {
			if err := out.Row([]any{name, ready, f.reason, f.blocks, f.count, f.tokens, f.detail, f.fix}); err != nil {
				return err
			}
		}
	}
	return nil
}

// folderOf is the dataset's folder as the fix commands name it: the
// folder of its answers, or of any of its files.
func folderOf(v *store.View, name string) string {
	var some, raw string
	_ = v.Files(func(f store.FileState) error {
		if f.Dataset != name {
			return nil
		}
		if some == "" {
			some = filepath.Dir(f.Path)
		}
		if raw == "" && f.Stage == store.Raw {
			raw = filepath.Dir(f.Path)
		}
		return nil
	})
	switch {
	case raw != "":
		return raw
	case some != "":
		return some
	}
	return name
}

// checkDataset finds every reason of one dataset.
func checkDataset(v *store.View, name string, o CheckOptions, files map[uint32]*os.File) ([]finding, error) {
	s, err := v.Summary(name)
	if err != nil {
		return nil, err
	}
	dir := folderOf(v, name)
	owed := s.Owed()
	fs, err := checkDisk(v, name, o.FileChanged) // the disk first: a stale index is never ready
	if err != nil {
		return nil, err
	}
	add := func(reason string, blocks bool, n uint64, detail, fix string) {
		if n > 0 {
			fs = append(fs, finding{reason: reason, blocks: blocks, count: n, detail: detail, fix: fix})
		}
	}
	if s.Stage(store.Prompts).Files == 0 {
		fs = append(fs, finding{reason: ReasonNoPrompts, blocks: true,
			detail: "no prompts file is indexed, so nothing says every prompt has its answer",
			fix:    "gendex ingest " + filepath.Join(dir, "prompts.jsonl")})
	} else if owed.Prompts > 0 {
		fs = append(fs, unansweredFinding(v, name, dir, owed.Prompts, files, o.PromptUnsendable)) // checkunsent.go
	}
	if !owed.RedoKnown { // a redo stopped before it had read every prompt: it owes these and may owe more
		fs = append(fs, finding{reason: ReasonRedo, blocks: true, detail: fmt.Sprintf("answers a redo is asking again: how many is not known, it stopped before it had read every prompt for them (%d found)", owed.Redo),
			fix: "gendex gen --server URL --redo truncated ... " + dir + " (resume the redo)"})
	} else {
		add(ReasonRedo, true, owed.Redo, "answers a redo is asking again", "gendex gen --server URL --redo ... "+dir+" (resume the redo)")
	}
	noPrompt, unrecorded, err := noPromptFinding(v, name, dir, s, o.AllowNoPrompt)
	if err != nil {
		return nil, err
	}
	if noPrompt != nil { // export makes no record of them: no_record leaves them to no_prompt
		fs = append(fs, *noPrompt)
	}
	add(ReasonNoRecord, true, owed.Records-min(owed.Stale, owed.Records)-unrecorded, "answers without a record or a stated exclusion", "gendex export "+dir)
	add(ReasonStale, true, owed.Stale, "records built from an answer a redo replaced since", "gendex export "+dir)
	rs, err := checkRecords(v, name, o, files)
	if err != nil {
		return nil, err
	}
	if s.Stage(store.Tokenized).Records == 0 {
		add(ReasonAllExcluded, true, s.Excluded(), "answers, every one excluded: not one record to train on",
			"gendex query list "+name+" --stage excluded says why each was; token-id prompts need ids records (gendex export --format ids "+dir+" says how)")
	}
	fs = append(fs, noTurnLoss(s, dir)...)
	if !o.IncludeTruncated {
		add(ReasonTruncatedKept, true, rs.truncated, "records of answers cut at the token limit",
			"gendex gen --server URL --redo truncated --max-new-tokens N "+dir+" (or accept them: check --include-truncated)")
	}
	fs = append(fs, rs.lengths(v, name, o.MaxLength, dir)...)
	rs.samples = s.Samples()
	fs = append(fs, rs.content(dir)...)
	fs = append(fs, simulated(v, name, o.AllowSimulated, dir)...)
	mixOff, shares := mixFindings(v, name, dir)
	if shares != "" {
		shares = "; drawn per record (--mix): " + shares
	}
	switch mixed, ways, answers := mixedModels(v, name); {
	case mixed:
		fs = append(fs, finding{reason: ReasonMixed, blocks: !o.AllowMixed, count: answers, detail: "answers made in more than one way: " + ways + shares,
			fix: redoFix(ReasonMixed, dir) + " (the server and flags most were made with), or accept them: check --allow-mixed"})
	case answers > 0:
		fs = append(fs, finding{reason: ReasonMadeBy, count: answers, detail: "answers made one way: " + ways + shares})
	}
	if mixOff != nil {
		fs = append(fs, *mixOff)
	}
	failed := "prompts that failed for good (no record is owed for them)"
	if n := s.Samples(); n > 1 { // units: each sample of a prompt
		failed = fmt.Sprintf("answers that failed for good (%d samples per prompt, gen --samples; no record is owed for them)", n)
	}
	add(ReasonFailed, false, owed.Failed, failed, "gendex query errors "+name)
	return fs, nil
}

// mixedModels reports whether the dataset's answers were made in more
// than one way: by more than one model (or a model and the simulator), or
// with more than one provenance (gen's "provenance": the sampling sent,
// the server's identity and how gen asked, "gen"; its max_new_tokens
// aside, which a redo of cut answers raises). Lines without a provenance
// differ only by their model; a provenance without "gen" (an older
// gendex's) is unknown there, one way with those that agree on the rest,
// as is a "gen" key one lacks (askedAgree).
// It counts the answers that count (a redo's replaced ones not), and
// names each way with them; a file indexed before the index kept those
// counts its answer lines, and says so.
func mixedModels(v *store.View, name string) (mixed bool, ways string, total uint64) {
	type count struct{ answers, lines uint64 } // lines: of files that keep no answers
	by := map[string]*count{}                  // a way -> its count
	models := map[string]bool{}
	provs := map[string]map[string]bool{} // provenance without "gen" -> its "gen" parts ("": unknown)
	widest := widestPromptRules(v, name)
	_ = v.Files(func(f store.FileState) error {
		if f.Dataset != name || f.Stage != store.Raw {
			return nil
		}
		var made uint64
		for i, m := range f.Makers {
			made += m.Lines
			n, answers := f.MakerCount(i)
			if n == 0 {
				continue // every answer it made was replaced
			}
			who, way, p := makerWay(m, widest)
			models[who] = true
			if p != "" {
				base, asked := splitAsked(p)
				if provs[base] == nil {
					provs[base] = map[string]bool{}
				}
				provs[base][asked] = true
			}
			if by[way] == nil {
				by[way] = &count{}
			}
			if answers {
				by[way].answers += n
			} else {
				by[way].lines += n
			}
			total += n
		}
		if n := f.Records + f.Duplicates; !f.MakerAnswers && n > made { // indexed before makers were kept
			const way = unknownWay
			if by[way] == nil {
				by[way] = &count{}
			}
			by[way].lines += n - made
			total += n - made
		}
		return nil
	})
	names := make([]string, 0, len(by))
	for w := range by {
		names = append(names, w)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, w := range names {
		c := by[w]
		var said []string
		if c.answers > 0 {
			said = append(said, fmt.Sprintf("%d answers", c.answers))
		}
		if c.lines > 0 {
			said = append(said, fmt.Sprintf("%d answer lines (indexed before answers were counted: replaced ones among them)", c.lines))
		}
		parts[i] = w + ": " + strings.Join(said, ", ")
	}
	mixed = len(models) > 1 || len(provs) > 1
	for _, asked := range provs {
		delete(asked, "") // unknown: one way with any
		mixed = mixed || !askedAgree(asked)
	}
	return mixed, strings.Join(parts, "; "), total
}

// splitAsked splits a canonical provenance (canonicalProvenance's key)
// into the rest and its "gen" part ("" when it has none).
func splitAsked(key string) (base, asked string) {
	var p map[string]json.RawMessage
	if json.Unmarshal([]byte(key), &p) != nil {
		return key, ""
	}
	asked = string(p["gen"])
	delete(p, "gen")
	b, _ := json.Marshal(p)
	return string(b), asked
}

// unknownWay is the way of answers indexed before their makers were kept.
const unknownWay = "an unknown model (provenance unknown)"

// makerWay names what maker m made its answers with: who (its model, or
// "unnamed", and whether simulated), way (who and its provenance as
// shown, its prompt rule the widest that extends it) and prov (its
// provenance as compared; "" for none).
func makerWay(m store.Maker, widest map[string]string) (who, way, prov string) {
	who = m.Model
	if who == "" {
		who = "unnamed"
	}
	if m.Simulated {
		who += " (simulated)"
	}
	way = who
	if p, shown, ok := canonicalProvenance(widenPromptRule(m.Provenance, widest)); ok {
		prov, way = p, way+" "+shown
	} else {
		way += " (provenance unknown)"
	}
	return who, way, prov
}

// canonicalProvenance is a provenance object without its max_new_tokens,
// its keys sorted, for telling provenances apart, and as shown: its
// leaves as key=value (the model aside, named apart; gen=unknown when it
// does not say how gen asked); ok is false for none.
func canonicalProvenance(raw []byte) (key, shown string, ok bool) {
	var p map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &p) != nil {
		return "", "", false
	}
	if s, ok := p["sampling"].(map[string]any); ok {
		delete(s, "max_new_tokens")
	}
	delete(p, "unset")
	delete(p, "drawn") // a record's own draw from the run's --mix: one way with the others (mix.go)
	b, err := json.Marshal(p)
	if err != nil {
		return "", "", false
	}
	var pairs []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if m, ok := v.(map[string]any); ok {
			for k, e := range m {
				walk(prefix+k+".", e)
			}
			return
		}
		k := strings.TrimSuffix(prefix, ".")
		if k == "server.model" {
			return
		}
		j, _ := json.Marshal(v)
		pairs = append(pairs, strings.TrimPrefix(strings.TrimPrefix(k, "server."), "sampling.")+"="+string(j))
	}
	walk("", p)
	if _, asked := p["gen"]; !asked {
		pairs = append(pairs, "gen=unknown") // an older gendex's: how it asked is not recorded
	}
	sort.Strings(pairs)
	return string(b), "(" + strings.Join(pairs, " ") + ")", true
}
