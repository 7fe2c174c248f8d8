package query

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"gendex/store"
)

// sum adds known values; one unknown makes the sum unknown.
type sum struct {
	v       uint64
	unknown bool
}

func (s *sum) add(v any) {
	switch x := v.(type) {
	case uint64:
		s.v += x
	case int64:
		s.v += uint64(x)
	default:
		s.unknown = true
	}
}

func (s sum) value() any {
	if s.unknown {
		return nil
	}
	return s.v
}

func pct(num, den uint64) any {
	if den == 0 {
		return nil
	}
	return Fixed{100 * float64(num) / float64(den), 2}
}

func summaries(v *store.View, names []string) ([]store.Summary, error) {
	out := make([]store.Summary, 0, len(names))
	for _, n := range names {
		s, err := v.Summary(n)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

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
// are in neither prompts nor missing_raw.
func progress(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	out.Columns([]string{"dataset", "prompts", "raw", "tokenized", "errors", "missing_raw", "excluded", "missing_tokenized", "done_pct", "truncated", "redo", "stale", "skipped"})
	var tot [7]sum
	var answered, truncated, skipped, redo, stale uint64
	for _, s := range sums {
		owed := s.Owed()
		var prompts, missingRaw, done any
		if s.Stage(store.Prompts).Files > 0 {
			prompts = s.Stage(store.Prompts).Records
			missingRaw = owed.Prompts
			done = pct(s.Overlap.Answered-min(owed.Redo, s.Overlap.Answered), s.Stage(store.Prompts).Records)
		}
		row := []any{s.Dataset, prompts, s.Stage(store.Raw).Records, s.Stage(store.Tokenized).Records,
			s.Overlap.ErrorsOpen, missingRaw, s.Excluded(), owed.Records, done, s.Truncated(), owed.Redo, owed.Stale, s.Skipped()}
		for i := range tot {
			tot[i].add(row[i+1])
		}
		answered += s.Overlap.Answered - min(owed.Redo, s.Overlap.Answered)
		truncated += s.Truncated()
		skipped += s.Skipped()
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
	var done any
	if !tot[0].unknown {
		done = pct(answered, tot[0].v)
	}
	return out.Total(append(total, done, truncated, redo, stale, skipped))
}

// ToGo is the answers a progress row (or its total) still owes: its
// prompts without an answer (missing_raw) and the answers a redo is asking
// again (redo), store.Owed's ToGo; ok is false when its prompts are
// unknown. A writer older than the redo column answers without it.
func ToGo(prog *Result, row []any) (left int64, ok bool) {
	if _, ok := AsFloat(prog.Get(row, "prompts")); !ok {
		return 0, false
	}
	m, _ := AsFloat(prog.Get(row, "missing_raw"))
	r, _ := AsFloat(prog.Get(row, "redo"))
	return int64(m + r), true
}

// ranker finds nearest-rank percentiles in one pass over a histogram given
// in increasing order, when the total count n is known in advance.
type ranker struct {
	qs      []float64
	n, seen int64
	i       int
	out     []any
}

func newRanker(n int64, qs ...float64) *ranker {
	return &ranker{qs: qs, n: n, out: make([]any, len(qs))}
}

func (r *ranker) add(v, c int64) {
	r.seen += c
	for r.i < len(r.qs) && float64(r.seen) >= r.qs[r.i]*float64(r.n) {
		r.out[r.i] = v
		r.i++
	}
}

// sumHist adds histograms: dense below denseLimit tokens, sparse above.
type sumHist struct {
	dense  []int64
	sparse map[int64]int64
	n      int64
}

const denseLimit = 1 << 20

func (h *sumHist) add(v, c int64) {
	h.n += c
	if v >= denseLimit {
		if h.sparse == nil {
			h.sparse = map[int64]int64{}
		}
		h.sparse[v] += c
		return
	}
	if int(v) >= len(h.dense) {
		h.dense = append(h.dense, make([]int64, int(v)+1-len(h.dense))...)
	}
	h.dense[v] += c
}

func (h *sumHist) percentiles(qs ...float64) []any {
	r := newRanker(h.n, qs...)
	for v, c := range h.dense {
		if c > 0 {
			r.add(int64(v), c)
		}
	}
	big := make([]int64, 0, len(h.sparse))
	for v := range h.sparse {
		big = append(big, v)
	}
	slices.Sort(big)
	for _, v := range big {
		r.add(v, h.sparse[v])
	}
	return r.out
}

// tokens: sums over the records that carry a count; unknown_tokens counts
// responses without a completion count, unknown_prompt_tokens those without
// a prompt count. A sum over no known record is unknown, not 0:
// reasoning_tokens (inside completion_tokens) sums the answers that say
// how many of their tokens were reasoning, unknown when none does. truncated
// and skipped are as in progress: responses cut at the token limit (their
// completion tokens are in the sums), lines left out (whose tokens no sum
// can hold).
func tokens(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	out.Columns([]string{"dataset", "records", "prompt_tokens", "completion_tokens", "reasoning_tokens", "avg_completion_tokens",
		"p50_completion_tokens", "p90_completion_tokens", "p99_completion_tokens", "unknown_tokens", "unknown_prompt_tokens", "truncated", "skipped"})
	var all sumHist
	var tot store.Stats
	var truncated, skipped uint64
	for _, s := range sums {
		r := s.Stage(store.Raw)
		rank := newRanker(int64(r.Records-r.UnknownCompletion), 0.50, 0.90, 0.99)
		v.Histogram(s.Dataset, func(base int64, counts []int64) {
			for i, c := range counts {
				if c > 0 {
					rank.add(base+int64(i), c)
					all.add(base+int64(i), c)
				}
			}
		})
		if err := out.Row(tokenRow(s.Dataset, &r, rank.out, s.Truncated(), s.Skipped())); err != nil {
			return err
		}
		truncated += s.Truncated()
		skipped += s.Skipped()
		tot.Records += r.Records
		tot.PromptTokens += r.PromptTokens
		tot.CompletionTokens += r.CompletionTokens
		tot.UnknownCompletion += r.UnknownCompletion
		tot.UnknownPrompt += r.UnknownPrompt
		tot.ReasoningTokens += r.ReasoningTokens
		tot.ReasoningRecords += r.ReasoningRecords
	}
	return out.Total(tokenRow("TOTAL", &tot, all.percentiles(0.50, 0.90, 0.99), truncated, skipped))
}

func tokenRow(name string, r *store.Stats, p []any, truncated, skipped uint64) []any {
	var prompt, completion, reasoning, avg any
	if known := r.Records - r.UnknownPrompt; known > 0 {
		prompt = r.PromptTokens
	}
	if r.ReasoningRecords > 0 {
		reasoning = r.ReasoningTokens
	}
	if known := r.Records - r.UnknownCompletion; known > 0 {
		completion = r.CompletionTokens
		avg = Fixed{float64(r.CompletionTokens) / float64(known), 1}
	}
	if r.Records == 0 {
		prompt, completion = uint64(0), uint64(0)
	}
	return []any{name, r.Records, prompt, completion, reasoning, avg, p[0], p[1], p[2], r.UnknownCompletion, r.UnknownPrompt, truncated, skipped}
}

// throughput: responses that finished in the window ending now, by their own
// finish time (or the time they were indexed), measured by the store's one
// rate model (store.RateSpan): every answer up to the moment asked, the
// current second's so far included, over the seconds gone by (window_s:
// the window and the current second's part), and a dataset's window starts
// no earlier than its first response, so a run that began 10 s ago is
// measured over 10 s, not diluted over 30. TOTAL is the same rule over the datasets with a
// response in the window (store.TotalRate). accept_length is Σ completion
// tokens / Σ verify steps of the window's answers that carry SGLang's
// speculative decoding counts (unknown when none does); TOTAL's sums the
// datasets' windows.
func throughput(v *store.View, names []string, window time.Duration, now time.Time, out Sink) error {
	out.Columns([]string{"dataset", "window_s", "records", "completion_tokens", "records_per_s", "tokens_per_s", "unknown_tokens", "accept_length"})
	rates := make([]store.Rate, 0, len(names))
	var specTokens, specVerify int64
	for _, n := range names {
		first, ok := v.FirstSecond(n)
		r := store.RateSpan(now, window, first, ok)
		r.Records, r.Tokens, r.Unknown = v.Window(n, r.From, r.To)
		_, st, sv := v.SpecWindow(n, r.From, r.To)
		specTokens += st
		specVerify += sv
		rates = append(rates, r)
		if err := out.Row(rateRow(n, r, st, sv)); err != nil {
			return err
		}
	}
	return out.Total(rateRow("TOTAL", store.TotalRate(now, window, rates), specTokens, specVerify))
}

func rateRow(name string, r store.Rate, specTokens, specVerify int64) []any {
	var tok, tokRate any = r.Tokens, nil
	if perSec, ok := r.TokensPerSecond(); ok {
		tokRate = Fixed{perSec, 1}
	} else {
		tok = nil
	}
	return []any{name, Seconds(r.Secs), r.Records, tok, Fixed{r.PerSecond(), 2}, tokRate, r.Unknown,
		AcceptLength(uint64(max(specTokens, 0)), uint64(max(specVerify, 0)))}
}

// missing: ids of one dataset without a response (stage raw: prompts with
// neither a response nor a final error), or without a tokenized record
// (stage tokenized: prompts and responses, each with the reason; see
// untokenizedReason).
func missing(v *store.View, name string, stage store.Stage, bare bool, out Sink) error {
	s, err := v.Summary(name)
	if err != nil {
		return err
	}
	cols, row := []string{"dataset", "stage", "id"}, []any{name, stage.String(), ""}
	if stage == store.Tokenized {
		cols, row = append(cols, "reason"), append(row, "")
	}
	if bare {
		cols, row = cols[2:3], row[2:3]
	}
	if stage == store.Raw && s.Stage(store.Prompts).Files == 0 {
		return fmt.Errorf("dataset %s has no prompts file indexed, so which responses are missing is unknown (index its prompts*.jsonl)", name)
	}
	note, err := unmatchedNote(v, name)
	if err != nil {
		return err
	}
	if note != "" {
		if err := out.Note(note); err != nil {
			return err
		}
	}
	out.Columns(cols)
	if stage == store.Raw {
		return stopped(v.Missing(name, store.Prompts, func(id string) error {
			row[len(row)-1] = id
			return out.Row(row)
		}, store.Raw, store.Errors))
	}
	return stopped(v.Untokenized(name, func(u *store.Untokenized) error {
		if bare {
			row[0] = u.ID
		} else {
			row[2], row[3] = u.ID, untokenizedReason(u)
		}
		return out.Row(row)
	}))
}

// unmatchedNote is missing's note on a dataset's answers that have no id:
// they are indexed under their file and line (ingest.LineID,
// "raw_responses.jsonl:17"), which no prompt carries, so their prompts
// are listed as missing. "" when there are none. Only the keys that begin
// with an answers file's base name and ':' are walked.
func unmatchedNote(v *store.View, name string) (string, error) {
	var bases []string
	err := v.Files(func(fs store.FileState) error {
		if fs.Dataset == name && (fs.Stage == store.Raw || fs.Stage == store.Errors) {
			if b := filepath.Base(fs.Path); !slices.Contains(bases, b) {
				bases = append(bases, b)
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	slices.Sort(bases)
	var n int64
	var firsts []string
	for _, b := range bases {
		for _, st := range []store.Stage{store.Raw, store.Errors} {
			c, first, err := v.CountPrefix(name, st, b+":")
			if err != nil {
				return "", err
			}
			if c > 0 && len(firsts) < 3 && !slices.Contains(firsts, first) {
				firsts = append(firsts, first)
			}
			n += c
		}
	}
	if n == 0 {
		return "", nil
	}
	eg := strings.Join(firsts, ", ")
	if n > int64(len(firsts)) {
		eg += ", ..."
	}
	what := fmt.Sprintf("%d answers of %s have", n, name)
	if n == 1 {
		what = fmt.Sprintf("1 answer of %s has", name)
	}
	return fmt.Sprintf("%s no id (%s); they are indexed by file and line, which no prompt carries, so they cannot be matched to prompts and their prompts are listed as missing; "+
		"give ingest --id PATH (or --map id=PATH) where the lines keep the prompt's id", what, eg), nil
}

// StaleReason is missing's reason for an answer whose record or exclusion
// was built from the answer a redo replaced.
const StaleReason = "answer replaced by a redo: run gendex export"

// untokenizedReason says why an id has no tokenized record: a record or
// exclusion of a replaced answer (StaleReason), its exclusion
// ("excluded: REASON: DETAIL"), a response not exported yet, its final
// error ("failed: REASON: MESSAGE"), a conversation with some turns
// answered, or no answer yet; the first that applies.
func untokenizedReason(u *store.Untokenized) string {
	with := func(head, reason, detail string) string {
		if reason == "" {
			reason = "unknown"
		}
		if detail == "" {
			return head + ": " + reason
		}
		return head + ": " + reason + ": " + detail
	}
	switch {
	case u.Stale:
		return StaleReason
	case u.Excluded != nil:
		return with("excluded", u.Excluded.Finish, u.Excluded.Message)
	case u.Answered:
		return "not exported yet"
	case u.Failed != nil:
		return with("failed", u.Failed.Finish, u.Failed.Message)
	case u.Turns == 1:
		return "conversation half done (1 turn answered)"
	case u.Turns > 1:
		return fmt.Sprintf("conversation half done (%d turns answered)", u.Turns)
	}
	return "no answer yet"
}

// finishColumns are finish's fixed columns after dataset and records:
// gendex's reasons (store's FinishStop, ...), and the abort an SGLang
// server writes, in this order, each 0 when no answer ended so, so that a
// script's columns do not move with the data.
var finishColumns = []string{store.FinishStop, store.FinishLength, store.FinishToolCalls, "abort", store.FinishFilter}

// finish: responses per finish reason: the fixed finishColumns, then any
// other reason seen, the most common first; "unknown" counts responses
// whose reason the index cannot know (they carry none, or say "unknown").
func finish(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	all := map[string]uint64{}
	finishes := make([]map[string]uint64, len(sums)) // each dataset's, mapped onto gendex's reasons
	for i, s := range sums {
		r := s.Stage(store.Raw)
		finishes[i] = r.Finishes()
		for k, c := range finishes[i] {
			if k != "unknown" { // a literal "unknown" joins the unknown column
				all[k] += c
			}
		}
	}
	reasons := slices.Clone(finishColumns)
	for _, k := range sortedKeys(all) {
		if !slices.Contains(finishColumns, k) {
			reasons = append(reasons, k)
		}
	}
	cols := []string{"dataset", "records"}
	for _, k := range reasons {
		if k == "dataset" || k == "records" {
			k = "finish_" + k // keep column names unique
		}
		cols = append(cols, k)
	}
	out.Columns(append(cols, "unknown"))
	total := make([]any, len(reasons)+3)
	var tr, tu uint64
	for i, s := range sums {
		r := s.Stage(store.Raw)
		row := []any{s.Dataset, r.Records}
		var named uint64
		for _, k := range reasons {
			row = append(row, finishes[i][k])
			named += finishes[i][k]
		}
		row = append(row, r.Records-named)
		tr += r.Records
		tu += r.Records - named
		if err := out.Row(row); err != nil {
			return err
		}
	}
	total[0], total[1] = "TOTAL", tr
	for i, k := range reasons {
		total[i+2] = all[k]
	}
	total[len(total)-1] = tu
	return out.Total(total)
}

// errorList: failed requests with no response since, one row each.
func errorList(v *store.View, names []string, out Sink) error {
	out.Columns([]string{"dataset", "id", "reason", "message", "source"})
	for _, n := range names {
		var ids []string
		if err := v.Missing(n, store.Errors, func(id string) error { ids = append(ids, id); return nil }, store.Raw); err != nil {
			return err
		}
		for _, id := range ids {
			r, ok, err := v.Get(n, store.Errors, id)
			if err != nil || !ok {
				return err
			}
			path, _ := v.FilePath(r.File)
			if err := out.Row([]any{n, id, r.Finish, r.Message, fmt.Sprintf("%s:%d", path, r.Line)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// datasetList: every dataset with its files and its record counts per
// stage, the turns of conversations and the exclusions among them.
func datasetList(v *store.View, names []string, out Sink) error {
	sums, err := summaries(v, names)
	if err != nil {
		return err
	}
	out.Columns([]string{"dataset", "files", "prompts", "raw", "tokenized", "errors", "turns", "excluded"})
	for _, s := range sums {
		var files uint64
		for _, st := range store.Stages() {
			files += s.Stage(st).Files
		}
		row := []any{s.Dataset, files, s.Stage(store.Prompts).Records, s.Stage(store.Raw).Records,
			s.Stage(store.Tokenized).Records, s.Stage(store.Errors).Records, s.Stage(store.Turns).Records, s.Stage(store.Excluded).Records}
		if err := out.Row(row); err != nil {
			return err
		}
	}
	return nil
}

// fileList: every file of the datasets, with where the index stands in
// it; a file gone from the disk and forgotten is no longer one of them. pending_bytes is what lies past the last indexed line: an unfinished
// line, or lines written since the last ingest.
func fileList(v *store.View, names []string, out Sink) error {
	out.Columns([]string{"dataset", "stage", "path", "lines", "records", "duplicates", "skipped", "unknown_tokens", "indexed_bytes", "pending_bytes"})
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	return v.Files(func(fs store.FileState) error {
		if !want[fs.Dataset] {
			return nil
		}
		var pending any
		fi, err := os.Stat(fs.Path)
		if err == nil {
			pending = max(0, fi.Size()-fs.Offset)
		} else if fs.ID == 0 && errors.Is(err, os.ErrNotExist) {
			return nil // gone, and forgotten: the index holds nothing of it
		}
		return out.Row([]any{fs.Dataset, fs.Stage.String(), fs.Path, fs.Lines, fs.Records, fs.Duplicates + fs.ErrorDuplicates,
			fs.Skipped, fs.Unknown, fs.Offset, pending})
	})
}

// show: the stored line of one record, read at its offset. Without --stage
// it looks in raw, errors, prompts, tokenized, excluded and turns (whose
// ids are ID#TURN), in that order.
func show(v *store.View, name string, q Query, out Sink) error {
	order := []store.Stage{store.Raw, store.Errors, store.Prompts, store.Tokenized, store.Excluded, store.Turns}
	if q.StageSet {
		order = []store.Stage{q.Stage}
	}
	for _, st := range order {
		r, ok, err := v.Get(name, st, q.ID)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		path, ok := v.FilePath(r.File)
		if !ok {
			return fmt.Errorf("dataset %s id %q: its file (id %d) is no longer in the index", name, q.ID, r.File)
		}
		line, err := readLine(path, r.Offset, r.Length)
		if err != nil {
			return fmt.Errorf("dataset %s id %q: %w", name, q.ID, err)
		}
		if store.LineSum(line) != r.Sum {
			return fmt.Errorf("dataset %s id %q: %s:%d no longer holds this record (the file changed since it was indexed; run 'gendex ingest' on it)", name, q.ID, path, r.Line)
		}
		return out.Line(line)
	}
	if q.StageSet && q.Stage == store.Turns && !strings.Contains(q.ID, "#") {
		return store.NotFound("dataset %s has no turns record with id %q (a turn's id is ID#TURN, e.g. %s#1)", name, q.ID, q.ID)
	}
	if q.StageSet {
		return store.NotFound("dataset %s has no %s record with id %q", name, q.Stage, q.ID)
	}
	return store.NotFound("dataset %s has no record with id %q", name, q.ID)
}

func readLine(path string, off, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		return nil, fmt.Errorf("reading %s at byte %d: %w", path, off, err)
	}
	return buf, nil
}
