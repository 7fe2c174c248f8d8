package query

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
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
// checks (reasoning markers, empty text, one text for many prompts) read
// each answer that has a record once, at its offset, through AnswerText.

// AnswerText reads an answer line's text and its reasoning kept apart, by
// ingest's rules for every shape (main sets it: query does not import
// ingest). ok is false when the line holds no text. Nil: the content
// checks are not made, and say so.
var AnswerText func(line []byte) (text string, ok bool, reasoning string, err error)

// CheckOptions are what a check is asked with.
type CheckOptions struct {
	// MaxLength is the drafter's training length in tokens (0: not
	// checked): records whose answer's prompt + completion tokens exceed it.
	MaxLength int
	// IncludeTruncated accepts records of answers cut at the token limit.
	IncludeTruncated bool
	// AllowMixed accepts answers made by more than one model.
	AllowMixed bool
	// AllowNoPrompt accepts answers whose id matches no prompt (no record
	// is made of them).
	AllowNoPrompt bool
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
	ReasonEmpty         = "empty_content"     // records of answers with empty text
	ReasonRepeated      = "repeated_text"     // one answer text for many prompts
	ReasonMixed         = "mixed_provenance"  // answers made by more than one model, or with other sampling
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
	out.Columns(checkColumns)
	files := map[uint32]*os.File{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
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
	var fs []finding
	add := func(reason string, blocks bool, n uint64, detail, fix string) {
		if n > 0 {
			fs = append(fs, finding{reason: reason, blocks: blocks, count: n, detail: detail, fix: fix})
		}
	}
	if s.Stage(store.Prompts).Files == 0 {
		fs = append(fs, finding{reason: ReasonNoPrompts, blocks: true,
			detail: "no prompts file is indexed, so nothing says every prompt has its answer",
			fix:    "gendex ingest " + filepath.Join(dir, "prompts.jsonl")})
	} else {
		add(ReasonUnanswered, true, owed.Prompts, "prompts neither answered nor failed", "gendex gen --server URL "+dir)
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
	if !o.IncludeTruncated {
		add(ReasonTruncatedKept, true, rs.truncated, "records of answers cut at the token limit",
			"gendex gen --server URL --redo truncated --max-new-tokens N "+dir+" (or accept them: check --include-truncated)")
	}
	if o.MaxLength > 0 && rs.tooLong > 0 {
		fs = append(fs, finding{reason: ReasonTooLong, blocks: true, count: rs.tooLong, tokens: rs.tooLongTokens,
			detail: fmt.Sprintf("records longer than --max-length %d tokens (prompt + completion; the longest %d)", o.MaxLength, rs.longest),
			fix:    fmt.Sprintf("move %s aside and run gendex export --max-len %d %s", filepath.Join(dir, "tokenized.jsonl"), o.MaxLength, dir)})
	}
	if o.MaxLength > 0 {
		add(ReasonLenUnknown, false, rs.lenUnknown, "records whose answer carries no token count (their length is unknown)", "")
	}
	fs = append(fs, rs.content(dir)...)
	switch mixed, ways, answers := mixedModels(v, name); {
	case mixed:
		fs = append(fs, finding{reason: ReasonMixed, blocks: !o.AllowMixed, count: answers, detail: "answers made in more than one way: " + ways,
			fix: "answer the other way's ids again the one way (gendex gen --redo FILE), or accept it: check --allow-mixed"})
	case answers > 0:
		fs = append(fs, finding{reason: ReasonMadeBy, count: answers, detail: "answers made one way: " + ways})
	}
	add(ReasonFailed, false, s.Overlap.ErrorsOpen, "prompts that failed for good (no record is owed for them)", "gendex query errors "+name)
	return fs, nil
}

// recordStats is what a walk over a dataset's records counts.
type recordStats struct {
	truncated, tooLong, tooLongTokens, lenUnknown, longest uint64
	// The content checks: read is false when they were not made (why says
	// why).
	read                  bool
	why                   string
	think, empty, records uint64
	texts                 map[uint64]uint64 // a hash of each answer's text -> answers with it
}

// checkRecords walks the dataset's records (tokenized), each with its
// answer's counts and, for the content checks, its answer's line.
func checkRecords(v *store.View, name string, o CheckOptions, files map[uint32]*os.File) (recordStats, error) {
	rs := recordStats{read: AnswerText != nil, texts: map[uint64]uint64{}}
	if !rs.read {
		rs.why = "this reader of the index cannot read answer text"
	}
	err := v.Each(name, store.Tokenized, func(tr *store.Record) error {
		ar, ok, err := v.Get(name, store.Raw, tr.ID)
		if err != nil || !ok {
			return err // a record without an answer is the owed count's
		}
		rs.records++
		if store.Truncated(ar.Finish) {
			rs.truncated++
		}
		if o.MaxLength > 0 {
			p, c := ar.PromptTokens, ar.CompletionTokens
			if p < 0 || c < 0 {
				p, c = tr.PromptTokens, tr.CompletionTokens
			}
			if n := p + c; p < 0 || c < 0 {
				rs.lenUnknown++
			} else if n > int64(o.MaxLength) {
				rs.tooLong++
				rs.tooLongTokens += uint64(n)
				rs.longest = max(rs.longest, uint64(n))
			}
		}
		if rs.read {
			rs.readContent(v, &ar, files)
		}
		return nil
	})
	return rs, err
}

// readContent makes the content checks of one answer.
func (rs *recordStats) readContent(v *store.View, r *store.Record, files map[uint32]*os.File) {
	f := files[r.File]
	if f == nil {
		path, ok := v.FilePath(r.File)
		if !ok {
			rs.read, rs.why = false, fmt.Sprintf("an answer's file (id %d) is no longer in the index", r.File)
			return
		}
		var err error
		if f, err = os.Open(path); err != nil {
			rs.read, rs.why = false, err.Error()
			return
		}
		files[r.File] = f
	}
	line := make([]byte, r.Length)
	if _, err := f.ReadAt(line, r.Offset); err != nil || store.LineSum(line) != r.Sum {
		rs.read, rs.why = false, fmt.Sprintf("%s:%d no longer holds the answer the index read (run 'gendex ingest' on it)", f.Name(), r.Line)
		return
	}
	text, ok, reasoning, err := AnswerText(line)
	if err != nil || !ok || strings.TrimSpace(text) == "" {
		rs.empty++
		return
	}
	if reasoning != "" && (strings.Contains(text, "<think>") || strings.Contains(text, "</think>")) {
		rs.think++
	}
	h := fnv.New64a()
	h.Write([]byte(text))
	rs.texts[h.Sum64()]++
}

// repeatAt is how many prompts with one answer text make it a sign of a
// broken template or server: at least 3, and more than 1% of the records.
func repeatAt(records uint64) uint64 { return max(3, records/100+1) }

// content is the content checks' findings.
func (rs *recordStats) content(dir string) []finding {
	if !rs.read {
		if rs.records == 0 {
			return nil
		}
		return []finding{{reason: ReasonNotRead, detail: "the content checks were not made: " + rs.why}}
	}
	var fs []finding
	if rs.think > 0 {
		fs = append(fs, finding{reason: ReasonThink, blocks: true, count: rs.think,
			detail: "answers with <think> markers in their content while their reasoning is kept apart",
			fix:    "serve with the model's --reasoning-parser, then gendex gen --redo FILE " + dir})
	}
	if rs.empty > 0 {
		fs = append(fs, finding{reason: ReasonEmpty, blocks: true, count: rs.empty,
			detail: "records of answers with empty content",
			fix:    "gendex query list DATASET, then gendex gen --redo FILE " + dir})
	}
	var same, texts, most uint64
	at := repeatAt(rs.records)
	for _, n := range rs.texts {
		if n >= at {
			same += n
			texts++
			most = max(most, n)
		}
	}
	if same > 0 {
		fs = append(fs, finding{reason: ReasonRepeated, blocks: true, count: same,
			detail: fmt.Sprintf("answers sharing one text with %d or more prompts (%d texts, the most repeated %d times): a broken template or server?", at-1, texts, most),
			fix:    "check the server's chat template, then gendex gen --redo FILE " + dir})
	}
	return fs
}

// mixedModels reports whether the dataset's answers were made in more
// than one way: by more than one model (or a model and the simulator), or
// with more than one provenance (gen's "provenance": the sampling sent,
// the server's identity and how gen asked, "gen"; its max_new_tokens
// aside, which a redo of cut answers raises). Lines without a provenance
// differ only by their model; a provenance without "gen" (an older
// gendex's) is unknown there, one way with those that agree on the rest.
// It counts the answers that count (a redo's replaced ones not), and
// names each way with them; a file indexed before the index kept those
// counts its answer lines, and says so.
func mixedModels(v *store.View, name string) (mixed bool, ways string, total uint64) {
	type count struct{ answers, lines uint64 } // lines: of files that keep no answers
	by := map[string]*count{}                  // a way -> its count
	models := map[string]bool{}
	provs := map[string]map[string]bool{} // provenance without "gen" -> its "gen" parts ("": unknown)
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
			who := m.Model
			if who == "" {
				who = "unnamed"
			}
			if m.Simulated {
				who += " (simulated)"
			}
			models[who] = true
			way := who
			if p, shown, ok := canonicalProvenance(m.Provenance); ok {
				base, asked := splitAsked(p)
				if provs[base] == nil {
					provs[base] = map[string]bool{}
				}
				provs[base][asked] = true
				way += " " + shown
			} else {
				way += " (provenance unknown)"
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
			const way = "an unknown model (provenance unknown)"
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
		mixed = mixed || len(asked) > 1
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
